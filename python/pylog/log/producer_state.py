"""Idempotent and transactional producer state of one partition, and its snapshots.

For each producer id the partition remembers the producer epoch, the metadata
of the last five batches it appended (so a retried batch is answered with the
original offsets instead of being written twice), the coordinator epoch of
the last transaction marker and the first offset of an open transaction.

The state is rebuilt from the log at start-up; to keep that cheap it is
snapshotted to ``<20-digit offset>.snapshot`` files in the partition directory
in Kafka's producer-snapshot format (version 1)::

    version                i16   = 1
    crc                    u32   CRC32C of everything after this field
    producer_entries       i32 count, then per entry:
      producer_id              i64
      epoch                    i16
      last_sequence            i32
      last_offset              i64
      offset_delta             i32   last_offset - first offset of the last batch
      timestamp                i64
      coordinator_epoch        i32
      current_txn_first_offset i64   -1 when no transaction is open

All integers are big-endian. The snapshot's offset (its file name) is the
offset the state covers up to, exclusive.

Transactions (Kafka's ProducerStateManager): a producer's first
transactional batch opens its transaction at that batch's offset; the
partition keeps every open transaction ordered by its first offset, and the
earliest of them bounds the last stable offset (LSO). A COMMIT or ABORT
marker completes the producer's transaction; the completed transaction stays
"unreplicated", still bounding the LSO, until the high watermark passes its
marker, so a read_committed consumer never sees a transaction whose outcome
could still be lost with a leader change.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from pylog import _native
from pylog.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from pylog.log.checkpoint import replace_file_durably
from pylog.log.verification_guard import SENTINEL, VerificationGuard, VerificationStateEntry

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "PRODUCER_SNAPSHOT_VERSION",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "CompletedTxn",
    "CorruptSnapshotError",
    "ProducerBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "decrement_sequence",
    "read_snapshot",
    "snapshot_file_name",
    "write_snapshot",
]

PRODUCER_SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")

_log = logging.getLogger("pylog.log")


class CorruptSnapshotError(KafkaStorageError):
    """A producer snapshot that fails its version, length or CRC check."""


class ProducerBatch(Protocol):
    """What producer state needs of a batch; ``pylog._native.BatchInfo`` has it all."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` on the sequence ring that wraps after i32::MAX to 0."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True)
class BatchMetadata:
    """One appended batch of a producer: its sequence and offset ranges."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended (Kafka's CompletedTxn), with the LSO
    right after its marker: what an ABORT's ``.txnindex`` entry records."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool
    last_stable_offset: int


@dataclass
class ProducerStateEntry:
    """What the partition knows about one producer id."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offset(name: str) -> int | None:
    m = _SNAPSHOT_NAME.match(name)
    return int(m.group(1)) if m else None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    items = list(entries)
    body = bytearray(_COUNT.pack(len(items)))
    for e in items:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    payload = bytes(body)
    return _HEADER.pack(PRODUCER_SNAPSHOT_VERSION, _native.crc32c(payload)) + payload


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerStateEntry]:
    if len(data) < _HEADER.size + _COUNT.size:
        raise CorruptSnapshotError(f"producer snapshot {path} is truncated ({len(data)} bytes)")
    version, crc = _HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"producer snapshot {path} has unknown version {version}")
    computed = _native.crc32c(bytes(data[_HEADER.size :]))
    if computed != crc:
        raise CorruptSnapshotError(
            f"producer snapshot {path} is corrupt: stored crc {crc}, computed {computed}"
        )
    (count,) = _COUNT.unpack_from(data, _HEADER.size)
    start = _HEADER.size + _COUNT.size
    if count < 0 or len(data) != start + count * _ENTRY.size:
        raise CorruptSnapshotError(
            f"producer snapshot {path}: {count} entries do not match {len(data)} bytes"
        )
    entries: list[ProducerStateEntry] = []
    for i in range(count):
        pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first = _ENTRY.unpack_from(
            data, start + i * _ENTRY.size
        )
        entry = ProducerStateEntry(
            producer_id=pid,
            producer_epoch=epoch,
            coordinator_epoch=coord,
            last_timestamp=ts,
            current_txn_first_offset=None if txn_first < 0 else txn_first,
        )
        if last_offset >= 0:
            entry.batches.append(
                BatchMetadata(
                    first_seq=decrement_sequence(last_seq, delta),
                    last_seq=last_seq,
                    first_offset=last_offset - delta,
                    last_offset=last_offset,
                    timestamp=ts,
                )
            )
        entries.append(entry)
    return entries


