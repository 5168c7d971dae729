"""The names of a partition directory's files, Kafka's layout exactly.

Every segment file is named by its base offset, zero-padded to 20 digits, plus
a type suffix (``.log``, ``.index``, ``.timeindex``, ``.snapshot``,
``.txnindex``) and, while in a transient state, a state suffix (``.deleted``,
``.cleaned``, ``.swap``). This module is the one place those names are made
and parsed; the segment, the loader and the cleaner all come here.
"""

from __future__ import annotations

import os

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"

# State suffixes, appended after the type suffix (``...0.log.deleted``).
DELETED_FILE_SUFFIX = ".deleted"  # scheduled for asynchronous deletion
CLEANED_FILE_SUFFIX = ".cleaned"  # first phase of a compaction swap
SWAP_FILE_SUFFIX = ".swap"  # second phase: replaces the segments it covers
DELETE_DIR_SUFFIX = "-delete"  # a whole partition directory awaiting deletion
FUTURE_DIR_SUFFIX = "-future"  # a replica being moved between log dirs
STRAY_DIR_SUFFIX = "-stray"

# Unknown offset / position markers shared with LogOffsetMetadata.
UNKNOWN_OFFSET = -1

_OFFSET_DIGITS = 20


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded decimal Kafka names a segment's files with."""
    if offset < 0:
        raise ValueError(f"segment base offset must not be negative, got {offset}")
    return f"{offset:0{_OFFSET_DIGITS}d}"


def _name(dir: str, offset: int, type_suffix: str, suffix: str) -> str:
    return os.path.join(dir, filename_prefix_from_offset(offset) + type_suffix + suffix)


def log_file_name(dir: str, offset: int, suffix: str = "") -> str:
    """``<dir>/<offset>.log<suffix>``."""
    return _name(dir, offset, LOG_FILE_SUFFIX, suffix)


def offset_index_file_name(dir: str, offset: int, suffix: str = "") -> str:
    """``<dir>/<offset>.index<suffix>``."""
    return _name(dir, offset, INDEX_FILE_SUFFIX, suffix)


def time_index_file_name(dir: str, offset: int, suffix: str = "") -> str:
    """``<dir>/<offset>.timeindex<suffix>``."""
    return _name(dir, offset, TIME_INDEX_FILE_SUFFIX, suffix)


def txn_index_file_name(dir: str, offset: int, suffix: str = "") -> str:
    """``<dir>/<offset>.txnindex<suffix>``: the segment's aborted transactions
    (``transaction_index.TransactionIndex``)."""
    return _name(dir, offset, TXN_INDEX_FILE_SUFFIX, suffix)


def producer_snapshot_file_name(dir: str, offset: int, suffix: str = "") -> str:
    """``<dir>/<offset>.snapshot<suffix>``."""
    return _name(dir, offset, PRODUCER_SNAPSHOT_FILE_SUFFIX, suffix)


def offset_from_file_name(name: str) -> int:
    """The base offset a segment file is named with (``.../00000000000000000042.log.swap`` → 42).

    Raises ValueError for a name that does not start with a decimal offset.
    """
    base = os.path.basename(name)
    prefix = base.split(".", 1)[0]
    if not prefix.isdigit():
        raise ValueError(f"{name!r} is not named by an offset")
    return int(prefix)


def strip_state_suffix(name: str) -> str:
    """``x.log.swap`` → ``x.log``; names without a state suffix are returned unchanged."""
    for suffix in (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def is_log_file(name: str) -> bool:
    return name.endswith(LOG_FILE_SUFFIX)


def is_index_file(name: str) -> bool:
    """True for an offset, time or transaction index (without a state suffix)."""
    return name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX))
