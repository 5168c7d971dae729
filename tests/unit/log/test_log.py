"""Log on real files: leader and follower appends, every roll trigger, reads
and isolation, truncation, flush, retention, reopen and disk errors."""

from __future__ import annotations

import os
import resource
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import build_batch
from support.clock import ManualClock
from support.scheduler import ManualScheduler

from pylog import _native
from pylog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
)
from pylog.log.config import LogConfig
from pylog.log.log import FetchIsolation, Log, UnexpectedAppendOffsetError

T0 = 1_700_000_000_000


def make_config(**overrides: Any) -> LogConfig:
    props: dict[str, Any] = {
        "internal.segment.bytes": 1 << 20,
        "segment.index.bytes": 4096,
        "index.interval.bytes": 1,
        "retention.ms": -1,
        "file.delete.delay.ms": 1000,
        "message.timestamp.after.max.ms": 2**63 - 1,
    }
    props.update(overrides)
    return LogConfig.from_props(props)


@pytest.fixture
def open_log(
    tmp_path: os.PathLike[str], clock: ManualClock, scheduler: ManualScheduler
) -> Iterator[Any]:
    logs: list[Log] = []

    def opener(name: str = "topic-0", *, had_clean_shutdown: bool = True, **config: Any) -> Log:
        log = Log.open(
            os.path.join(str(tmp_path), name),
            make_config(**config),
            scheduler=scheduler,
            clock=clock,
            had_clean_shutdown=had_clean_shutdown,
        )
        logs.append(log)
        return log

    yield opener
    for log in logs:
        log.close()


def values(n: int, prefix: bytes = b"v") -> list[bytes]:
    return [prefix + str(i).encode() for i in range(n)]


def batch_offsets(log: Log) -> list[tuple[int, int]]:
    """(base, last) offset of every batch in the log, from the files."""
    out = []
    for seg in log.segments:
        infos, _ = _native.read_batch_infos(seg.log_path, 0, 100000, seg.size)
        out.extend((b.base_offset, b.last_offset) for b in infos)
    return out


def log_bytes(log: Log) -> bytes:
    return b"".join(open(s.log_path, "rb").read()[: s.size] for s in log.segments)


# ---------------------------------------------------------------- leader appends


def test_leader_append_assigns_offsets_from_leo(open_log: Any) -> None:
    log = open_log()
    infos = [log.append_as_leader(bytearray(build_batch(values(n))), 0) for n in (3, 1, 2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 2), (3, 3), (4, 5)]
    assert log.log_end_offset == 6
    assert batch_offsets(log) == [(0, 2), (3, 3), (4, 5)]
    assert log.log_end_offset_metadata.relative_position_in_segment == log.active_segment.size


def test_leader_append_writes_epoch_and_fills_epoch_cache(open_log: Any) -> None:
    log = open_log()
    log.append_as_leader(bytearray(build_batch(values(2))), 4)
    log.append_as_leader(bytearray(build_batch(values(2))), 4)
    log.append_as_leader(bytearray(build_batch(values(1))), 7)
    seg = log.active_segment
    infos, _ = _native.read_batch_infos(seg.log_path, 0, 10, seg.size)
    assert [b.partition_leader_epoch for b in infos] == [4, 4, 7]
    assert log.latest_epoch == 7
    assert log.leader_epoch_cache is not None
    assert log.leader_epoch_cache.end_offset_for(4, log.log_end_offset) == (4, 4)  # type: ignore[attr-defined]


def test_log_append_time_replaces_timestamps(open_log: Any, clock: ManualClock) -> None:
    log = open_log(**{"message.timestamp.type": "LogAppendTime"})
    info = log.append_as_leader(bytearray(build_batch(values(2), timestamp=5)), 0)
    assert info.log_append_time == clock()
    assert info.max_timestamp == clock()


def test_corrupt_batch_refused_and_log_unchanged(open_log: Any) -> None:
    log = open_log()
    log.append_as_leader(bytearray(build_batch(values(2))), 0)
    before = (log.log_end_offset, log.size, log_bytes(log))
    bad = bytearray(build_batch(values(2)))
    bad[-1] ^= 0xFF  # a record byte: the CRC no longer matches
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad, 0)
    torn = bytearray(build_batch(values(2)))[:-3]  # batch length says more than there is
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(torn, 0)
    lying = bytearray(build_batch(values(2)))
    lying[57:61] = (5).to_bytes(4, "big")  # records count disagrees with the records
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(lying, 0)
    assert (log.log_end_offset, log.size, log_bytes(log)) == before


