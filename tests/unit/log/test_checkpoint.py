"""OffsetCheckpointFile / CheckpointFile: Kafka's text format, atomic writes, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pylog.common.topic_partition import TopicPartition
from pylog.errors import KafkaStorageError
from pylog.log.checkpoint import CorruptCheckpointError, OffsetCheckpointFile
from pylog.log.leader_epoch import EpochEntry, LeaderEpochCheckpointFile
from pylog.log.partition_metadata import (
    CorruptPartitionMetadataError,
    InconsistentTopicIdError,
    PartitionMetadataFile,
    new_topic_id,
    parse_topic_id,
)


def test_round_trip_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    cp = OffsetCheckpointFile(path)
    offsets = {
        TopicPartition("log-format", 1): 0,
        TopicPartition("log-format", 2): 0,
        TopicPartition("kafka-action", 1): 1,
        TopicPartition("kafka-action", 2): 0,
    }
    cp.write(offsets)
    assert path.read_text() == (
        "0\n4\nkafka-action 1 1\nkafka-action 2 0\nlog-format 1 0\nlog-format 2 0\n"
    )
    assert cp.read() == offsets
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_reads_a_file_written_by_kafka(tmp_path: Path) -> None:
    path = tmp_path / "log-start-offset-checkpoint"
    path.write_text("0\n2\n__consumer_offsets 17 4711\nmy.topic_x 0 9223372036854775807\n")
    assert OffsetCheckpointFile(path).read() == {
        ("__consumer_offsets", 17): 4711,
        ("my.topic_x", 0): 2**63 - 1,
    }


def test_missing_and_empty_files_read_as_nothing(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "absent").read() == {}
    (tmp_path / "empty").write_text("")
    assert OffsetCheckpointFile(tmp_path / "empty").read() == {}


def test_write_replaces_atomically_and_leftover_tmp_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    (tmp_path / "replication-offset-checkpoint.tmp").write_text("garbage from a crash")
    cp = OffsetCheckpointFile(path)
    cp.write({("t", 0): 5})
    cp.write({("t", 0): 6, ("t", 1): 7})
    assert cp.read() == {("t", 0): 6, ("t", 1): 7}
    assert os.listdir(tmp_path) == ["replication-offset-checkpoint"]


@pytest.mark.parametrize(
    ("content", "line", "words"),
    [
        ("1\n0\n", 1, "unrecognized version 1"),
        ("x\n0\n", 1, "malformed version"),
        ("0\n", 2, "missing entry count"),
        ("0\nfour\n", 2, "malformed entry count"),
        ("0\n2\nt 0 5\nt 1\n", 4, "malformed line 't 1'"),
        ("0\n1\nt zero 5\n", 3, "malformed line"),
        ("0\n1\nt 0 5x\n", 3, "malformed line"),
    ],
)
def test_malformed_file_names_file_and_line(
    tmp_path: Path, content: str, line: int, words: str
) -> None:
    path = tmp_path / "cleaner-offset-checkpoint"
    path.write_text(content)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert isinstance(info.value, KafkaStorageError)
    assert info.value.line_number == line
    assert f"{path}:{line}" in str(info.value)
    assert words in str(info.value)


def test_entry_count_mismatch_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_text("0\n3\nt 0 5\nt 1 6\n")
    with pytest.raises(CorruptCheckpointError, match="expected 3 entries but found 2"):
        OffsetCheckpointFile(path).read()


def test_write_failure_is_a_storage_error(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "no-such-dir" / "cp")
    with pytest.raises(KafkaStorageError, match="no-such-dir"):
        cp.write({("t", 0): 1})


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cp = LeaderEpochCheckpointFile(path)
    cp.write([EpochEntry(0, 0), EpochEntry(3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert cp.read() == [EpochEntry(0, 0), EpochEntry(3, 120)]
    path.write_text("0\n1\n3\n")
    with pytest.raises(CorruptCheckpointError, match=r"leader-epoch-checkpoint:3"):
        cp.read()


# ----------------------------------------------------------------- partition.metadata


def test_partition_metadata_round_trip(tmp_path: Path) -> None:
    topic_id = new_topic_id()
    assert len(topic_id) == 22 and not topic_id.startswith("-")
    assert len(parse_topic_id(topic_id)) == 16
    f = PartitionMetadataFile(tmp_path)
    assert f.read() is None and not f.exists()
    f.write(topic_id)
    assert (tmp_path / "partition.metadata").read_text() == f"version: 0\ntopic_id: {topic_id}\n"
    assert PartitionMetadataFile(tmp_path).read() == topic_id
    assert f.check_or_write(topic_id) == topic_id


def test_partition_metadata_mismatch_and_corruption(tmp_path: Path) -> None:
    f = PartitionMetadataFile(tmp_path)
    first, second = new_topic_id(), new_topic_id()
    assert f.check_or_write(first) == first
    with pytest.raises(InconsistentTopicIdError, match=second):
        f.check_or_write(second)
    (tmp_path / "partition.metadata").write_text("version: 1\ntopic_id: x\n")
    with pytest.raises(CorruptPartitionMetadataError, match="line 1"):
        f.read()
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: not-an-id\n")
    with pytest.raises(CorruptPartitionMetadataError, match="line 2"):
        f.read()


def test_reads_kafkas_partition_metadata(tmp_path: Path) -> None:
    # As written by a Kafka 3.x broker.
    (tmp_path / "partition.metadata").write_text("version: 0\ntopic_id: 5pZxV1jJRlKbBCuCIhSIHg\n")
    assert PartitionMetadataFile(tmp_path).read() == "5pZxV1jJRlKbBCuCIhSIHg"
