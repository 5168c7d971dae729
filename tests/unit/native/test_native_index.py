"""OffsetIndex / TimeIndex of ``pylog._native`` on real files: Kafka's byte
layout, floor lookups, truncation, resizing, reopening and sanity checks."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest

from pylog import _native
from pylog.errors import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    KafkaStorageError,
)

BASE = 1000


def offset_index(tmp_path: Path, max_size: int = 4096, base: int = BASE) -> _native.OffsetIndex:
    return _native.OffsetIndex(str(tmp_path / f"{base:020d}.index"), base, max_index_size=max_size)


def time_index(tmp_path: Path, max_size: int = 4096, base: int = BASE) -> _native.TimeIndex:
    return _native.TimeIndex(
        str(tmp_path / f"{base:020d}.timeindex"), base, max_index_size=max_size
    )


def test_new_offset_index_is_preallocated(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_size=1003)
    assert os.path.getsize(idx.path) == 1000
    assert (idx.entries, idx.max_entries, idx.size_in_bytes) == (0, 125, 0)
    assert idx.base_offset == BASE
    assert idx.last_offset == BASE
    assert not idx.is_full()
    assert idx.lookup(5000) == (BASE, 0)


def test_offset_index_bytes_are_kafkas(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(1005, 4200)
    idx.append(1010, 9000)
    idx.close()
    data = Path(tmp_path / f"{BASE:020d}.index").read_bytes()
    assert data == struct.pack(">IIII", 5, 4200, 10, 9000)


def test_time_index_bytes_are_kafkas(tmp_path: Path) -> None:
    idx = time_index(tmp_path)
    idx.maybe_append(1_700_000_000_000, 1005)
    idx.maybe_append(1_700_000_000_500, 1010)
    idx.close()
    data = Path(tmp_path / f"{BASE:020d}.timeindex").read_bytes()
    assert data == struct.pack(">qIqI", 1_700_000_000_000, 5, 1_700_000_000_500, 10)


def test_append_rules(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_size=24)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE - 1, 0)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 0)
    idx.append(BASE, 0)
    idx.append(BASE + 10, 100)
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 10, 200)  # offset must grow
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 20, 99)  # position must not go back
    idx.append(BASE + 20, 100)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.append(BASE + 30, 300)
    assert idx.entries == 3
    assert idx.last_offset == BASE + 20
    assert idx.size_in_bytes == 24


def test_lookup_is_a_floor_across_warm_and_cold_sections(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_size=1 << 20)
    n = 5000  # well beyond the 1024 entries of the warm section
    for i in range(1, n + 1):
        idx.append(BASE + 10 * i, 100 * i)
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup(BASE + 9) == (BASE, 0)
    assert idx.lookup(BASE + 10) == (BASE + 10, 100)
    for target in range(BASE, BASE + 10 * n + 30, 13):
        k = min((target - BASE) // 10, n)
        want = (BASE, 0) if k == 0 else (BASE + 10 * k, 100 * k)
        assert idx.lookup(target) == want
    assert idx.entry(0) == (BASE + 10, 100)
    assert idx.entry(n - 1) == (BASE + 10 * n, 100 * n)
    with pytest.raises(IndexError):
        idx.entry(n)
    with pytest.raises(IndexError):
        idx.entry(-1)


def test_time_index_maybe_append_and_lookup(tmp_path: Path) -> None:
    idx = time_index(tmp_path, max_size=12 * 3)
    assert idx.last_entry() == (-1, BASE)
    assert idx.lookup(10) == (-1, BASE)
    idx.maybe_append(100, BASE)
    idx.maybe_append(100, BASE + 5)  # equal timestamp: skipped
    assert idx.entries == 1
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(99, BASE + 10)  # timestamp goes back
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(200, BASE - 1)
    idx.maybe_append(200, BASE + 10)
    idx.maybe_append(300, BASE + 20)
    assert idx.is_full()
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(300, BASE + 20)
    idx.maybe_append(300, BASE + 20, skip_full_check=True)  # nothing new: fine
    assert idx.lookup(99) == (-1, BASE)
    assert idx.lookup(150) == (100, BASE)
    assert idx.lookup(250) == (200, BASE + 10)
    assert idx.lookup(10**15) == (300, BASE + 20)
    assert idx.last_entry() == (300, BASE + 20)
    assert idx.entry(1) == (200, BASE + 10)


def test_truncate_to_and_truncate(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    for i in range(1, 11):
        idx.append(BASE + 10 * i, 100 * i)
    idx.truncate_to(BASE + 55)
    assert (idx.entries, idx.last_offset) == (5, BASE + 50)
    idx.truncate_to(BASE + 50)
    assert (idx.entries, idx.last_offset) == (4, BASE + 40)
    idx.append(BASE + 45, 450)  # appending after a truncation works
    assert idx.lookup(BASE + 47) == (BASE + 45, 450)
    idx.truncate()
    assert idx.entries == 0
    assert idx.lookup(BASE + 47) == (BASE, 0)

    t = time_index(tmp_path)
    for i in range(1, 11):
        t.maybe_append(1000 * i, BASE + 10 * i)
    t.truncate_to(BASE + 35)
    assert (t.entries, t.last_entry()) == (3, (3000, BASE + 30))
    t.truncate()
    assert t.last_entry() == (-1, BASE)


def test_resize_and_trim(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_size=800)
    for i in range(1, 11):
        idx.append(BASE + i, i * 10)
    assert idx.resize(804) is False  # rounds down to the current length
    assert idx.resize(1600) is True
    assert idx.max_entries == 200
    assert os.path.getsize(idx.path) == 1600
    assert idx.lookup(BASE + 5) == (BASE + 5, 50)
    idx.trim_to_valid_size()
    assert os.path.getsize(idx.path) == 80
    assert idx.is_full()
    t = time_index(tmp_path, max_size=120)
    t.maybe_append(1, BASE + 1)
    t.trim_to_valid_size()
    assert os.path.getsize(t.path) == 12
    assert t.resize(1200)
    assert t.max_entries == 100


def test_reopen_after_clean_and_unclean_shutdown(tmp_path: Path) -> None:
    path = str(tmp_path / "0.index")
    idx = _native.OffsetIndex(path, 0, max_index_size=8000)
    for i in range(1, 21):
        idx.append(i * 3, i * 100)
    idx.truncate_to(31)  # keeps offsets 3..30: 10 entries
    idx.flush()
    del idx  # unclean: not trimmed, zero tail left in place
    assert os.path.getsize(path) == 8000
    idx = _native.OffsetIndex(path, 0, max_index_size=8000)
    assert (idx.entries, idx.last_offset, idx.max_entries) == (10, 30, 1000)
    idx.close()  # clean: trimmed
    assert os.path.getsize(path) == 80
    ro = _native.OffsetIndex(path, 0, max_index_size=0, writable=False)
    assert (ro.entries, ro.last_offset) == (10, 30)
    assert ro.lookup(17) == (15, 500)
    with pytest.raises(KafkaStorageError):
        ro.append(40, 5000)
    ro.close()

    tpath = str(tmp_path / "0.timeindex")
    t = _native.TimeIndex(tpath, 0, max_index_size=1200)
    for i in range(1, 6):
        t.maybe_append(i * 1000, i)
    del t
    t = _native.TimeIndex(tpath, 0, max_index_size=1200)
    assert (t.entries, t.last_entry()) == (5, (5000, 5))


def test_closed_index_raises_storage_error(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 1)
    idx.close()
    with pytest.raises(KafkaStorageError):
        idx.lookup(BASE + 1)
    with pytest.raises(KafkaStorageError):
        idx.append(BASE + 2, 2)
    idx.close()  # closing twice is harmless


def test_rename_keeps_the_mapping(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 1, 1)
    new = str(tmp_path / f"{BASE:020d}.index.deleted")
    idx.rename_to(new)
    assert idx.path == new
    assert not os.path.exists(tmp_path / f"{BASE:020d}.index")
    idx.append(BASE + 2, 2)
    assert idx.lookup(BASE + 3) == (BASE + 2, 2)


def test_sanity_check_and_corrupt_indexes(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    idx.append(BASE + 10, 10)
    idx.append(BASE + 20, 20)
    idx.sanity_check()
    idx.close()
    path = tmp_path / f"{BASE:020d}.index"

    def corrupted(data: bytes) -> _native.OffsetIndex:
        path.write_bytes(data)
        return _native.OffsetIndex(str(path), BASE, max_index_size=0, writable=False)

    corrupted(struct.pack(">IIII", 10, 10, 20, 20)).sanity_check()
    for bad in (
        struct.pack(">IIII", 20, 10, 10, 20),  # offsets go back
        struct.pack(">IIII", 10, 10, 10, 20),  # offsets repeat
        struct.pack(">IIII", 10, 20, 20, 10),  # positions go back
        struct.pack(">IIII", 10, 10, 20, 20) + b"\x01",  # not whole entries
        struct.pack(">II", 0x8000_0000, 0),  # relative offset beyond i32
    ):
        with pytest.raises(CorruptIndexError):
            corrupted(bad).sanity_check()

    tpath = tmp_path / "t.timeindex"
    tpath.write_bytes(struct.pack(">qIqI", 500, 1, 400, 2))
    with pytest.raises(CorruptIndexError):
        _native.TimeIndex(str(tpath), 0, max_index_size=0, writable=False).sanity_check()
    tpath.write_bytes(struct.pack(">qIqI", 400, 1, 500, 2) + b"\x00" * 5)
    with pytest.raises(CorruptIndexError):
        _native.TimeIndex(str(tpath), 0, max_index_size=0, writable=False).sanity_check()


def test_missing_read_only_index_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError):
        _native.OffsetIndex(str(tmp_path / "missing.index"), 0, max_index_size=0, writable=False)


def test_threads_share_an_index(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_size=1 << 20)
    for i in range(1, 10_001):
        idx.append(BASE + i, i)
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            for i in range(1, 10_001, 7):
                assert idx.lookup(BASE + i) == (BASE + i, i)
                idx.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
