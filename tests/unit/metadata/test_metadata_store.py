"""JsonMetadataStore on real files: the snapshot plus journal, an older
single-file store, a crash in the middle of a journal append, compaction,
batched creation with its caps, and the undo of a topic whose logs cannot be
made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pylog.errors import (
    KafkaStorageError,
    PolicyViolationError,
    TopicAlreadyExistsError,
)
from pylog.metadata import (
    JOURNAL_FILE,
    METADATA_FILE,
    JsonMetadataStore,
    MetadataEvent,
    NewTopic,
    TopicMetadata,
    json_store,
    new_uuid,
)


def test_changes_survive_a_reopen(tmp_path: Path) -> None:
    s = JsonMetadataStore(str(tmp_path))
    s.create_topic("a", 3, configs={"retention.ms": "5"})
    s.create_topic("b", 1)
    s.add_partitions("a", 4)
    s.alter_topic_config("a", {"retention.ms": None, "cleanup.policy": "compact"})
    s.delete_topic("b")
    first = s.reserve_producer_id_block(1000)
    s.close()
    again = JsonMetadataStore(str(tmp_path))
    assert [(t.name, t.partitions, t.configs) for t in again.topics()] == [
        ("a", 4, {"cleanup.policy": "compact"})
    ]
    assert again.cluster_id == s.cluster_id
    assert again.reserve_producer_id_block(1000) == first + 1000
    assert again.total_partitions() == 4


def test_an_older_single_file_store_loads(tmp_path: Path) -> None:
    doc = {
        "version": 1,
        "cluster_id": "hW6Zq1mFQjGJ0cQ2ZxLxJw",
        "producer_id_block_end": 2000,
        "topics": {
            "old": {"topic_id": "Yq0sE2vYQkq3j2qJ3v5bRw", "partitions": 2,
                    "replication_factor": 1, "configs": {"retention.ms": "9"}}
        },
    }  # fmt: skip
    (tmp_path / METADATA_FILE).write_text(json.dumps(doc))
    s = JsonMetadataStore(str(tmp_path))
    assert s.cluster_id == "hW6Zq1mFQjGJ0cQ2ZxLxJw"
    assert s.topic("old") == TopicMetadata(
        "old", "Yq0sE2vYQkq3j2qJ3v5bRw", 2, {"retention.ms": "9"}, 1
    )
    assert s.reserve_producer_id_block(10) == 2000


@pytest.mark.parametrize("tail", [b'0badc0de {"ops":[{"del":"a"}]}\n', b'1234abcd {"op'])
def test_a_torn_or_corrupt_last_journal_entry_is_cut_off(tmp_path: Path, tail: bytes) -> None:
    s = JsonMetadataStore(str(tmp_path))
    s.create_topic("a", 1)
    s.close()
    journal = tmp_path / JOURNAL_FILE
    good = journal.read_bytes()
    with journal.open("ab") as f:
        f.write(tail)  # a crash in the middle of an append (never acknowledged)
    s = JsonMetadataStore(str(tmp_path))
    assert s.topic("a") is not None
    assert journal.read_bytes() == good
    s.create_topic("b", 1)  # and appends go on after the cut
    s.close()
    assert {t.name for t in JsonMetadataStore(str(tmp_path)).topics()} == {"a", "b"}


def test_the_journal_is_folded_into_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_store, "COMPACT_BYTES", 2000)
    s = JsonMetadataStore(str(tmp_path))
    for i in range(40):
        s.create_topic(f"t{i:02d}", 1)
    journal = tmp_path / JOURNAL_FILE
    assert journal.stat().st_size <= 2000 + 300  # folded at least once
    snapshot = json.loads((tmp_path / METADATA_FILE).read_text())
    assert len(snapshot["topics"]) >= 10
    s.close()
    assert len(JsonMetadataStore(str(tmp_path)).topics()) == 40


def test_a_batch_is_one_journal_entry_with_its_caps(tmp_path: Path) -> None:
    s = JsonMetadataStore(str(tmp_path))
    s.create_topic("x", 2)
    journal = tmp_path / JOURNAL_FILE
    lines = journal.read_bytes().count(b"\n")
    made = s.create_topics(
        [NewTopic("a", 3), NewTopic("x", 1), NewTopic("b", 4), NewTopic("c", 2)],
        max_partitions=10,
    )
    assert [type(m) for m in made] == [
        TopicMetadata,
        TopicAlreadyExistsError,
        TopicMetadata,
        PolicyViolationError,  # 2 + 3 + 4 + 2 > 10
    ]
    assert journal.read_bytes().count(b"\n") == lines + 1
    assert s.total_partitions() == 9
    with pytest.raises(PolicyViolationError):
        s.add_partitions("a", 5, max_partitions=10)


def test_a_topic_whose_logs_cannot_be_made_is_removed_again(tmp_path: Path) -> None:
    s = JsonMetadataStore(str(tmp_path))
    heard: list[tuple[str, str]] = []

    def listener(event: MetadataEvent) -> None:
        heard.append((event.kind, event.topic.name))
        if event.kind == "create" and event.topic.name == "b":
            raise KafkaStorageError("no space left on device")

    s.add_listener(listener)
    made = s.create_topics([NewTopic("a", 1), NewTopic("b", 1), NewTopic("c", 1)])
    assert isinstance(made[0], TopicMetadata)
    assert isinstance(made[1], KafkaStorageError) and isinstance(made[2], KafkaStorageError)
    assert heard == [("create", "a"), ("create", "b"), ("delete", "b")]
    s.close()
    assert [t.name for t in JsonMetadataStore(str(tmp_path)).topics()] == ["a"]


def test_a_new_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-storage format -t <id> (and the other tools) read an id starting
    with '-' as an option; Kafka's Uuid.randomUuid draws again, and so does
    new_uuid. The first draw here encodes to a leading '-' (0xF8 → '-')."""
    draws = iter([b"\xf8" + bytes(15), b"\x11" * 16])
    monkeypatch.setattr("os.urandom", lambda n: next(draws))
    first = new_uuid()
    assert not first.startswith("-")
    assert first.startswith("ER")
