"""Real disks that fail, for the JBOD tests (root only; CI runs as root).

* :func:`ext4_disk`: an ext4 filesystem on a loop device over a file. It fails
  for real with :func:`fail_disk`: the ``FS_IOC_SHUTDOWN`` ioctl (what
  xfstests' ``godown`` does) shuts the filesystem down, and from then on every
  read or write under it returns EIO, as a dying disk does. Unmounting and
  mounting it again (:func:`repair_disk`) brings it back, its journal replayed.
* :func:`tiny_tmpfs`: a tmpfs of a few MiB to fill up (ENOSPC).

Device-mapper's ``error`` target would be the other classic, but this kernel
has no device-mapper (``/dev/mapper/control`` is missing), and no FUSE library
is installed; a read-only remount is refused while the broker holds files open
for writing. Every mount is undone when the context ends, lazily if busy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# _IOR('X', 125, __u32): ext4's and xfs's shutdown ioctl.
FS_IOC_SHUTDOWN = 0x8004587D
# Stop at once, without flushing the journal: the crash of a disk.
_SHUTDOWN_NOLOGFLUSH = 2


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a failing filesystem needs root (CI runs as root)")


class Ext4Disk:
    def __init__(self, image: Path, mount_point: Path) -> None:
        self.image = image
        self.mount_point = mount_point
        self.device: str | None = None

    def mount(self) -> None:
        assert self.device is not None
        done = _run("mount", "-t", "ext4", self.device, str(self.mount_point))
        if done.returncode != 0:
            raise RuntimeError(f"mount {self.device}: {done.stderr.strip()}")

    def umount(self) -> None:
        if _run("umount", str(self.mount_point)).returncode != 0:
            _run("umount", "-l", str(self.mount_point))


@contextlib.contextmanager
def ext4_disk(base: Path, size_mb: int = 64) -> Iterator[Ext4Disk]:
    """A fresh ext4 filesystem mounted under ``base``; skips where the
    machine cannot make one (not root, no loop device)."""
    _need_root()
    image = base / f"disk-{uuid.uuid4().hex[:8]}.img"
    mount_point = base / f"mnt-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    with open(image, "wb") as f:
        f.truncate(size_mb << 20)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    if made.returncode != 0:
        pytest.skip(f"cannot make an ext4 filesystem here: {made.stderr.strip()}")
    loop = _run("losetup", "-f", "--show", str(image))
    if loop.returncode != 0:
        pytest.skip(f"no loop device here: {loop.stderr.strip()}")
    disk = Ext4Disk(image, mount_point)
    disk.device = loop.stdout.strip()
    try:
        try:
            disk.mount()
        except RuntimeError as e:
            pytest.skip(f"cannot mount a loop device here: {e}")
        yield disk
    finally:
        disk.umount()
        _run("losetup", "-d", disk.device)
        with contextlib.suppress(OSError):
            image.unlink()


def fail_disk(disk: Ext4Disk) -> None:
    """Shut the filesystem down: every I/O under it fails with EIO from now."""
    fd = os.open(disk.mount_point, os.O_RDONLY)
    try:
        fcntl.ioctl(fd, FS_IOC_SHUTDOWN, struct.pack("I", _SHUTDOWN_NOLOGFLUSH))
    finally:
        os.close(fd)


def repair_disk(disk: Ext4Disk) -> None:
    """Unmount the failed filesystem and mount it again (the journal replays):
    the disk replaced, its data as the last sync left it."""
    disk.umount()
    disk.mount()


@contextlib.contextmanager
def tiny_tmpfs(base: Path, size: str = "4m") -> Iterator[Path]:
    _need_root()
    mount_point = base / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount_point.mkdir()
    done = _run("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        _run("umount", "-l", str(mount_point))


def fill(path: Path) -> None:
    """Use up the free space of the filesystem under ``path``."""
    fd = os.open(path / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