def test_policy_refusals(open_log: Any) -> None:
    log = open_log(
        **{
            "max.message.bytes": 200,
            "cleanup.policy": "compact",
            "message.timestamp.after.max.ms": 1000,
        }
    )
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(bytearray(build_batch([(b"k", b"x" * 300)])), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(bytearray(build_batch([(None, b"keyless")])), 0)
    with pytest.raises(InvalidTimestampError):
        log.append_as_leader(bytearray(build_batch([(b"k", b"v")], timestamp=T0 + 10_000)), 0)
    assert log.log_end_offset == 0 and log.size == 0


def test_record_set_larger_than_segment(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 200, "max.message.bytes": 10_000})
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(bytearray(build_batch([b"x" * 500])), 0)
    assert log.log_end_offset == 0


def test_legacy_message_set_is_converted(open_log: Any) -> None:
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=T0 + i, key=None, value=b"old%d" % i)
    log = open_log()
    log.append_as_leader(bytearray(build_batch(values(1))), 0)
    info = log.append_as_leader(bytearray(builder.build()), 0)
    assert (info.first_offset, info.last_offset) == (1, 3)
    seg = log.active_segment
    infos, _ = _native.read_batch_infos(seg.log_path, 0, 10, seg.size)
    assert all(b.magic == 2 for b in infos)


def test_duplicate_producer_batch_returns_original_offsets(open_log: Any) -> None:
    log = open_log()

    def produce(seq: int, n: int = 2) -> bytearray:
        return bytearray(
            build_batch(values(n), producer_id=77, producer_epoch=0, base_sequence=seq)
        )

    log.append_as_leader(bytearray(build_batch(values(1))), 0)
    first = log.append_as_leader(produce(0), 0)
    second = log.append_as_leader(produce(2), 0)
    size = log.size
    retry = log.append_as_leader(produce(0), 0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.size == size and log.log_end_offset == second.last_offset + 1
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(produce(9), 0)
    assert log.size == size


@pytest.mark.parametrize(
    ("topic_codec", "codec", "producer_codec"), [("gzip", 1, 0), ("uncompressed", 0, 3)]
)
def test_topic_compression_type_recompresses(
    open_log: Any, topic_codec: str, codec: int, producer_codec: int
) -> None:
    log = open_log(**{"compression.type": topic_codec})
    sent = build_batch([(b"k", b"v" * 100), (None, b"w")], compression=producer_codec)
    info = log.append_as_leader(bytearray(sent), 0)
    assert (info.first_offset, info.last_offset) == (0, 1)
    seg = log.active_segment
    infos, _ = _native.read_batch_infos(seg.log_path, 0, 10, seg.size)
    assert [b.compression for b in infos] == [codec]
    stored = _native.decode_records(log.read_bytes(0, 1 << 20))
    assert [(r.offset, r.key, r.value) for r in stored] == [(0, b"k", b"v" * 100), (1, None, b"w")]


def test_topic_compression_type_keeps_control_batches_refused(open_log: Any) -> None:
    """A client's control batch is refused on a topic with a codec of its own
    too: recompression leaves it as sent (Kafka never compresses an
    uncompressed control batch), so its control flag still reaches the check."""
    log = open_log(**{"compression.type": "gzip"})
    control = bytearray(build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")]))
    control[22] |= 0x20  # attributes' control bit
    control[17:21] = _native.crc32c(bytes(control[21:])).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0)
    assert log.log_end_offset == 0


# ---------------------------------------------------------------- follower appends


def test_follower_append_keeps_offsets(open_log: Any) -> None:
    log = open_log()
    b1 = build_batch(values(3), base_offset=0, partition_leader_epoch=2)
    b2 = build_batch(values(2), base_offset=10, partition_leader_epoch=3)  # a gap: compacted
    info = log.append_as_follower(b1 + b2 + b1[:20])  # a trailing partial batch is left
    assert (info.first_offset, info.last_offset) == (0, 11)
    assert log.log_end_offset == 12
    assert batch_offsets(log) == [(0, 2), (10, 11)]
    assert log.latest_epoch == 3
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(build_batch(values(1), base_offset=11))
    backwards = build_batch(values(1), base_offset=20) + build_batch(values(1), base_offset=15)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(backwards)
    bad = bytearray(build_batch(values(1), base_offset=12))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bad)
    assert log.log_end_offset == 12


# ---------------------------------------------------------------- roll


