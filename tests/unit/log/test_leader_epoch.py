"""LeaderEpochFileCache: Kafka's assign/lookup/truncate semantics, persisted on every change."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest

from pylog.log.leader_epoch import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache(tmp_path: Path) -> LeaderEpochFileCache:
    return LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")


def test_empty_cache(tmp_path: Path) -> None:
    c = cache(tmp_path)
    assert c.latest_epoch is None and c.latest_entry is None and c.earliest_entry is None
    assert c.end_offset_for(0, 100) == UNDEFINED
    assert c.epoch_for_offset(5) is None


def test_assign_persists_and_reloads(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(2, 6)
    c.assign(3, 8)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n2 6\n3 8\n"
    again = cache(tmp_path)
    assert again.entries() == [EpochEntry(2, 6), EpochEntry(3, 8)]
    assert again.latest_epoch == 3
    assert again.latest_entry == EpochEntry(3, 8)
    assert again.earliest_entry == EpochEntry(2, 6)


def test_same_epoch_at_later_offset_is_ignored(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(2, 6)
    c.assign(2, 10)
    assert c.entries() == [EpochEntry(2, 6)]
    # the same epoch at an earlier offset moves its start back
    c.assign(2, 4)
    assert c.entries() == [EpochEntry(2, 4)]


def test_conflicting_later_entries_are_removed(tmp_path: Path) -> None:
    c = cache(tmp_path)
    for epoch, offset in [(1, 0), (2, 10), (4, 20), (5, 30)]:
        c.assign(epoch, offset)
    # an older epoch than the latest: entries with epoch >= 3 go
    c.assign(3, 25)
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 25)]
    # a newer epoch at an offset not past the latest start: the latest goes
    c.assign(6, 25)
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(6, 25)]
    assert cache(tmp_path).entries() == c.entries()


def test_invalid_entry_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        cache(tmp_path).assign(-1, 0)


def test_end_offset_for(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(2, 6)
    c.assign(3, 8)
    c.assign(5, 12)
    leo = 20
    assert c.end_offset_for(UNDEFINED_EPOCH, leo) == UNDEFINED
    # older than the first epoch: itself, ending where the first epoch starts
    assert c.end_offset_for(1, leo) == (1, c.entries()[0][1])
    assert c.end_offset_for(2, leo) == (2, 8)
    assert c.end_offset_for(3, leo) == (3, 12)
    assert c.end_offset_for(4, leo) == (3, 12)  # unknown epoch between: the floor's end
    assert c.end_offset_for(5, leo) == (5, leo)  # latest epoch → log end offset
    assert c.end_offset_for(6, leo) == UNDEFINED


def test_epoch_for_offset(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(2, 6)
    c.assign(3, 8)
    assert c.epoch_for_offset(5) is None
    assert c.epoch_for_offset(6) == 2
    assert c.epoch_for_offset(7) == 2
    assert c.epoch_for_offset(8) == 3
    assert c.epoch_for_offset(1000) == 3


def test_truncate_from_end(tmp_path: Path) -> None:
    c = cache(tmp_path)
    for epoch, offset in [(2, 6), (3, 8), (4, 11)]:
        c.assign(epoch, offset)
    c.truncate_from_end(12)  # nothing starts at or after 12
    assert len(c) == 3
    c.truncate_from_end(8)
    assert c.entries() == [EpochEntry(2, 6)]
    assert cache(tmp_path).entries() == [EpochEntry(2, 6)]
    c.truncate_from_end(0)
    assert c.entries() == []


def test_truncate_from_start(tmp_path: Path) -> None:
    c = cache(tmp_path)
    for epoch, offset in [(2, 6), (3, 8), (4, 11)]:
        c.assign(epoch, offset)
    c.truncate_from_start(5)  # before everything: no change
    assert c.entries() == [EpochEntry(2, 6), EpochEntry(3, 8), EpochEntry(4, 11)]
    c.truncate_from_start(9)
    assert c.entries() == [EpochEntry(3, 9), EpochEntry(4, 11)]
    c.truncate_from_start(11)  # exclusive: an entry starting exactly there stays
    assert c.entries() == [EpochEntry(4, 11)]
    c.truncate_from_start(15)
    assert c.entries() == [EpochEntry(4, 15)]
    assert cache(tmp_path).entries() == [EpochEntry(4, 15)]


def test_clear_persists(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.assign(1, 0)
    c.clear()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    assert cache(tmp_path).entries() == []


def test_concurrent_assign_keeps_order(tmp_path: Path) -> None:
    c = cache(tmp_path)

    def work(base: int) -> None:
        for i in range(50):
            c.assign(base + i, (base + i) * 10)

    threads = [threading.Thread(target=work, args=(k * 50,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    entries = c.entries()
    assert all(
        a.epoch < b.epoch and a.start_offset < b.start_offset
        for a, b in itertools.pairwise(entries)
    )
    assert cache(tmp_path).entries() == entries
