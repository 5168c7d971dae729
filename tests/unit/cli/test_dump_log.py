"""`pylog dump-log` on real segment files, including ones written by another
implementation of Kafka's format (kafka-python's record builders)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from pylog import _native

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def kafka_python_batch(
    base_offset: int, values: list[bytes], codec: int = 0, producer_id: int = -1
) -> bytes:
    """One v2 batch written by kafka-python, moved to ``base_offset``.

    The base offset is outside the CRC32C's range, so patching it keeps the batch valid.
    """
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_offset if producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for i, value in enumerate(values):
        key = f"key-{base_offset + i}".encode()
        builder.append(
            i,
            timestamp=1_700_000_000_000 + base_offset + i,
            key=key,
            value=value,
            headers=[("h", b"v")],
        )
    data = bytearray(builder.build())
    data[0:8] = struct.pack(">q", base_offset)
    return bytes(data)


def kafka_python_legacy(base_offset: int, values: list[bytes], magic: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 24)
    for i, value in enumerate(values):
        builder.append(
            base_offset + i, timestamp=1_700_000_000_000 if magic else None, key=None, value=value
        )
    return bytes(builder.build())


def run_dump(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pylog.cli", "dump-log", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    """A segment of kafka-python batches, one per codec, 3 records each."""
    path = tmp_path / "00000000000000000000.log"
    offset = 0
    with open(path, "wb") as f:
        for codec in CODECS.values():
            # repetitive enough that kafka-python keeps the codec (it stores a
            # batch uncompressed when compression would not shrink it)
            values = [f"value-{offset + i}-{codec}-".encode() * 20 for i in range(3)]
            f.write(kafka_python_batch(offset, values, codec))
            offset += 3
    return path


def test_dumps_batches_written_by_kafka_python(segment: Path) -> None:
    result = run_dump("--files", str(segment))
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("baseOffset:")]
    assert len(lines) == len(CODECS)
    for n, (name, line) in enumerate(zip(CODECS, lines, strict=True)):
        assert f"baseOffset: {3 * n} lastOffset: {3 * n + 2} count: 3" in line
        assert f"compresscodec: {name}" in line
        assert "isvalid: true" in line
    assert "Log starting offset: 0" in result.stdout


def test_print_data_log_shows_every_record(segment: Path) -> None:
    result = run_dump("--files", str(segment), "--print-data-log")
    assert result.returncode == 0, result.stderr
    records = [ln for ln in result.stdout.splitlines() if ln.startswith("| offset:")]
    assert len(records) == 3 * len(CODECS)
    for offset, line in enumerate(records):
        codec = offset // 3
        assert line.startswith(f"| offset: {offset} CreateTime: {1_700_000_000_000 + offset} ")
        assert f"key: key-{offset}" in line
        assert f"payload: value-{offset}-{codec}-value-{offset}-{codec}-" in line
        assert "headerKeys: [h]" in line


def test_legacy_message_sets_are_dumped(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(
        kafka_python_legacy(0, [b"m0-a", b"m0-b"], magic=0)
        + kafka_python_legacy(2, [b"m1-a"], magic=1)
    )
    result = run_dump("--files", str(path), "--print-data-log")
    assert result.returncode == 0, result.stderr
    assert "magic: 0" in result.stdout and "magic: 1" in result.stdout
    assert "payload: m0-b" in result.stdout and "payload: m1-a" in result.stdout


def test_corrupt_batch_names_file_position_and_reason(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    first_size = 12 + struct.unpack(">i", data[8:12])[0]
    second_size = 12 + struct.unpack(">i", data[first_size + 8 : first_size + 12])[0]
    bad_position = first_size + second_size
    data[bad_position + 70] ^= 0xFF  # inside the third batch's checksummed bytes
    segment.write_bytes(bytes(data))

    result = run_dump("--files", str(segment))
    assert result.returncode != 0
    assert str(segment) in result.stderr
    assert f"position {bad_position}" in result.stderr
    assert "CRC" in result.stderr
    # the valid batches before it are still printed
    assert result.stdout.count("baseOffset:") == 2


def test_truncated_file_fails_naming_position(segment: Path) -> None:
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])
    result = run_dump("--files", str(segment))
    assert result.returncode != 0
    assert str(segment) in result.stderr


def test_missing_file_fails(tmp_path: Path) -> None:
    result = run_dump("--files", str(tmp_path / "00000000000000000000.log"))
    assert result.returncode != 0
    assert "00000000000000000000.log" in result.stderr


def _write_indexes(segment: Path) -> tuple[Path, Path]:
    """Index every batch of ``segment`` with the native index classes."""
    index_path = segment.with_suffix(".index")
    time_path = segment.with_suffix(".timeindex")
    oi = _native.OffsetIndex(str(index_path), 0, max_index_size=4096)
    ti = _native.TimeIndex(str(time_path), 0, max_index_size=4096)
    infos, _ = _native.read_batch_infos(str(segment), 0, 100)
    for info in infos:
        oi.append(info.last_offset, info.position)
        ti.maybe_append(info.max_timestamp, info.last_offset)
    oi.close()
    ti.close()
    return index_path, time_path


def test_dump_and_verify_indexes(segment: Path) -> None:
    index_path, time_path = _write_indexes(segment)
    result = run_dump("--files", str(index_path), "--files", str(time_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("offset: ") >= 2 * len(CODECS)
    assert "offset: 2 position: 0" in result.stdout

    verify = run_dump("--files", str(index_path), "--verify-index-only")
    assert verify.returncode == 0, verify.stderr
    assert "position:" not in verify.stdout


def test_verify_index_reports_mismatch(segment: Path) -> None:
    index_path, _ = _write_indexes(segment)
    raw = bytearray(index_path.read_bytes())
    # point the second entry at the first batch's position's neighbour: a
    # position where no batch starts
    raw[12:16] = struct.pack(">I", 7)
    index_path.write_bytes(bytes(raw))
    result = run_dump("--files", str(index_path), "--verify-index-only")
    assert result.returncode != 0
    assert "Mismatches in" in result.stdout
    assert str(index_path) in result.stderr


def test_large_file_shows_progress(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.log"
    value = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for n in range(70):
            f.write(kafka_python_batch(n, [value]))
    result = run_dump("--files", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("baseOffset:") == 70
    assert "00000000000000000000.log" in result.stderr  # the progress bar's label


def test_configs_lists_kafka_keys_and_defaults() -> None:
    topic = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "configs", "keys", "--markdown"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert topic.returncode == 0, topic.stderr
    assert "| segment.bytes | int | 1073741824 |" in topic.stdout
    assert "| retention.ms | long | 604800000 |" in topic.stdout
    broker = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "configs", "keys", "--broker"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert broker.returncode == 0, broker.stderr
    assert "log.retention.check.interval.ms" in broker.stdout


def test_truncation_while_dumping_is_an_error_never_sigbus(tmp_path: Path) -> None:
    """A live broker may truncate a segment while dump-log reads it (a follower
    truncating to its leader, the cleaner, retention). The tool reads with
    pread, so a file cut under it ends the dump with an error naming where it
    ends now (or, cut after the read, a whole dump) — never SIGBUS, which a
    memory-mapped scan of the same file delivers (pylog before issue 21 did)."""
    path = tmp_path / "00000000000000000000.log"
    one = bytearray(_native.build_batch([(None, os.urandom(256 << 10), [], 1_700_000_000_000)]))
    count = 256  # 64 MiB: the verification scan is still running when the cuts come

    def write() -> None:
        with open(path, "wb") as f:
            for n in range(count):
                one[0:8] = struct.pack(">q", n)  # outside the CRC's range
                f.write(one)

    # The cuts land at different points of the read: before the headers are
    # walked, during the scan, after it (when exactly varies run to run).
    for delay in (0.0, 0.005, 0.01, 0.02, 0.05):
        write()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pylog.cli", "dump-log", "--files", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("Dumping")  # it has started reading
        time.sleep(delay)
        # At batch boundaries, then inside a batch (a torn tail).
        for batches, extra in ((count // 2, 0), (count // 4, 0), (3, 7)):
            os.truncate(path, batches * len(one) + extra)
            time.sleep(0.005)
        # Read the rest through the same buffered reader: communicate()
        # reads the pipe itself and would lose lines readline() buffered.
        out = proc.stdout.read()
        err = proc.stderr.read() if proc.stderr is not None else ""
        proc.wait(timeout=120)
        assert proc.returncode != -signal.SIGBUS, f"SIGBUS at delay {delay}"
        assert proc.returncode in (0, 1), (delay, proc.returncode, err)
        printed = [
            int(line.split()[1]) for line in out.splitlines() if line.startswith("baseOffset:")
        ]
        # What is shown is what was there: the batches in order, from the first.
        assert printed == list(range(len(printed))), delay
        if proc.returncode == 1:
            assert "Error:" in err and "position" in err, err
        else:  # read whole before a cut, or after one at a batch boundary
            assert len(printed) in (count, count // 2, count // 4), (delay, err)


def test_transactions_control_records_txnindex_and_snapshot(tmp_path: Path) -> None:
    """A log written by the storage layer with one committed and one aborted
    transaction: the markers print as Kafka's tool prints them, the batches
    carry the transactional flag, the .txnindex and .snapshot decode."""
    from pylog.log.end_transaction_marker import (
        ABORT,
        COMMIT,
        EndTransactionMarker,
        build_marker_batch,
    )
    from pylog.log.log import AppendOrigin, Log

    log = Log.open(str(tmp_path / "t-0"))
    now = int(time.time() * 1000)  # an old timestamp would roll the segment (segment.ms)
    try:
        for pid in (7, 8):
            data = _native.build_batch(
                [(None, f"v{pid}".encode(), [], now)],
                producer_id=pid,
                producer_epoch=1,
                base_sequence=0,
                is_transactional=True,
            )
            log.append_as_leader(bytearray(data), 0)
        for pid, kind in ((7, COMMIT), (8, ABORT)):
            marker = build_marker_batch(pid, 1, EndTransactionMarker(kind, 4), timestamp_ms=now)
            log.append_as_leader(bytearray(marker), 0, origin=AppendOrigin.COORDINATOR)
        log.update_high_watermark(log.log_end_offset)
        log.roll()  # a snapshot at offset 4
    finally:
        log.close()
    d = tmp_path / "t-0"
    result = run_dump("--files", str(d / "00000000000000000000.log"), "--print-data-log")
    assert result.returncode == 0, result.stderr
    batches = [ln for ln in result.stdout.splitlines() if ln.startswith("baseOffset:")]
    assert len(batches) == 4
    assert all("isTransactional: true" in b for b in batches)
    assert ["isControl: true" in b for b in batches] == [False, False, True, True]
    records = [ln for ln in result.stdout.splitlines() if ln.startswith("| offset:")]
    assert records[2].endswith(" endTxnMarker: COMMIT coordinatorEpoch: 4")
    assert records[3].endswith(" endTxnMarker: ABORT coordinatorEpoch: 4")
    assert "payload" not in records[2] + records[3]

    result = run_dump("--files", str(d / "00000000000000000000.txnindex"))
    assert result.returncode == 0, result.stderr
    assert (
        "version: 0 producerId: 8 firstOffset: 1 lastOffset: 3 lastStableOffset: 4"
        in result.stdout.splitlines()
    )
    result = run_dump("--files", str(d / "00000000000000000004.snapshot"))
    assert result.returncode == 0, result.stderr
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("producerId:")]
    assert len(lines) == 2
    assert lines[1].startswith(
        "producerId: 8 producerEpoch: 1 coordinatorEpoch: 4 "
        "currentTxnFirstOffset: OptionalLong.empty"
    )


def _coordinator_segment(path: Path, records: list[tuple[bytes | None, bytes | None]]) -> Path:
    """One batch of ``records`` (key, value) as a coordinator writes them."""
    batch = _native.build_batch(
        [(k, v, [], 1_700_000_000_000) for k, v in records],
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        is_transactional=False,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(batch)
    return path


def _decoded(path: Path, option: str) -> list[str]:
    """Each record's ``key: ...`` onwards, as ``pylog dump-log`` prints it
    (in-process: a subprocess per call costs seconds here)."""
    from click.testing import CliRunner

    from pylog.cli.dump_log import dump_log

    result = CliRunner().invoke(dump_log, ["--files", str(path), option])
    assert result.exit_code == 0, result.output
    return [
        ln.split(" headerKeys: [] ", 1)[1]
        for ln in result.stdout.splitlines()
        if ln.startswith("| offset:")
    ]


def test_transaction_log_decoder_prints_kafkas_json(tmp_path: Path) -> None:
    """--transaction-log-decoder: __transaction_state records as Kafka 4.3's
    kafka-dump-log prints them (value v0 and the flexible v1 with its tagged
    fields only when not their default, a tombstone as <DELETE>), written by
    pylog's TransactionLog (this segment's dump is Kafka's, line for line)."""
    from pylog.common.topic_partition import TopicPartition
    from pylog.common.transaction_version import TransactionVersion
    from pylog.transaction.transaction_log import key_to_bytes, value_to_bytes
    from pylog.transaction.transaction_metadata import TransactionState, TxnTransitMetadata

    def transit(state: TransactionState, parts: list[TopicPartition]) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            producer_id=7, previous_producer_id=7, next_producer_id=-1, producer_epoch=3,
            last_producer_epoch=2, txn_timeout_ms=60000, state=state,
            partitions=frozenset(parts), txn_start_ms=1000, txn_last_update_ms=2000,
            client_transaction_version=TransactionVersion.TV_2,
        )  # fmt: skip

    key = key_to_bytes("tx-1")
    empty = value_to_bytes(transit(TransactionState.EMPTY, []), 0)
    ongoing = value_to_bytes(transit(TransactionState.ONGOING, [TopicPartition("t", 0)]), 1)
    seg = _coordinator_segment(
        tmp_path / "__transaction_state-0" / "00000000000000000000.log",
        [(key, empty), (key, ongoing), (key, None), (b"\x00\x07", b"\x00\x00")],
    )
    k = 'key: {"type":"0","data":{"transactionalId":"tx-1"}}'
    assert _decoded(seg, "--transaction-log-decoder") == [
        f'{k} payload: {{"version":"0","data":{{"producerId":7,"producerEpoch":3,'
        '"transactionTimeoutMs":60000,"transactionStatus":0,"transactionPartitions":null,'
        '"transactionLastUpdateTimestampMs":2000,"transactionStartTimestampMs":1000}}',
        f'{k} payload: {{"version":"1","data":{{"producerId":7,"previousProducerId":7,'
        '"producerEpoch":3,"transactionTimeoutMs":60000,"transactionStatus":1,'
        '"transactionPartitions":[{"topic":"t","partitionIds":[0]}],'
        '"transactionLastUpdateTimestampMs":2000,"transactionStartTimestampMs":1000,'
        '"clientTransactionVersion":2}}',
        f"{k} payload: <DELETE>",
        "key: Unknown record type 7 at offset 3, skipping.",
    ]


