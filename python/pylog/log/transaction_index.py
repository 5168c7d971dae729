"""TransactionIndex: a segment's ``.txnindex``, the aborted transactions it ends.

Kafka's ``TransactionIndex`` and ``AbortedTxn``: one fixed 34-byte entry per
transaction whose ABORT marker lies in the segment, appended in marker order::

    version            i16   = 0
    producer_id        i64
    first_offset       i64   the transaction's first data offset (maybe in an older segment)
    last_offset        i64   the ABORT marker's offset
    last_stable_offset i64   the LSO right after the marker was appended

All big-endian. A read_committed Fetch lists, from these entries, the
aborted transactions overlapping what it returns (Kafka's
``collectAbortedTxns``); the consumer drops those producers' records. The
file is created by the first entry, as Kafka's is, so most segments have
none. Entries are few (one per aborted transaction), so the index keeps them
in memory once read; the file is the durable copy, fsynced with the segment.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from pylog.errors import CorruptIndexError, KafkaStorageError

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TransactionIndex", "decode_aborted_txns"]

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = _VERSION

    def encode(self) -> bytes:
        return _ENTRY.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


def decode_aborted_txns(data: bytes, path: str = "<txnindex>") -> list[AbortedTxn]:
    """Every entry of a ``.txnindex`` file's bytes; CorruptIndexError when the
    size is not a whole number of entries or an entry has an unknown version."""
    if len(data) % ABORTED_TXN_SIZE:
        raise CorruptIndexError(
            f"transaction index {path} has {len(data)} bytes, not a multiple of {ABORTED_TXN_SIZE}"
        )
    out: list[AbortedTxn] = []
    for pos in range(0, len(data), ABORTED_TXN_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != _VERSION:
            raise CorruptIndexError(
                f"transaction index {path}: entry at position {pos} has version {version}"
            )
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def _last_offset(t: AbortedTxn) -> int:
    return t.last_offset


class TransactionIndex:
    """The ``.txnindex`` of the segment based at ``start_offset``.

    Not thread-safe on its own: the Log's lock guards it, as it guards the
    segment. The path changes with the segment's state suffix (``rename_to``).
    """

    __slots__ = ("_dirty", "_entries", "path", "start_offset")

    def __init__(self, start_offset: int, path: str) -> None:
        self.start_offset = start_offset
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False

    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            except OSError as e:
                raise KafkaStorageError(f"reading {self.path}: {e.strerror or e}", e.errno) from e
            entries = decode_aborted_txns(data, self.path)
            self._entries = entries
        return entries

    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (a copy)."""
        return list(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its last offset must pass every earlier one's (markers
        are appended in offset order), as Kafka's TransactionIndex checks."""
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow the last "
                f"one of {self.path}, ending at {entries[-1].last_offset}"
            )
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, txn.encode())
            finally:
                os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"appending to {self.path}: {e.strerror or e}", e.errno) from e
        entries.append(txn)
        self._dirty = True

    def append_all(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            self.append(t)

    def flush(self) -> None:
        """fsync the file if an entry was added since the last flush."""
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise KafkaStorageError(f"flushing {self.path}: {e.strerror or e}", e.errno) from e
        self._dirty = False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions aborted at ``offset`` or later (the
        segment was cut there)."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._rewrite(keep)

    def reset(self) -> None:
        """Drop every entry (recovery rebuilds them) and the file."""
        self._entries = []
        self._dirty = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise KafkaStorageError(f"deleting {self.path}: {e.strerror or e}", e.errno) from e

    def _rewrite(self, keep: list[AbortedTxn]) -> None:
        if not keep:
            self.reset()
            return
        try:
            with open(self.path, "r+b") as f:
                f.truncate(len(keep) * ABORTED_TXN_SIZE)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise KafkaStorageError(f"truncating {self.path}: {e.strerror or e}", e.errno) from e
        self._entries = keep

    def rename_to(self, path: str) -> None:
        """The segment's files were renamed (``.deleted``, ``.swap``…): follow."""
        self.path = path

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound_offset)``, and
        whether the search is complete (Kafka's TxnIndexSearchResult): an
        entry whose LSO passes the upper bound means no later segment can hold
        a transaction that started before the bound."""
        found: list[AbortedTxn] = []
        entries = self._load()
        # Entries are in marker order; one ending before the fetch offset has
        # an LSO at most one past its marker, so it can neither match nor
        # end the search: start at the first that ends at or after it.
        start = bisect.bisect_left(entries, fetch_offset, key=_last_offset)
        for t in itertools.islice(entries, start, None):
            if t.first_offset < upper_bound_offset:
                found.append(t)
            if t.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def sanity_check(self) -> None:
        """CorruptIndexError when an entry ends before the segment starts."""
        for t in self._load():
            if t.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"transaction index {self.path}: aborted transaction {t} ends before the "
                    f"segment's base offset {self.start_offset}"
                )
