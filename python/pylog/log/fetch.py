"""What a read of the log returns: where it started and the slice it found.

The slice itself is a :class:`pylog.records.FileRecords` (a byte range of one
segment file, sent with ``os.sendfile``); this module adds the log's side of a
read, Kafka's ``FetchDataInfo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pylog.log.offset_metadata import LogOffsetMetadata
from pylog.records import EMPTY_RECORDS, FileRecords

if TYPE_CHECKING:
    from pylog.log.transaction_index import AbortedTxn


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Where a read started and what it found.

    ``first_entry_incomplete`` is set when the first batch at the fetch offset
    is larger than ``max_size`` allowed and ``min_one_message`` was off: the
    slice then holds a partial batch, which a consumer recognises and answers
    by raising its fetch size. ``aborted_transactions`` is set by a
    read_committed read: the aborted transactions overlapping the range.
    """

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRecords = EMPTY_RECORDS
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def is_empty(self) -> bool:
        return self.records.size == 0