def write_snapshot(path: str, entries: Iterable[ProducerStateEntry]) -> None:
    """Write a snapshot durably: temp file, fsync, rename, fsync the directory."""
    data = encode_snapshot(entries)
    try:
        replace_file_durably(path, data)
    except OSError as e:
        raise KafkaStorageError(f"error writing producer snapshot {path}: {e}", e.errno) from e


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise KafkaStorageError(f"error reading producer snapshot {path}: {e}", e.errno) from e
    return decode_snapshot(data, path)


class ProducerStateManager:
    """Producer id → state for one partition, with snapshots in ``log_dir``.

    Not meant to be shared without the owning Log's lock, but every method
    takes an internal lock so that background snapshot and expiry tasks are safe.
    """

    def __init__(self, log_dir: str | os.PathLike[str], producer_id_expiration_ms: int = 86400000):
        self.log_dir = os.fspath(log_dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._lock = threading.RLock()
        self._producers: dict[int, ProducerStateEntry] = {}
        self._last_map_offset = 0
        self._last_snap_offset = 0
        self._snapshots: dict[int, str] = self._scan_snapshots()
        # first offset -> producer id of each open transaction
        self._ongoing: dict[int, int] = {}
        # first offset -> a completed transaction whose marker the HW has not passed
        self._unreplicated: dict[int, CompletedTxn] = {}
        # producer id -> its guard while a KIP-890 verification is out
        self._verifications: dict[int, VerificationStateEntry] = {}

    # ------------------------------------------------------------------ snapshots on disk

    def _scan_snapshots(self) -> dict[int, str]:
        found: dict[int, str] = {}
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return found
        for name in names:
            offset = _snapshot_offset(name)
            if offset is not None:
                found[offset] = os.path.join(self.log_dir, name)
        return found

    def snapshot_offsets(self) -> list[int]:
        with self._lock:
            return sorted(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        with self._lock:
            return max(self._snapshots) if self._snapshots else None

    @property
    def oldest_snapshot_offset(self) -> int | None:
        with self._lock:
            return min(self._snapshots) if self._snapshots else None

    def _delete_snapshot(self, offset: int) -> None:
        path = self._snapshots.pop(offset, None)
        if path is None:
            return
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise KafkaStorageError(f"error deleting producer snapshot {path}: {e}", e.errno) from e

    def take_snapshot(self, offset: int | None = None) -> str | None:
        """Snapshot the state at ``offset`` (default: the map end offset).

        Nothing is written if a snapshot at that offset already exists or the
        state has not moved past the last snapshot. Returns the file written.
        """
        with self._lock:
            at = self._last_map_offset if offset is None else offset
            if at in self._snapshots or (offset is None and at <= self._last_snap_offset):
                return None
            path = os.path.join(self.log_dir, snapshot_file_name(at))
            write_snapshot(path, self._producers.values())
            self._snapshots[at] = path
            self._last_snap_offset = at
            return path

    def load_latest_snapshot(self, up_to_offset: int, now_ms: int | None = None) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``up_to_offset``.

        Corrupt snapshots met on the way are deleted, each with a log line.
        Returns the offset loaded, or None (state then empty, at offset 0).
        """
        with self._lock:
            self._producers.clear()
            for offset in sorted((o for o in self._snapshots if o <= up_to_offset), reverse=True):
                path = self._snapshots[offset]
                try:
                    entries = read_snapshot(path)
                except CorruptSnapshotError as e:
                    _log.warning("deleting corrupt producer snapshot %s: %s", path, e)
                    self._delete_snapshot(offset)
                    continue
                except KafkaStorageError as e:
                    _log.warning("deleting unreadable producer snapshot %s: %s", path, e)
                    self._delete_snapshot(offset)
                    continue
                for entry in entries:
                    if now_ms is None or not self._is_expired(entry, now_ms):
                        self._producers[entry.producer_id] = entry
                self._rebuild_ongoing()
                self._last_map_offset = offset
                self._last_snap_offset = offset
                return offset
            self._ongoing.clear()
            self._unreplicated.clear()
            self._last_map_offset = 0
            self._last_snap_offset = 0
            return None

    def _rebuild_ongoing(self) -> None:
        """The open transactions are the entries that have a first offset
        (a snapshot carries it: Kafka's current_txn_first_offset)."""
        self._ongoing = {
            e.current_txn_first_offset: pid
            for pid, e in self._producers.items()
            if e.current_txn_first_offset is not None
        }
        self._unreplicated.clear()

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Forget snapshots outside (log_start_offset, log_end_offset] and, unless the
        state already ends at the log end, reload from the newest remaining one.

        The caller then replays the log from ``map_end_offset`` to the log end.
        """
        with self._lock:
            for offset in list(self._snapshots):
                if offset > log_end_offset or offset <= log_start_offset:
                    self._delete_snapshot(offset)
            if log_end_offset != self._last_map_offset:
                loaded = self.load_latest_snapshot(log_end_offset, now_ms)
                if loaded is None:
                    self._last_map_offset = log_start_offset
                    self._last_snap_offset = log_start_offset
            else:
                self._evict_before(log_start_offset)

    def _evict_before(self, log_start_offset: int) -> None:
        # A producer whose last batch is gone from the log has no state left to dedupe against.
        stale = [
            pid
            for pid, e in self._producers.items()
            if e.batches
            and e.last_data_offset < log_start_offset
            and e.current_txn_first_offset is None
        ]
        for pid in stale:
            del self._producers[pid]

    def delete_snapshots_before(self, offset: int) -> None:
        with self._lock:
            for o in [o for o in self._snapshots if o < offset]:
                self._delete_snapshot(o)

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete snapshots above ``offset`` (the log was truncated to it)."""
        with self._lock:
            for o in [o for o in self._snapshots if o > offset]:
                self._delete_snapshot(o)

    def truncate_fully(self, start_offset: int = 0) -> None:
        """Forget every producer and snapshot; the state restarts at ``start_offset``."""
        with self._lock:
            self._producers.clear()
            self._ongoing.clear()
            self._unreplicated.clear()
            for o in list(self._snapshots):
                self._delete_snapshot(o)
            self._last_snap_offset = 0
            self._last_map_offset = start_offset

    # ------------------------------------------------------------------ the map

    @property
    def map_end_offset(self) -> int:
        with self._lock:
            return self._last_map_offset

    def update_map_end_offset(self, offset: int) -> None:
        with self._lock:
            self._last_map_offset = offset

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        with self._lock:
            return dict(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        with self._lock:
            return self._producers.get(producer_id)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._producers

    def check_batch(self, batch: ProducerBatch, verify_sequence: bool) -> BatchMetadata | None:
        """Check a batch against the producer's state before it is appended.

        Returns the metadata of the original batch when this one is a retry of
        one of the last five (the caller answers with those offsets and writes
        nothing); None when the batch may be appended. With ``verify_sequence``
        (a client's append to the leader) raises InvalidProducerEpochError for
        an epoch older than the producer's, and OutOfOrderSequenceError when the
        sequence does not follow on (a new epoch must start at 0). An unknown
        producer may start anywhere: its state may have gone with retention or
        DeleteRecords (Kafka >= 2.5, KIP-360). Without ``verify_sequence``
        (replication, recovery) nothing is refused.
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        with self._lock:
            entry = self._producers.get(pid)
            epoch = batch.producer_epoch
            first_seq = batch.base_sequence
            if entry is None:
                return None
            if verify_sequence and not batch.is_control:
                duplicate = entry.find_duplicate(epoch, first_seq, batch.last_sequence)
                if duplicate is not None:
                    return duplicate
            if epoch < entry.producer_epoch:
                message = (
                    f"producer {pid} epoch {epoch} at offset {batch.base_offset} is older "
                    f"than the last seen epoch {entry.producer_epoch}"
                )
                if verify_sequence:
                    raise InvalidProducerEpochError(message)
                _log.warning("%s in %s", message, self.log_dir)
                return None
            if not verify_sequence or batch.is_control:
                return None
            if entry.current_txn_first_offset is not None and not batch.is_transactional:
                # Kafka's ProducerAppendInfo.appendDataBatch: a plain batch
                # while the producer's transaction is open
                raise InvalidTxnStateError(
                    f"expected a transactional write from producer {pid} at offset "
                    f"{batch.base_offset}: its transaction opened at "
                    f"{entry.current_txn_first_offset} is still open"
                )
            if epoch != entry.producer_epoch:
                if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid} bumped its epoch from {entry.producer_epoch} to {epoch} "
                        f"but its batch at offset {batch.base_offset} starts at sequence "
                        f"{first_seq}, not 0"
                    )
            elif not _in_sequence(entry.last_seq, first_seq):
                raise OutOfOrderSequenceError(
                    f"out of order sequence for producer {pid} at offset {batch.base_offset}: "
                    f"{first_seq} does not follow the last sequence {entry.last_seq}"
                )
            return None

    def check_end_txn_marker(
        self, producer_id: int, epoch: int, coordinator_epoch: int, *, transaction_version: int = 0
    ) -> None:
        """Before the leader writes a COMMIT/ABORT marker for the coordinator
        (Kafka's AppendOrigin.COORDINATOR: no sequence to check): an epoch
        older than the producer's is INVALID_PRODUCER_EPOCH, a coordinator
        epoch older than the last marker's TRANSACTION_COORDINATOR_FENCED.

        A transactions-v2 marker (``transaction_version`` 2, WriteTxnMarkers
        v2, KIP-1228) carries the epoch the coordinator bumped at the end of
        the transaction, so it must be newer than the producer's; the same
        epoch passes only as a retry of a marker already written (no
        transaction open), as Kafka's ProducerAppendInfo checks since
        KAFKA-19999."""
        with self._lock:
            entry = self._producers.get(producer_id)
            if entry is None:
                return
            if transaction_version >= 2 and epoch == entry.producer_epoch:
                if entry.current_txn_first_offset is not None:
                    raise InvalidProducerEpochError(
                        f"transactions-v2 marker for producer {producer_id} has epoch {epoch}, "
                        f"not newer than the current epoch {entry.producer_epoch}"
                    )
            elif epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"marker for producer {producer_id} has epoch {epoch}, older than the "
                    f"last seen epoch {entry.producer_epoch}"
                )
            if coordinator_epoch < entry.coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"marker for producer {producer_id} comes from coordinator epoch "
                    f"{coordinator_epoch} (zombie); the current one is {entry.coordinator_epoch}"
                )

    def update(
        self,
        batch: ProducerBatch,
        append_time_ms: int = -1,
        *,
        coordinator_epoch: int | None = None,
        is_abort: bool = False,
    ) -> CompletedTxn | None:
        """Record an appended batch (after ``check_batch`` let it through).

        The producer's timestamp is the batch's max timestamp, or
        ``append_time_ms`` when the batch carries none. A control batch (a
        transaction marker; ``is_abort`` says which) closes the open
        transaction and returns it, with the LSO right after the marker;
        ``coordinator_epoch`` is the marker's, when the caller decoded it. A
        marker with no open transaction completes none (Kafka writes no index
        entry for an empty transaction).
        """
        pid = batch.producer_id
        if pid == NO_PRODUCER_ID:
            return None
        timestamp = batch.max_timestamp if batch.max_timestamp >= 0 else append_time_ms
        completed: CompletedTxn | None = None
        with self._lock:
            entry = self._producers.get(pid)
            if entry is None:
                entry = ProducerStateEntry(producer_id=pid)
                self._producers[pid] = entry
            entry._set_epoch(batch.producer_epoch)
            entry.last_timestamp = timestamp
            if batch.is_control:
                first = entry.current_txn_first_offset
                if first is not None:
                    completed = CompletedTxn(
                        pid,
                        first,
                        batch.base_offset,
                        is_abort,
                        self._last_stable_offset_after(pid, batch.base_offset),
                    )
                    if self._ongoing.get(first) == pid:
                        del self._ongoing[first]
                    self._unreplicated[first] = completed
                entry.current_txn_first_offset = None
                if coordinator_epoch is not None:
                    entry.coordinator_epoch = coordinator_epoch
            else:
                entry.batches.append(
                    BatchMetadata(
                        first_seq=batch.base_sequence,
                        last_seq=batch.last_sequence,
                        first_offset=batch.base_offset,
                        last_offset=batch.last_offset,
                        timestamp=timestamp,
                    )
                )
                if batch.is_transactional and entry.current_txn_first_offset is None:
                    entry.current_txn_first_offset = batch.base_offset
                    self._ongoing[batch.base_offset] = pid
            if batch.is_transactional:
                # A marker ends the transaction, a data batch opens it: either
                # way a verification still out no longer speaks for it.
                self._verifications.pop(pid, None)
            self._last_map_offset = max(self._last_map_offset, batch.last_offset + 1)
        return completed

    # ------------------------------------------------------------------ KIP-890 verification

    def has_ongoing_transaction(self, producer_id: int, epoch: int | None = None) -> bool:
        """Whether the producer's transaction is open here; with ``epoch``,
        opened at that epoch: under transactions v2 every transaction has
        its own epoch, so a batch of the next one is not part of an older
        one whose marker has not arrived yet (Kafka 4's check)."""
        with self._lock:
            entry = self._producers.get(producer_id)
            return (
                entry is not None
                and entry.current_txn_first_offset is not None
                and (epoch is None or entry.producer_epoch == epoch)
            )

    def maybe_create_verification_state_entry(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        """The producer's verification entry, made if it has none (a
        verification already out is shared: Kafka's
        maybeCreateVerificationStateEntry)."""
        with self._lock:
            entry = self._verifications.get(producer_id)
            if entry is None:
                entry = VerificationStateEntry(now_ms, sequence, epoch)
                self._verifications[producer_id] = entry
            else:
                entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
            return entry

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """The guard of the producer's verification; SENTINEL when none is out."""
        with self._lock:
            entry = self._verifications.get(producer_id)
            return SENTINEL if entry is None else entry.guard

    def clear_verification_state_entry(self, producer_id: int) -> None:
        with self._lock:
            self._verifications.pop(producer_id, None)

    def _last_stable_offset_after(self, producer_id: int, marker_offset: int) -> int:
        """Kafka's lastStableOffset(completedTxn): the first offset of the
        earliest other open transaction, else just past the marker."""
        others = [first for first, pid in self._ongoing.items() if pid != producer_id]
        return min(others) if others else marker_offset + 1

    # ------------------------------------------------------------------ the LSO

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open, or
        completed with its marker not yet below the HW; None when none is."""
        with self._lock:
            firsts = [*self._ongoing, *self._unreplicated]
            return min(firsts) if firsts else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker the HW passed stop bounding the LSO."""
        with self._lock:
            if self._unreplicated:
                done = [f for f, t in self._unreplicated.items() if t.last_offset < high_watermark]
                for f in done:
                    del self._unreplicated[f]

    def ongoing_transactions(self) -> dict[int, int]:
        """First offset -> producer id of every open transaction (a copy)."""
        with self._lock:
            return dict(self._ongoing)

    def load_entry(self, entry: ProducerStateEntry) -> None:
        """Put an entry as is (tests, and tools restoring state)."""
        with self._lock:
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                self._ongoing[entry.current_txn_first_offset] = entry.producer_id

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> list[int]:
        """Forget producers idle for ``producer_id_expiration_ms``; returns their ids."""
        with self._lock:
            expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
            for pid in expired:
                del self._producers[pid]
            # A verification never followed by an append (the producer went
            # away) goes after the same time (Kafka's removeExpiredProducers).
            stale = [
                pid
                for pid, v in self._verifications.items()
                if now_ms - v.timestamp_ms >= self.producer_id_expiration_ms
            ]
            for pid in stale:
                del self._verifications[pid]
            return expired

    def __repr__(self) -> str:
        return (
            f"ProducerStateManager({self.log_dir!r}, producers={len(self._producers)}, "
            f"map_end_offset={self._last_map_offset})"
        )