def test_roll_on_segment_bytes(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 300})
    for _ in range(10):
        log.append_as_leader(bytearray(build_batch([b"x" * 50])), 0)
    assert log.num_segments > 1
    assert all(s.size <= 300 for s in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert batch_offsets(log) == [(i, i) for i in range(10)]
    # Each rolled segment got an asynchronous flush scheduled.
    assert any(n.startswith("flush-log") for n in log._scheduler.names())  # type: ignore[attr-defined]


def test_roll_on_segment_ms(open_log: Any, clock: ManualClock) -> None:
    log = open_log(**{"segment.ms": 1000})
    log.append_as_leader(bytearray(build_batch(values(1), timestamp=T0)), 0)
    log.append_as_leader(bytearray(build_batch(values(1), timestamp=T0 + 500)), 0)
    assert log.num_segments == 1
    clock.advance(2000)
    log.append_as_leader(bytearray(build_batch(values(1), timestamp=T0 + 1500)), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_jitter_is_below_segment_ms(open_log: Any) -> None:
    log = open_log(**{"segment.ms": 1000, "segment.jitter.ms": 500})
    assert 0 <= log.active_segment.roll_jitter_ms < 500


def test_roll_on_full_index(open_log: Any) -> None:
    log = open_log(**{"segment.index.bytes": 24, "index.interval.bytes": 1})
    for _ in range(8):
        log.append_as_leader(bytearray(build_batch(values(1))), 0)
    assert log.num_segments > 1
    assert batch_offsets(log) == [(i, i) for i in range(8)]


def test_roll_on_relative_offset_overflow(open_log: Any) -> None:
    log = open_log()
    log.append_as_follower(build_batch(values(1), base_offset=0))
    far = 2**31 + 5
    log.append_as_follower(build_batch(values(1), base_offset=far))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 1


def test_explicit_roll_and_empty_active_segment(open_log: Any) -> None:
    log = open_log()
    log.append_as_leader(bytearray(build_batch(values(2))), 0)
    log.roll()
    log.roll()  # rolling an empty active segment at the same offset replaces it
    assert [s.base_offset for s in log.segments] == [0, 2]


# ---------------------------------------------------------------- read


def test_read_across_segments_and_bounds(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 250})
    batches = []
    for i in range(8):
        info = log.append_as_leader(bytearray(build_batch([b"y" * 40], timestamp=T0 + i)), 0)
        assert info.first_offset == i
    assert log.num_segments > 2
    for seg in log.segments:
        with open(seg.log_path, "rb") as f:
            batches.append(f.read())
    whole = b"".join(batches)
    got = log.read(0, 1 << 20)
    assert got.records.read_bytes() == batches[0]  # one segment per read
    third = log.segments[2].base_offset
    got = log.read(third, 1 << 20)
    assert got.fetch_offset_metadata.segment_base_offset == third
    assert got.records.read_bytes() == batches[2]
    assert log.read(log.log_end_offset, 100).records.size == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)
    small = log.read(0, 5)
    assert small.first_entry_incomplete and small.records.size == 5
    assert log.read(0, 5, min_one_message=True).records.size == len(whole) // 8


def test_read_respects_high_watermark(open_log: Any) -> None:
    log = open_log()
    sizes = []
    for _ in range(4):
        b = build_batch(values(2))
        sizes.append(len(b))
        log.append_as_leader(bytearray(b), 0)
    assert log.high_watermark == 0
    assert log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK).records.size == 0
    assert log.update_high_watermark(4) == 4
    got = log.read(0, 1 << 20, FetchIsolation.HIGH_WATERMARK)
    assert got.records.size == sizes[0] + sizes[1]
    assert log.read(0, 1 << 20).records.size == sum(sizes)
    assert log.read(6, 1 << 20, FetchIsolation.HIGH_WATERMARK).records.size == 0
    assert log.update_high_watermark(100) == 8  # clamped to the LEO
    assert log.maybe_increment_high_watermark(log.log_end_offset_metadata) is None


def test_read_below_log_start_is_out_of_range(open_log: Any) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(bytearray(build_batch(values(2))), 0)
    log.update_high_watermark(6)
    log.maybe_increment_log_start_offset(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert log.read(2, 1 << 20).records.size > 0


def test_fetch_offset_by_timestamp(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 200})
    for i in range(6):
        log.append_as_leader(bytearray(build_batch([b"z" * 30], timestamp=T0 + i * 100)), 0)
    assert log.fetch_offset_by_timestamp(T0 + 250) == (T0 + 300, 3)
    assert log.fetch_offset_by_timestamp(T0) == (T0, 0)
    assert log.fetch_offset_by_timestamp(T0 + 10_000) is None