def test_offsets_decoder_prints_kafkas_json(tmp_path: Path) -> None:
    """--offsets-decoder: __consumer_offsets records as Kafka 4.3's
    kafka-dump-log prints them (this segment's dump is Kafka's, line for
    line): an offset commit, a classic group whose
    member's subscription and assignment decode as the consumer protocol's,
    KIP-848 records (tagged fields, topic ids as Kafka prints a Uuid), a
    tombstone, and a value that does not decode (named, the dump goes on)."""
    from pylog.coordinator.consumer_group_records import (
        group_epoch_record,
        target_epoch_record,
    )
    from pylog.coordinator.records import (
        GroupMetadataKey,
        GroupMetadataValue,
        MemberRecord,
        OffsetCommitKey,
        OffsetCommitValue,
    )

    # ConsumerProtocolSubscription v1 (topics, no user data, no owned
    # partitions) and ConsumerProtocolAssignment v0 (t: [0, 1]).
    subscription = struct.pack(">hih1sii", 1, 1, 1, b"t", -1, 0)
    assignment = struct.pack(">hih1siiii", 0, 1, 1, b"t", 2, 0, 1, -1)
    member = MemberRecord("m-1", None, "c", "/127.0.0.1", 30000, 10000, subscription, assignment)
    group = GroupMetadataValue("consumer", 2, "range", "m-1", 5000, [member])
    offset_key = OffsetCommitKey("g", "t", 0).encode()
    assignment_key, assignment_value = target_epoch_record("g2", 4)
    seg = _coordinator_segment(
        tmp_path / "__consumer_offsets-0" / "00000000000000000000.log",
        [
            (offset_key, OffsetCommitValue(42, 3, "meta", 1234).encode()),
            (GroupMetadataKey("g").encode(), group.encode()),
            group_epoch_record("g2", 3),
            (assignment_key, assignment_value),
            (offset_key, None),
            (GroupMetadataKey("g").encode(), b"\x00\x09"),
        ],
    )
    assert _decoded(seg, "--offsets-decoder") == [
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: '
        '{"version":"3","data":{"offset":42,"leaderEpoch":3,"metadata":"meta",'
        '"commitTimestamp":1234}}',
        'key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{'
        '"protocolType":"consumer","generation":2,"protocol":"range","leader":"m-1",'
        '"currentStateTimestamp":5000,"members":[{"memberId":"m-1","groupInstanceId":null,'
        '"clientId":"c","clientHost":"/127.0.0.1","rebalanceTimeout":30000,'
        '"sessionTimeout":10000,"subscription":{"topics":["t"],"userData":null,'
        '"ownedPartitions":[]},"assignment":{"assignedPartitions":[{"topic":"t",'
        '"partitions":[0,1]}],"userData":null}}]}}',
        'key: {"type":"3","data":{"groupId":"g2"}} payload: {"version":"0","data":{"epoch":3}}',
        'key: {"type":"6","data":{"groupId":"g2"}} payload: {"version":"0","data":{'
        '"assignmentEpoch":4}}',
        'key: {"type":"1","data":{"group":"g","topic":"t","partition":0}} payload: <DELETE>',
        "key: Error at offset 5, skipping. Found an unknown record version 9 for 2 type",
    ]
    from click.testing import CliRunner

    from pylog.cli.dump_log import dump_log

    both = ["--files", str(seg), "--offsets-decoder", "--transaction-log-decoder"]
    result = CliRunner().invoke(dump_log, both)
    assert result.exit_code != 0 and "one at most" in result.output
