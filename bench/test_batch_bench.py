"""The leader's validate + assign offsets on a 1 MiB uncompressed v2 batch
(1000 records of ~1 KB): the native call against a pure-Python baseline
doing the same work on the same bytes (struct-parsed header, every record's
varint framing walked, CRC32C from the ``crc32c`` package, header fields
rewritten and the CRC recomputed). Both benchmarks share one group so the
ratio shows, and the ratio is printed at the end.

    .venv/bin/python -m pytest -q -s bench/test_batch_bench.py
"""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import pytest

from pylog import _native

NOW = 1_700_000_000_000
GROUP = "validate+assign 1 MiB uncompressed batch"
MEANS: dict[str, float] = {}

HEADER = struct.Struct(">qiibIhiqqqhii")


def one_mib_batch() -> bytearray:
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
        (
            b"key-%06d" % i,
            bytes((i * 31 + j * 7) % 251 for j in range(1024)),
            [("trace", b"abc")],
            NOW + i,
        )
        for i in range(1000)
    ]
    return bytearray(_native.build_batch(records))


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zigzag varint at ``pos``: (value, next position)."""
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def python_validate_and_assign(buf: bytearray, base_offset: int, epoch: int) -> tuple[int, int]:
    """The same checks and writes as the native leader path, in pure Python."""
    (
        _base,
        length,
        _epoch,
        magic,
        crc,
        attributes,
        last_delta,
        base_ts,
        _max_ts,
        producer_id,
        _producer_epoch,
        base_sequence,
        count,
    ) = HEADER.unpack_from(buf, 0)
    size = 12 + length
    if magic != 2 or size > len(buf) or length < 49:
        raise ValueError("bad header")
    view = memoryview(buf)
    if crc32c.crc32c(view[21:size]) != crc:
        raise ValueError("crc")
    if count != last_delta + 1 or attributes & 0x20 or (producer_id >= 0 and base_sequence < 0):
        raise ValueError("client rules")
    pos = 61
    max_ts = -1
    for i in range(count):
        rec_len, pos = _varint(buf, pos)
        end = pos + rec_len
        p = pos + 1  # attributes
        ts_delta, p = _varint(buf, p)
        offset_delta, p = _varint(buf, p)
        if offset_delta != i:
            raise ValueError("offset delta")
        key_len, p = _varint(buf, p)
        p += max(key_len, 0)
        value_len, p = _varint(buf, p)
        p += max(value_len, 0)
        headers, p = _varint(buf, p)
        for _ in range(headers):
            hk, p = _varint(buf, p)
            p += hk
            hv, p = _varint(buf, p)
            p += max(hv, 0)
        if p != end:
            raise ValueError("record framing")
        max_ts = max(max_ts, base_ts + ts_delta)
        pos = end
    if pos != size:
        raise ValueError("trailing bytes")
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, epoch)
    struct.pack_into(">q", buf, 35, max_ts)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(view[21:size]))
    view.release()
    return base_offset + count - 1, max_ts


def _record(name: str, benchmark: Any) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEANS[name] = stats.stats.mean


def test_native_validate_and_assign(benchmark: Any) -> None:
    buf = one_mib_batch()
    benchmark.group = GROUP
    benchmark.extra_info["bytes"] = len(buf)
    info = benchmark(
        _native.validate_and_assign_offsets,
        buf,
        base_offset=0,
        partition_leader_epoch=3,
        now_ms=NOW,
        log_append_time=False,
        max_batch_size=2 << 20,
        timestamp_before_max_ms=2**63 - 1,
        timestamp_after_max_ms=2**63 - 1,
        require_keys=False,
    )
    assert info.last_offset == 999
    _record("native", benchmark)


def test_python_validate_and_assign(benchmark: Any) -> None:
    buf = one_mib_batch()
    benchmark.group = GROUP
    benchmark.extra_info["bytes"] = len(buf)
    last, max_ts = benchmark.pedantic(
        python_validate_and_assign, args=(buf, 0, 3), rounds=5, iterations=1
    )
    assert last == 999 and max_ts == NOW + 999
    # the Python result is what the native path wrote
    check = one_mib_batch()
    _native.validate_and_assign_offsets(
        check,
        base_offset=0,
        partition_leader_epoch=3,
        now_ms=NOW,
        log_append_time=False,
        max_batch_size=2 << 20,
        timestamp_before_max_ms=2**63 - 1,
        timestamp_after_max_ms=2**63 - 1,
        require_keys=False,
    )
    assert check == buf
    _record("python", benchmark)


def test_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    if not {"native", "python"} <= MEANS.keys():
        pytest.skip("benchmarks disabled")
    size = len(one_mib_batch())
    with capsys.disabled():
        native, python = MEANS["native"], MEANS["python"]
        print(
            f"\n[{GROUP}] native {native * 1e6:.0f} µs ({size / native / 1e9:.2f} GB/s), "
            f"pure Python {python * 1e3:.1f} ms ({size / python / 1e6:.1f} MB/s): "
            f"native is {python / native:.0f}x faster"
        )