def test_time_index_names_the_batch_of_the_largest_timestamp(open_log: Any) -> None:
    """As Kafka's: an entry's offset is the last offset of the batch holding the
    largest timestamp (kafka-dump-log checks exactly that), even when a
    compressed batch's largest timestamp is on a record inside it."""
    log = open_log()
    stamps = [T0 + 5, T0 + 9, T0 + 1]
    log.append_as_leader(bytearray(build_batch(values(3), timestamp=stamps, compression=1)), 0)
    log.append_as_leader(bytearray(build_batch(values(2), timestamp=T0 + 2, compression=1)), 0)
    segment = log.active_segment
    assert segment.time_index.last_entry() == (T0 + 9, 2)
    assert segment.offset_of_max_timestamp_so_far == 2
    # The record itself is found by a timestamp search (ListOffsets MAX_TIMESTAMP).
    assert log.fetch_offset_by_timestamp(T0 + 9) == (T0 + 9, 1)


# ---------------------------------------------------------------- truncation


def test_truncate_to_within_and_across_segments(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 300})
    for epoch in range(10):
        log.append_as_leader(bytearray(build_batch([b"x" * 50])), epoch)
    log.update_high_watermark(10)
    assert log.num_segments > 2
    assert not log.truncate_to(10)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.high_watermark == 3
    assert batch_offsets(log) == [(0, 0), (1, 1), (2, 2)]
    assert log.latest_epoch == 2
    info = log.append_as_leader(bytearray(build_batch(values(1))), 11)
    assert info.first_offset == 3
    assert batch_offsets(log)[-1] == (3, 3)


def test_truncate_fully_and_start_at(open_log: Any, scheduler: ManualScheduler) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(bytearray(build_batch(values(2))), 1)
    log.truncate_fully_and_start_at(100)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 100
    assert log.recovery_point == 100
    assert [s.base_offset for s in log.segments] == [100]
    assert log.latest_epoch is None
    info = log.append_as_leader(bytearray(build_batch(values(1))), 2)
    assert info.first_offset == 100
    scheduler.run_all()
    assert sorted(os.listdir(log.dir))[0].startswith("00000000000000000100")


# ---------------------------------------------------------------- flush


def test_flush_advances_recovery_point(open_log: Any) -> None:
    log = open_log()
    for _ in range(3):
        log.append_as_leader(bytearray(build_batch(values(2))), 0)
    assert log.recovery_point == 0 and log.unflushed_messages == 6
    log.flush(4)
    assert log.recovery_point == 4
    log.flush()
    assert log.recovery_point == 6 and log.unflushed_messages == 0


def test_flush_messages_triggers_flush(open_log: Any) -> None:
    log = open_log(**{"flush.messages": 3})
    log.append_as_leader(bytearray(build_batch(values(2))), 0)
    assert log.recovery_point == 0
    log.append_as_leader(bytearray(build_batch(values(2))), 0)
    assert log.recovery_point == 4


# ---------------------------------------------------------------- retention


def fill(log: Log, n: int, ts: int, size: int = 50) -> None:
    for _ in range(n):
        log.append_as_leader(bytearray(build_batch([b"r" * size], timestamp=ts)), 0)


def test_retention_by_time_uses_record_timestamps(
    open_log: Any, clock: ManualClock, scheduler: ManualScheduler
) -> None:
    log = open_log(**{"internal.segment.bytes": 300, "retention.ms": 10_000})
    fill(log, 5, clock() - 60_000)  # old records
    log.roll()
    fill(log, 5, clock())  # fresh records
    old_segments = [s for s in log.segments if s.base_offset < 5]
    assert old_segments
    assert log.delete_old_segments() == 0  # nothing is below the high watermark yet
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments() == len(old_segments)
    assert log.log_start_offset == 5 == log.segments[0].base_offset
    deleted = [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    assert deleted
    clock.advance(999)
    scheduler.run_due()
    assert [n for n in os.listdir(log.dir) if n.endswith(".deleted")] == deleted
    clock.advance(1)
    scheduler.run_due()
    assert not [n for n in os.listdir(log.dir) if n.endswith(".deleted")]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)


def test_retention_expiring_everything_rolls_first(open_log: Any, clock: ManualClock) -> None:
    log = open_log(**{"retention.ms": 1000})
    fill(log, 3, clock() - 5000)
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [3]
    assert log.log_end_offset == log.log_start_offset == 3
    assert log.delete_old_segments() == 0  # the empty active segment stays


