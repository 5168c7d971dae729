"""Record batches through pylog._native, cross-checked against kafka-python's
independent implementation of Kafka's record formats."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from pylog import _native as n
from pylog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnsupportedCompressionTypeError,
)

CODECS = [
    n.COMPRESSION_NONE,
    n.COMPRESSION_GZIP,
    n.COMPRESSION_SNAPPY,
    n.COMPRESSION_LZ4,
    n.COMPRESSION_ZSTD,
]
NOW = 1_700_000_000_000
# max_batch_size without a limit: the most a batch's i32 length field allows.
NO_LIMIT = 2**31 - 1
# The leader's append policy at Kafka's topic defaults (max.message.bytes,
# message.timestamp.type / before / after, a non-compacted topic).
POLICY: dict = {
    "log_append_time": False,
    "max_batch_size": 1048588,
    "timestamp_before_max_ms": 2**63 - 1,
    "timestamp_after_max_ms": 2**63 - 1,
    "require_keys": False,
}

# v2 header: base_offset q, length i, leader epoch i, magic b, crc I, attributes h,
# last offset delta i, base ts q, max ts q, producer id q, producer epoch h,
# base sequence i, records count i
HEADER = struct.Struct(">qiibIhiqqqhii")


def header(buf: bytes | bytearray, at: int = 0) -> dict[str, int]:
    names = [
        "base_offset",
        "length",
        "epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "count",
    ]
    return dict(zip(names, HEADER.unpack_from(buf, at), strict=True))


def sample(count: int = 20, value_size: int = 50) -> list[tuple]:
    out = []
    for i in range(count):
        key = None if i % 4 == 3 else f"key-{i}".encode()
        value = None if i % 7 == 6 else bytes((i + j) % 256 for j in range(value_size))
        headers = [("trace", f"t{i}".encode()), ("empty", None)] if i % 2 == 0 else []
        out.append((key, value, headers, NOW + (i * 37) % 11 - 5))
    return out


def keyed(count: int = 20, value_size: int = 50) -> list[tuple]:
    return [(k or b"k", v, h, t) for k, v, h, t in sample(count, value_size)]


def kafka_python_batch(records: list[tuple], codec: int, **producer: int) -> bytes:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=bool(producer.get("transactional", 0)),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 30,
    )
    for i, (key, value, headers, ts) in enumerate(records):
        assert b.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    return bytes(b.build())


def kafka_python_read(buf: bytes | bytearray) -> list:
    mr = MemoryRecords(bytes(buf))
    batches = []
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        batches.append((batch, list(batch)))
    return batches


def as_tuples(records: list) -> list[tuple]:
    return [(r.key, r.value, list(r.headers), r.timestamp) for r in records]


def assign(buf: bytearray | memoryview, **kw: object) -> n.AppendInfo:
    args: dict = {"base_offset": 1000, "partition_leader_epoch": 5, "now_ms": NOW, **POLICY}
    args.update(kw)
    return n.validate_and_assign_offsets(buf, **args)


# ------------------------------------------------------------------ constants


def test_constants() -> None:
    assert CODECS == [0, 1, 2, 3, 4]
    assert (n.TIMESTAMP_TYPE_CREATE_TIME, n.TIMESTAMP_TYPE_LOG_APPEND_TIME) == (0, 1)


# ------------------------------------------------------------------ decode / build vs kafka-python


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_to_the_same_records(codec: int) -> None:
    records = sample(30)
    buf = kafka_python_batch(records, codec, producer_id=77, producer_epoch=3, base_sequence=10)
    decoded = n.decode_records(buf)
    assert as_tuples(decoded) == records
    assert [r.offset for r in decoded] == list(range(30))
    assert [r.sequence for r in decoded] == list(range(10, 40))
    info = n.analyze_records(buf, deep=True, max_batch_size=NO_LIMIT)
    (b,) = info.batches
    h = header(buf)
    assert (b.crc, b.compression, b.records_count, b.max_timestamp) == (
        h["crc"],
        codec,
        30,
        max(r[3] for r in records),
    )
    assert (info.producer_id, info.producer_epoch, info.first_sequence, info.last_sequence) == (
        77,
        3,
        10,
        39,
    )


@pytest.mark.parametrize("codec", CODECS)
def test_build_batch_is_readable_by_kafka_python(codec: int) -> None:
    records = sample(25)
    buf = n.build_batch(
        records,
        base_offset=500,
        compression=codec,
        partition_leader_epoch=9,
        producer_id=4,
        producer_epoch=1,
        base_sequence=100,
        is_transactional=True,
    )
    ((batch, recs),) = kafka_python_read(buf)
    assert batch.base_offset == 500 and batch.last_offset_delta == 24
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4, 1, 100)
    assert batch.is_transactional and not batch.is_control_batch
    assert batch.leader_epoch == 9
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in recs] == records
    assert [r.offset for r in recs] == list(range(500, 525))
    assert batch.max_timestamp == max(r[3] for r in records)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=40),
            st.none() | st.binary(max_size=300),
            st.lists(
                st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=10)), max_size=3
            ),
            st.integers(min_value=0, max_value=2**42),
        ),
        min_size=1,
        max_size=20,
    ),
    st.sampled_from(CODECS),
)
def test_round_trip_property(records: list[tuple], codec: int) -> None:
    records = [(k, v, list(h), t) for k, v, h, t in records]
    ours = n.build_batch(records, compression=codec)
    ((_, recs),) = kafka_python_read(ours)
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in recs] == records
    theirs = kafka_python_batch(records, codec)
    assert as_tuples(n.decode_records(theirs)) == records
    if codec == n.COMPRESSION_NONE:
        # same encoding byte for byte, but for the leader epoch (kafka-python writes 0)
        assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]


def test_log_append_time_batch_decodes_with_the_batch_timestamp() -> None:
    buf = n.build_batch(sample(3), timestamp_type=n.TIMESTAMP_TYPE_LOG_APPEND_TIME)
    top = max(r[3] for r in sample(3))
    assert {r.timestamp for r in n.decode_records(buf)} == {top}


# ------------------------------------------------------------------ leader: in-place assignment


@pytest.mark.parametrize("codec", CODECS)
def test_assignment_rewrites_the_header_in_place(codec: int) -> None:
    records = sample(40)
    buf = bytearray(
        kafka_python_batch(records, codec, producer_id=3, producer_epoch=0, base_sequence=0)
    )
    before = bytes(buf)
    info = assign(buf)
    h = header(buf)
    assert (h["base_offset"], h["epoch"], h["attributes"] & 0x08) == (1000, 5, 0)
    assert buf[61:] == before[61:], "records are not copied or changed"
    ((_, recs),) = kafka_python_read(buf)  # CRC valid for an independent reader
    assert [r.offset for r in recs] == list(range(1000, 1040))
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (
        1000,
        1039,
        40,
        1,
    )
    assert info.max_timestamp == max(r[3] for r in records) == h["max_timestamp"]
    # Kafka's LogValidator: the last offset for uncompressed records; every record
    # of a compressed batch is read, so the first record holding the max timestamp
    first_max = 1000 + [r[3] for r in records].index(max(r[3] for r in records))
    assert info.offset_of_max_timestamp == (1039 if codec == 0 else first_max)
    assert info.valid_bytes == len(buf)
    assert (info.source_magic, info.source_compression) == (2, codec)
    assert (info.producer_id, info.first_sequence, info.last_sequence) == (3, 0, 39)
    (b,) = info.batches
    assert (b.base_offset, b.last_offset, b.crc, b.partition_leader_epoch) == (
        1000,
        1039,
        h["crc"],
        5,
    )


@pytest.mark.parametrize("codec", [0, 3])
def test_log_append_time(codec: int) -> None:
    buf = bytearray(kafka_python_batch(sample(10), codec))
    info = assign(buf, log_append_time=True, now_ms=NOW + 99)
    h = header(buf)
    assert h["max_timestamp"] == NOW + 99 and h["attributes"] & 0x08
    assert info.max_timestamp == NOW + 99
    # Kafka's LogValidator: last offset in place for uncompressed, first for compressed
    assert info.offset_of_max_timestamp == (1009 if codec == 0 else 1000)
    assert {r.timestamp for r in n.decode_records(buf)} == {NOW + 99}
    ((batch, _),) = kafka_python_read(buf)
    assert batch.timestamp_type == 1


def test_create_time_max_timestamp_recomputed_from_records() -> None:
    buf = bytearray(n.build_batch(sample(8)))
    struct.pack_into(">q", buf, 35, 1)  # a lying max timestamp ...
    struct.pack_into(">I", buf, 17, n.crc32c(bytes(buf[21:])))  # ... with a valid CRC
    info = assign(buf)
    assert header(buf)["max_timestamp"] == max(r[3] for r in sample(8)) == info.max_timestamp
    kafka_python_read(buf)


def test_compressed_batch_decompressed_for_checks_reports_the_exact_offset() -> None:
    records = keyed(10)
    buf = bytearray(kafka_python_batch(records, n.COMPRESSION_ZSTD))
    info = assign(buf, require_keys=True)
    top = max(r[3] for r in records)
    assert info.offset_of_max_timestamp == 1000 + [r[3] for r in records].index(top)


def test_several_uncompressed_batches_get_consecutive_offsets() -> None:
    one = kafka_python_batch(sample(3), 0)
    two = n.build_batch(sample(4))
    buf = bytearray(one + two)
    info = assign(buf, base_offset=0)
    assert [(b.base_offset, b.last_offset, b.position) for b in info.batches] == [
        (0, 2, 0),
        (3, 6, len(one)),
    ]
    assert [r.offset for _, recs in kafka_python_read(buf) for r in recs] == list(range(7))


def test_writable_memoryview_is_accepted_and_read_only_refused() -> None:
    raw = bytearray(b"\0" * 7 + n.build_batch(sample(3)))
    view = memoryview(raw)[7:]
    assign(view)
    assert header(raw, 7)["base_offset"] == 1000
    with pytest.raises(TypeError):
        assign(bytes(raw[7:]))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        assign(memoryview(bytes(raw[7:])))
    with pytest.raises(TypeError):
        assign(bytearray(raw[7:]), base_offset="x")  # type: ignore[arg-type]


def test_empty_record_set() -> None:
    info = assign(bytearray())
    assert (info.num_batches, info.num_records, info.valid_bytes) == (0, 0, 0)


def _set_attr(buf: bytearray, bits: int) -> bytearray:
    attrs = struct.unpack_from(">h", buf, 21)[0] | bits
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, n.crc32c(bytes(buf[21:])))
    return buf


def _set(buf: bytearray, fmt: str, at: int, value: int) -> bytearray:
    struct.pack_into(fmt, buf, at, value)
    struct.pack_into(">I", buf, 17, n.crc32c(bytes(buf[21:])))
    return buf


def _flip(buf: bytes, at: int) -> bytearray:
    out = bytearray(buf)
    out[at] ^= 0x20
    return out


def _legacy_one() -> bytearray:
    lb = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    lb.append(0, timestamp=NOW, key=b"k", value=b"v")
    return bytearray(lb.build())


GOOD = n.build_batch(sample(10))
GOOD_GZIP = n.build_batch(sample(10), compression=1)
REFUSALS = [
    ("flipped byte", _flip(GOOD, 100), {}, CorruptRecordError),
    ("truncated", bytearray(GOOD[:-1]), {}, CorruptRecordError),
    ("control batch", _set_attr(bytearray(GOOD), 0x20), {}, InvalidRecordError),
    ("log append time from client", _set_attr(bytearray(GOOD), 0x08), {}, InvalidTimestampError),
    ("producer id without sequence", _set(bytearray(GOOD), ">q", 43, 5), {}, InvalidRecordError),
    ("count != delta + 1", _set(bytearray(GOOD), ">i", 23, 12), {}, InvalidRecordError),
    ("first base offset not 0", bytearray(struct.pack(">q", 4) + GOOD[8:]), {}, InvalidRecordError),
    ("too large", bytearray(GOOD), {"max_batch_size": len(GOOD) - 1}, MessageTooLargeError),
    ("keyless record", bytearray(GOOD), {"require_keys": True}, InvalidRecordError),
    ("keyless compressed", bytearray(GOOD_GZIP), {"require_keys": True}, InvalidRecordError),
    ("two compressed", bytearray(GOOD_GZIP + GOOD), {}, InvalidRecordError),
    (
        "future",
        bytearray(GOOD),
        {"now_ms": NOW - 10**6, "timestamp_after_max_ms": 1000},
        InvalidTimestampError,
    ),
    (
        "past, compressed",
        bytearray(GOOD_GZIP),
        {"now_ms": NOW + 10**6, "timestamp_before_max_ms": 1000},
        InvalidTimestampError,
    ),
    ("legacy needs conversion first", _legacy_one(), {}, InvalidRecordError),
]


@pytest.mark.parametrize(
    ("buf", "kw", "exc"),
    [pytest.param(b, kw, e, id=name) for name, b, kw, e in REFUSALS],
)
def test_refusals_leave_the_buffer_untouched(
    buf: bytearray, kw: dict, exc: type[Exception]
) -> None:
    buf = bytearray(buf)
    before = bytes(buf)
    with pytest.raises(exc):
        assign(buf, **kw)
    assert bytes(buf) == before


def test_two_compressed_batches_message() -> None:
    buf = bytearray(GOOD_GZIP + GOOD_GZIP)
    with pytest.raises(InvalidRecordError, match="Compressed outer record has more than one batch"):
        assign(buf)


def test_timestamps_within_bounds_pass() -> None:
    for codec in (0, 1):
        buf = bytearray(n.build_batch(sample(5), compression=codec))
        assign(buf, timestamp_before_max_ms=60_000, timestamp_after_max_ms=60_000)


# ------------------------------------------------------------------ follower: analyze_records


def test_analyze_changes_nothing_and_reports_every_batch() -> None:
    a = n.build_batch(sample(3), base_offset=10, producer_id=1, producer_epoch=0, base_sequence=0)
    b = n.build_batch(sample(4), base_offset=13, compression=n.COMPRESSION_LZ4, producer_id=1)
    buf = a + b
    info = n.analyze_records(buf, max_batch_size=NO_LIMIT)
    assert (info.first_offset, info.last_offset, info.num_records, info.num_batches) == (
        10,
        16,
        7,
        2,
    )
    assert info.valid_bytes == len(buf)
    assert [x.position for x in info.batches] == [0, len(a)]
    # a torn tail (as in a fetch response) ends the scan quietly
    torn = n.analyze_records(buf + a[:30], max_batch_size=NO_LIMIT)
    assert (torn.valid_bytes, torn.num_batches) == (len(buf), 2)
    # memoryview and bytearray are accepted too
    assert n.analyze_records(memoryview(bytearray(buf)), max_batch_size=NO_LIMIT).num_batches == 2


def test_every_flipped_byte_is_caught() -> None:
    for at in range(len(GOOD)):
        if at < 8 or 12 <= at < 16:  # base offset and leader epoch are outside the CRC
            continue
        bad = _flip(GOOD, at)
        with pytest.raises((CorruptRecordError, MessageTooLargeError)):
            info = n.analyze_records(bytes(bad), max_batch_size=NO_LIMIT)
            if info.valid_bytes == 0:  # the flip made the length claim a torn batch
                raise CorruptRecordError("torn")


def test_corruption_positions_and_kinds() -> None:
    prefix = n.build_batch(sample(2))
    # bad length: shorter than a header
    bad_len = bytearray(GOOD)
    struct.pack_into(">i", bad_len, 8, 20)
    with pytest.raises(CorruptRecordError) as e:
        n.analyze_records(prefix + bytes(bad_len), max_batch_size=NO_LIMIT)
    assert e.value.position == len(prefix)
    # count larger than last offset delta + 1
    with pytest.raises(CorruptRecordError, match="exceeds"):
        n.analyze_records(bytes(_set(bytearray(GOOD), ">i", 57, 11)), max_batch_size=NO_LIMIT)
    # count smaller than the records present: framing finds the leftovers
    with pytest.raises(CorruptRecordError, match="batch end"):
        n.analyze_records(bytes(_set(bytearray(GOOD), ">i", 57, 9)), max_batch_size=NO_LIMIT)
    # record length varint one too big: the fields no longer fill it
    framing = bytearray(GOOD)
    framing[61] += 2
    with pytest.raises(CorruptRecordError, match="record 0"):
        n.analyze_records(bytes(_set(framing, ">i", 57, 10)), max_batch_size=NO_LIMIT)
    # too large
    with pytest.raises(MessageTooLargeError):
        n.analyze_records(GOOD, max_batch_size=len(GOOD) - 1)


def test_deep_decompresses() -> None:
    bad = bytearray(GOOD_GZIP)
    bad[-6] ^= 0xFF  # inside the gzip trailer
    bad = _set(bad, ">i", 57, 10)
    n.analyze_records(bytes(bad), max_batch_size=NO_LIMIT)
    with pytest.raises(CorruptRecordError):
        n.analyze_records(bytes(bad), deep=True, max_batch_size=NO_LIMIT)


# ------------------------------------------------------------------ legacy


def legacy_set(magic: int, codec: int, count: int = 5) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(count):
        ts = NOW + i if magic else None
        b.append(i, timestamp=ts, key=None if i == 2 else b"k%d" % i, value=b"v" * i)
    return bytes(b.build())


LEGACY = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]


@pytest.mark.parametrize(("magic", "codec"), LEGACY)
def test_legacy_conversion_keeps_records(magic: int, codec: int) -> None:
    src = legacy_set(magic, codec)
    out = n.convert_legacy_to_v2(src)
    assert isinstance(out, bytearray)
    got = [r for _, recs in kafka_python_read(out) for r in recs]
    assert [(r.key, r.value) for r in got] == [
        (None if i == 2 else b"k%d" % i, b"v" * i) for i in range(5)
    ]
    assert [r.timestamp for r in got] == [NOW + i if magic else -1 for i in range(5)]
    batches = n.analyze_records(out, max_batch_size=NO_LIMIT).batches
    assert {b.compression for b in batches} == {codec}
    assert len(batches) == 1
    info = assign(out)
    assert (info.first_offset, info.last_offset) == (1000, 1004)


@pytest.mark.parametrize(("magic", "codec"), LEGACY)
def test_legacy_validate_and_decode(magic: int, codec: int) -> None:
    src = legacy_set(magic, codec)
    info = n.analyze_records(src, max_batch_size=NO_LIMIT)
    assert {b.magic for b in info.batches} == {magic}
    assert info.num_records == 5
    assert all(b.partition_leader_epoch == -1 and b.producer_id == -1 for b in info.batches)
    if magic == 0:
        assert all(b.base_timestamp == -1 == b.max_timestamp for b in info.batches)
    first = n.decode_records(src)
    assert first[0].key == b"k0" and first[0].headers == [] and first[0].sequence == -1
    bad = bytearray(src)
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        n.convert_legacy_to_v2(bytes(bad))
    with pytest.raises(CorruptRecordError):
        n.analyze_records(bytes(bad), max_batch_size=NO_LIMIT)


def test_v1_wrapper_offsets_are_absolute() -> None:
    # a broker-written magic 1 wrapper: inner offsets relative, wrapper = last absolute
    inner = legacy_set(1, 0, 1)
    msgs = b"".join(
        struct.pack(">q", i) + inner[8:].replace(b"k0", b"k%d" % i) for i in range(3)
    )  # CRC fixed below
    fixed = bytearray()
    at = 0
    while at < len(msgs):
        size = struct.unpack_from(">i", msgs, at + 8)[0]
        m = bytearray(msgs[at : at + 12 + size])
        struct.pack_into(">I", m, 12, kcodec_crc32(bytes(m[16:])))
        fixed += m
        at += 12 + size
    payload = n.compress(n.COMPRESSION_GZIP, bytes(fixed))
    body = struct.pack(">bbq", 1, 1, NOW) + struct.pack(">i", -1) + struct.pack(">i", len(payload))
    body += payload
    wrapper = bytearray(struct.pack(">qiI", 52, 4 + len(body), 0) + body)
    struct.pack_into(">I", wrapper, 12, kcodec_crc32(bytes(wrapper[16:])))
    recs = n.decode_records(bytes(wrapper))
    assert [r.offset for r in recs] == [50, 51, 52]
    (b,) = n.analyze_records(bytes(wrapper), max_batch_size=NO_LIMIT).batches
    assert (b.base_offset, b.last_offset, b.records_count) == (50, 52, 3)


def kcodec_crc32(data: bytes) -> int:
    import zlib

    return zlib.crc32(data) & 0xFFFFFFFF


# ------------------------------------------------------------------ codecs


@pytest.mark.parametrize("codec", CODECS)
def test_codecs_round_trip_and_interoperate(codec: int) -> None:
    data = b"".join(b"record %d " % i for i in range(5000))
    packed = n.compress(codec, data)
    assert n.decompress(codec, packed) == data
    theirs = {
        0: lambda d: d,
        1: kcodec.gzip_encode,
        2: kcodec.snappy_encode,
        3: kcodec.lz4_encode,
        4: kcodec.zstd_encode,
    }[codec](data)
    assert n.decompress(codec, theirs) == data
    back = {
        0: lambda d: d,
        1: kcodec.gzip_decode,
        2: kcodec.snappy_decode,
        3: kcodec.lz4_decode,
        4: kcodec.zstd_decode,
    }[codec](packed)
    assert back == data


def test_snappy_xerial_framing_and_raw() -> None:
    data = bytes(range(256)) * 400
    packed = n.compress(n.COMPRESSION_SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    raw = kcodec.snappy_encode(data, xerial_compatible=False)
    assert n.decompress(n.COMPRESSION_SNAPPY, raw) == data


def test_codec_errors() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        n.compress(6, b"x")
    with pytest.raises(CorruptRecordError):
        n.decompress(n.COMPRESSION_GZIP, b"not gzip at all")
    with pytest.raises(TypeError):
        n.compress(1, "text")  # type: ignore[arg-type]


# ------------------------------------------------------------------ compressed payloads, bombs


def _with_section(batch: bytes, section: bytes) -> bytearray:
    """``batch`` with its records section replaced, length and CRC right."""
    b = bytearray(batch[:61]) + section
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, n.crc32c(bytes(b[21:])))
    return b


@pytest.mark.parametrize("codec", CODECS[1:])
def test_compressed_junk_with_a_right_crc_is_corrupt(codec: int) -> None:
    good = kafka_python_batch(sample(5), codec)
    junk = bytes((i * 37 + 11) % 251 for i in range(len(good) - 61))
    for section in (junk, n.compress(codec, junk)):
        buf = _with_section(good, section)
        before = bytes(buf)
        with pytest.raises(CorruptRecordError):
            assign(buf)
        assert buf == before, "nothing written"
    assign(bytearray(good))


@pytest.mark.parametrize("codec", CODECS[1:])
def test_records_decompressing_past_the_limit_are_message_too_large(codec: int) -> None:
    big = n.build_batch([(b"k", bytes(2 << 20), [], NOW)], compression=codec)
    with pytest.raises(MessageTooLargeError):
        assign(bytearray(big), max_decompressed_size=1 << 20)
    assert assign(bytearray(big)).num_records == 1
    with pytest.raises(MessageTooLargeError):
        n.decompress(codec, big[61:], max_size=1 << 20)
    assert len(n.decompress(codec, big[61:])) > 2 << 20
    assert n.MAX_DECOMPRESSED_SIZE == 256 << 20


# ------------------------------------------------------------------ recompression


def _decode_and_build(buf: bytes, codec: int) -> bytearray | None:
    """The broker's former Python recompression: each record to Python
    objects, each batch built again with its header fields."""
    info = n.analyze_records(buf, max_batch_size=NO_LIMIT, deep=True)
    if all(b.compression == codec for b in info.batches):
        return None
    out = bytearray()
    for b in info.batches:
        records = n.decode_records(buf[b.position : b.position + b.size])
        out += n.build_batch(
            [(r.key, r.value, r.headers, r.timestamp) for r in records],
            compression=codec,
            producer_id=b.producer_id,
            producer_epoch=b.producer_epoch,
            base_sequence=b.base_sequence,
            is_transactional=b.is_transactional,
            timestamp_type=b.timestamp_type,
        )
    return out


def batches_size(buf: bytes | bytearray) -> list[int]:
    return [b.size for b in n.analyze_records(buf, max_batch_size=NO_LIMIT).batches]


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recompress_matches_the_former_path(source: int, target: int) -> None:
    # kafka-python's builder: batches of another author
    buf = kafka_python_batch(
        sample(30), source, producer_id=77, producer_epoch=2, base_sequence=9, transactional=1
    ) + kafka_python_batch(sample(3, 2000), source)
    got = n.recompress_batches(buf, target, max_batch_size=NO_LIMIT)
    assert got == _decode_and_build(buf, target)
    if source == target:
        assert got is None
        return
    assert isinstance(got, bytearray)
    batches = kafka_python_read(got)
    assert [len(records) for _, records in batches] == [30, 3]
    first = batches[0][0]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (77, 2, 9)
    assert first.is_transactional and first.compression_type == target
    assert as_tuples(n.decode_records(got)) == as_tuples(n.decode_records(buf))[:30]
    if target == n.COMPRESSION_NONE:
        assert assign(got).num_records == 33
    else:  # Kafka's one compressed batch per request, as for any request
        with pytest.raises(InvalidRecordError, match="more than one batch"):
            assign(got)
        one = n.recompress_batches(buf[: batches_size(buf)[0]], target, max_batch_size=NO_LIMIT)
        assert one is not None and assign(one).num_records == 30


def test_recompress_bounds_and_bad_input() -> None:
    bomb = n.build_batch([(b"k", bytes(2 << 20), [], NOW)], compression=n.COMPRESSION_ZSTD)
    with pytest.raises(MessageTooLargeError):
        n.recompress_batches(bomb, 1, max_batch_size=NO_LIMIT, max_decompressed_size=1 << 20)
    with pytest.raises(MessageTooLargeError):
        n.recompress_batches(kafka_python_batch(sample(100), 0), 1, max_batch_size=1000)
    good = kafka_python_batch(sample(5), n.COMPRESSION_GZIP)
    junk = _with_section(good, bytes(range(200)))
    with pytest.raises(CorruptRecordError):
        n.recompress_batches(junk, n.COMPRESSION_LZ4, max_batch_size=NO_LIMIT)
    with pytest.raises(UnsupportedCompressionTypeError):
        n.recompress_batches(good, 7, max_batch_size=NO_LIMIT)
    assert n.recompress_batches(b"", n.COMPRESSION_LZ4, max_batch_size=NO_LIMIT) is None


# ------------------------------------------------------------------ the batch iterator


def _buffer_of_batches() -> tuple[bytes, list[bytes]]:
    """Batches of every codec, an idempotent transactional one and a control
    marker, back to back at consecutive offsets (as a log holds them)."""
    parts, offset = [], 0
    for codec in CODECS:
        one = bytearray(kafka_python_batch(sample(5), codec))
        one[0:8] = struct.pack(">q", offset)  # outside the CRC's range
        parts.append(bytes(one))
        offset += 5
    txn = {"producer_id": 9, "producer_epoch": 2, "base_sequence": 100}
    parts.append(n.build_batch(keyed(3), base_offset=offset, is_transactional=True, **txn))
    marker = [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 4), [], NOW)]
    parts.append(
        n.build_batch(marker, base_offset=offset + 3, is_control=True, is_transactional=True, **txn)
    )
    return b"".join(parts), parts


def test_batch_infos_read_every_header_field_as_kafka_python_does() -> None:
    buf, parts = _buffer_of_batches()
    infos, covered = n.batch_infos(buf + parts[0][:40])  # and a partial batch at the end
    assert covered == len(buf) == n.complete_batches_size(buf + parts[0][:40])
    theirs = kafka_python_read(buf)
    assert len(infos) == len(theirs) == len(parts)
    position = 0
    for info, (batch, _), raw in zip(infos, theirs, parts, strict=True):
        h = header(raw)
        assert (info.position, info.size, info.magic) == (position, len(raw), 2)
        assert (info.base_offset, info.last_offset) == (batch.base_offset, batch.last_offset)
        assert info.records_count == h["count"] and info.crc == batch.crc
        assert info.partition_leader_epoch == h["epoch"]
        assert info.compression == batch.compression_type
        assert (info.is_transactional, info.is_control) == (
            batch.is_transactional,
            batch.is_control_batch,
        )
        assert (info.base_timestamp, info.max_timestamp) == (
            h["base_timestamp"],
            batch.max_timestamp,
        )
        assert (info.producer_id, info.producer_epoch, info.base_sequence) == (
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
        )
        position += len(raw)
    assert infos[-1].is_control and infos[-2].last_sequence == 102
    assert n.batch_infos(buf, 2)[1] == len(parts[0]) + len(parts[1])
    assert n.batch_infos(b"") == ([], 0) and n.batch_infos(buf[:11]) == ([], 0)


def test_decode_batches_gives_every_record_of_every_codec_in_one_call() -> None:
    buf, parts = _buffer_of_batches()
    batches, covered = n.decode_batches(memoryview(buf + parts[1][:-1]))
    assert covered == len(buf)
    theirs = kafka_python_read(buf)
    for (info, records), (batch, their_records) in zip(batches, theirs, strict=True):
        assert info.base_offset == batch.base_offset
        assert [r.offset for r in records] == [r.offset for r in their_records]
        assert as_tuples(records) == [
            (r.key, r.value, list(r.headers), r.timestamp) for r in their_records
        ]
    assert [r.sequence for r in batches[5][1]] == [100, 101, 102]


def test_a_whole_batch_that_cannot_be_one_is_corrupt_at_its_position() -> None:
    buf, parts = _buffer_of_batches()
    short = bytearray(parts[0][:40])
    short[8:12] = struct.pack(">i", 28)  # whole, but shorter than a v2 header
    with pytest.raises(CorruptRecordError) as e:
        n.batch_infos(buf + bytes(short))
    assert e.value.position == len(buf)
    unknown = bytearray(parts[0])
    unknown[16] = 7
    with pytest.raises(CorruptRecordError):
        n.batch_infos(bytes(unknown))
    flipped = bytearray(buf)
    flipped[len(parts[0]) + 70] ^= 0x40  # inside the second batch: its CRC fails
    with pytest.raises(CorruptRecordError) as e:
        n.decode_batches(bytes(flipped))
    assert e.value.position >= len(parts[0])
    assert n.complete_batches_size(bytes(flipped)) == len(buf)  # lengths only


def test_legacy_messages_are_walked_too() -> None:
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        b.append(i, timestamp=NOW + i, key=None, value=b"v%d" % i)
    legacy = bytes(b.build())
    infos, covered = n.batch_infos(legacy)
    assert covered == len(legacy) and [i.magic for i in infos] == [1, 1, 1]
    assert [i.base_offset for i in infos] == [0, 1, 2]
    batches, _ = n.decode_batches(legacy)
    assert [r.value for _, records in batches for r in records] == [b"v0", b"v1", b"v2"]