def test_retention_by_size(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 300, "retention.bytes": 700})
    fill(log, 20, T0)
    log.update_high_watermark(log.log_end_offset)
    before = log.num_segments
    seg_size = log.segments[0].size
    deleted = log.delete_old_segments()
    assert deleted > 0 and log.num_segments == before - deleted
    assert log.size >= 700 - seg_size
    assert log.size - log.segments[0].size < 700


def test_retention_by_log_start_offset(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 300})
    fill(log, 12, T0)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(5)  # beyond the high watermark
    log.update_high_watermark(12)
    second = log.segments[1].base_offset
    assert log.maybe_increment_log_start_offset(second + 1)
    assert log.delete_old_segments() == 1
    assert log.segments[0].base_offset == second
    assert log.log_start_offset == second + 1


def test_compact_policy_skips_time_and_size_retention(open_log: Any, clock: ManualClock) -> None:
    log = open_log(**{"cleanup.policy": "compact", "retention.ms": 1000})
    for _ in range(3):
        log.append_as_leader(bytearray(build_batch([(b"k", b"v")], timestamp=clock() - 9000)), 0)
    log.roll()
    log.update_high_watermark(3)
    assert log.delete_old_segments() == 0


# ---------------------------------------------------------------- reopen, recovery


def test_reopen_gives_same_contents(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 300})
    fill(log, 9, T0)
    log.update_high_watermark(9)
    contents = log_bytes(log)
    offsets = batch_offsets(log)
    log.close()
    again = open_log(**{"internal.segment.bytes": 300})
    assert again.log_end_offset == 9
    assert log_bytes(again) == contents
    assert batch_offsets(again) == offsets
    info = again.append_as_leader(bytearray(build_batch(values(1))), 0)
    assert info.first_offset == 9


def test_unclean_shutdown_recovers_torn_tail(open_log: Any) -> None:
    log = open_log()
    fill(log, 4, T0)
    path = log.active_segment.log_path
    good = log.size
    log.close()
    with open(path, "ab") as f:
        f.write(build_batch(values(3), base_offset=4)[:-7])
    again = open_log(had_clean_shutdown=False)
    assert again.log_end_offset == 4
    assert os.path.getsize(path) == good


def test_producer_state_survives_reopen(open_log: Any) -> None:
    log = open_log()
    b = build_batch(values(2), producer_id=5, producer_epoch=0, base_sequence=0)
    first = log.append_as_leader(bytearray(b), 0)
    log.close()
    again = open_log()
    retry = again.append_as_leader(bytearray(b), 0)
    assert retry.duplicate and retry.first_offset == first.first_offset


# ---------------------------------------------------------------- disk errors, threads


def test_a_failed_read_names_the_segment_and_the_log_reads_again(open_log: Any) -> None:
    log = open_log()
    fill(log, 2, T0)
    segment = log.active_segment
    saved = os.dup(segment.fileno())
    directory = os.open(os.path.dirname(segment.log_path), os.O_RDONLY)
    try:
        os.dup2(directory, segment.fileno())  # a pread of a directory fails: EISDIR
        with pytest.raises(KafkaStorageError, match=f"reading {segment.log_path}"):
            log.read(0, 1 << 20)
    finally:
        os.dup2(saved, segment.fileno())
        os.close(saved)
        os.close(directory)
    assert log.read(0, 1 << 20).records.size > 0


def test_disk_full_append_leaves_log_unchanged(open_log: Any) -> None:
    log = open_log()
    fill(log, 2, T0)
    before = (log.log_end_offset, log.size, log_bytes(log))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (log.size + 40, hard))
        with pytest.raises(KafkaStorageError):
            log.append_as_leader(bytearray(build_batch([b"q" * 200])), 0)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert (log.log_end_offset, log.size, log_bytes(log)) == before
    assert log.append_as_leader(bytearray(build_batch(values(1))), 0).first_offset == 2


def test_concurrent_appends_get_distinct_contiguous_offsets(open_log: Any) -> None:
    log = open_log(**{"internal.segment.bytes": 4000})
    results: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            info = log.append_as_leader(bytearray(build_batch(values(2))), 0)
            with lock:
                results.append((info.first_offset, info.last_offset))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort()
    assert results == [(i * 2, i * 2 + 1) for i in range(200)]
    assert batch_offsets(log) == results
