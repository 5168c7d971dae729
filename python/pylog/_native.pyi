"""Types of ``pylog._native``, the Rust core behind PyO3.

The extension holds no broker policy: it is given bytes, paths, offsets and
limits, and returns results or raises an exception from ``pylog.errors``
(CorruptRecordError, InvalidRecordError, MessageTooLargeError,
InvalidTimestampError, UnsupportedCompressionTypeError, InvalidOffsetError,
IndexOffsetOverflowError, CorruptIndexError, KafkaStorageError).
Every call that touches more than a few KB releases the GIL.
"""

from collections.abc import Sequence
from typing import final

from typing_extensions import Self

_Bytes = bytes | bytearray | memoryview

__version__: str

def crc32c(data: _Bytes) -> int:
    """CRC32C (Castagnoli) of ``data``."""

# Compression codecs as stored in the batch attributes (bits 0-2).
COMPRESSION_NONE: int  # 0
COMPRESSION_GZIP: int  # 1
COMPRESSION_SNAPPY: int  # 2 (Kafka's xerial framing on write; raw snappy also read)
COMPRESSION_LZ4: int  # 3 (LZ4 frame format)
COMPRESSION_ZSTD: int  # 4
# The most bytes one batch's records decompress to in any native reader,
# whatever limit is passed (256 MiB); past the limit: MessageTooLargeError.
MAX_DECOMPRESSED_SIZE: int

TIMESTAMP_TYPE_CREATE_TIME: int  # 0
TIMESTAMP_TYPE_LOG_APPEND_TIME: int  # 1

# ---------------------------------------------------------------- record batches

@final
class BatchInfo:
    """The header facts of one batch (v2, or a legacy v0/v1 message/wrapper)."""

    position: int  # byte position of the batch in the buffer or file scanned
    size: int  # whole batch in bytes, 12-byte framing included
    magic: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int  # -1 for legacy
    crc: int
    compression: int
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    base_timestamp: int  # -1 for legacy v0
    max_timestamp: int
    producer_id: int  # -1 when not idempotent
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    records_count: int
    delete_horizon_ms: int  # KIP-534: the base timestamp when the batch holds one, else -1

@final
class AppendInfo:
    """Everything the broker needs from validating (and assigning) a record set, in one pass."""

    first_offset: int  # base offset of the first batch
    last_offset: int
    max_timestamp: int  # -1 if no record carries one
    offset_of_max_timestamp: int
    num_records: int
    num_batches: int
    valid_bytes: int  # bytes of the validated batches
    source_magic: int  # magic of the first batch
    source_compression: int  # codec of the first batch
    producer_id: int  # of the first batch; -1 when not idempotent
    producer_epoch: int
    first_sequence: int  # base sequence of the first batch
    last_sequence: int  # last sequence of the last batch
    is_transactional: bool
    is_control: bool
    batches: list[BatchInfo]

def analyze_records(
    records: _Bytes,
    *,
    max_batch_size: int,
    deep: bool = False,
    max_decompressed_size: int | None = None,
) -> AppendInfo:
    """Validate every v2 batch of ``records`` without changing a byte (follower appends).

    Checks each header, batch length against the buffer, CRC32C, records count
    against last offset delta (count <= delta + 1: compaction may remove records),
    and for uncompressed batches the varint framing of every record. With
    ``deep=True`` compressed batches are decompressed (streaming, at most
    ``max_decompressed_size`` bytes each; None: ``MAX_DECOMPRESSED_SIZE``) and
    their records framed too. Raises CorruptRecordError (position set) or
    MessageTooLargeError.
    """

def validate_and_assign_offsets(
    records: bytearray | memoryview,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    now_ms: int,
    log_append_time: bool,
    max_batch_size: int,
    timestamp_before_max_ms: int,
    timestamp_after_max_ms: int,
    require_keys: bool,
    max_decompressed_size: int | None = None,
) -> AppendInfo:
    """The leader append: validate v2 ``records`` (a writable buffer) and rewrite
    them in place with consecutive offsets from ``base_offset``, the partition
    leader epoch, and under LogAppendTime the max timestamp ``now_ms`` and the
    timestamp-type bit; the CRC is recomputed without copying records.

    Client rules as Kafka applies them: records count == last offset delta + 1,
    record offset deltas 0..n-1, no control batches, producer id with a
    sequence; record timestamps within ``[now - before_max, now + after_max]``
    (CreateTime); keys present when ``require_keys``. Every record of a
    compressed batch is read (streaming, never held whole): a stream that does
    not decode, records that do not frame or whose number is not the header's
    count are CorruptRecordError; records decompressing past
    ``max_decompressed_size`` bytes (None: ``MAX_DECOMPRESSED_SIZE``) are
    MessageTooLargeError. More than one batch in a compressed set is
    INVALID_RECORD. Nothing is modified if anything fails.
    """

def convert_legacy_to_v2(records: _Bytes, *, max_decompressed_size: int | None = None) -> bytearray:
    """Validate a legacy magic 0/1 message set (CRC32 of every message, wrapper
    and inner) and return the same records as v2 batches (one per wrapper or
    run of uncompressed messages, same codec), ready for
    ``validate_and_assign_offsets``. Each wrapper decompresses to at most
    ``max_decompressed_size`` bytes (None: ``MAX_DECOMPRESSED_SIZE``).
    Raises CorruptRecordError or MessageTooLargeError."""

def compress(codec: int, data: _Bytes) -> bytes: ...
def decompress(codec: int, data: _Bytes, *, max_size: int | None = None) -> bytes:
    """``data`` decompressed; more than ``max_size`` bytes (None:
    ``MAX_DECOMPRESSED_SIZE``) is MessageTooLargeError."""

@final
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    sequence: int  # -1 when the batch has no producer id

def recompress_batches(
    records: _Bytes,
    codec: int,
    *,
    max_batch_size: int,
    max_decompressed_size: int | None = None,
) -> bytearray | None:
    """The batches of ``records`` rebuilt with ``codec`` (a topic's
    compression.type), one batch out per batch in, or None when every batch
    uses ``codec`` already. Checked first as ``analyze_records(deep=True)``
    does (CorruptRecordError; MessageTooLargeError for a batch too big or
    records past ``max_decompressed_size``). Producer id/epoch, base sequence,
    transactional flag, timestamp type and every record's key, value, headers
    and timestamp are kept; offset deltas become 0..n-1. A batch the validator
    refuses at its header (control, LogAppendTime, base offset not 0...) and
    bytes after the last whole batch are left as they are."""

def decode_records(batch: _Bytes) -> list[Record]:
    """All records of the single v2 (or legacy) batch at the start of ``batch``,
    decompressed; absolute offsets and timestamps. For tools and tests."""

def batch_infos(data: _Bytes, max_batches: int = ...) -> tuple[list[BatchInfo], int]:
    """The header facts of the whole batches at the start of ``data`` (v2, or
    legacy v0/v1 messages; at most ``max_batches``), and the bytes they cover:
    a partial batch at the end (a fetch cut it short) ends the walk quietly.
    No CRC is checked. A whole batch that cannot be one (shorter than its
    header, unknown magic, negative length) is CorruptRecordError with its
    position."""

def complete_batches_size(data: _Bytes) -> int:
    """Bytes of the whole batches at the start of ``data``, by their length
    fields alone (where a fetched buffer's partial last batch starts)."""

def decode_batches(data: _Bytes) -> tuple[list[tuple[BatchInfo, list[Record]]], int]:
    """Every whole batch at the start of ``data`` with its records (CRC
    checked, decompressed within ``MAX_DECOMPRESSED_SIZE``; absolute offsets
    and timestamps), and the bytes they cover; a partial last batch is left.
    One call per buffer (loading ``__consumer_offsets``, tools).
    CorruptRecordError names the position of a batch that does not decode."""

def build_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    *,
    base_offset: int = 0,
    compression: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = 0,
) -> bytes:
    """Build one v2 batch from (key, value, headers, timestamp_ms) tuples."""

# ---------------------------------------------------------------- indexes

class _MmapIndex:
    """What both memory-mapped segment indexes share (one core type, generic
    over the entry layout). Not a runtime class: the stubs' way of writing the
    shared methods once.

    A new file is preallocated to ``max_index_size`` (rounded down to a whole
    entry); an existing one is mapped and its entries counted up to the first
    all-zero entry after entry 0 (the unused preallocated tail). Lookups search
    the warm section (the last 8192 bytes) first.
    """

    def __new__(
        cls, path: str, base_offset: int, max_index_size: int, writable: bool = True
    ) -> Self: ...
    @property
    def path(self) -> str: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def entries(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def size_in_bytes(self) -> int:
        """entries * the entry size."""
    def is_full(self) -> bool: ...
    def entry(self, n: int) -> tuple[int, int]:
        """Entry n, decoded as ``lookup`` answers; IndexError out of range."""
    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= ``offset``."""
    def truncate(self) -> None:
        """Drop every entry."""
    def resize(self, new_size: int) -> bool:
        """Set the file length (rounded down to a whole entry) and remap; False if unchanged."""
    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly ``size_in_bytes`` (on roll and close)."""
    def flush(self) -> None: ...
    def sanity_check(self) -> None:
        """CorruptIndexError unless the file length is whole entries, every relative
        offset fits an i32, and each entry may follow the one before (see the class)."""
    def rename_to(self, path: str) -> None:
        """Rename the file (e.g. to ``.deleted``), keeping it mapped."""
    def close(self) -> None:
        """Trim to valid size and unmap. Further calls raise KafkaStorageError."""

@final
class OffsetIndex(_MmapIndex):
    """A segment's ``.index``: 8-byte entries (relative offset u32, position u32).
    Entries increase strictly in offset and do not decrease in position."""

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or base_offset when empty."""
    def append(self, offset: int, position: int) -> None:
        """InvalidOffsetError unless offset > the last entry's offset and position does
        not go back, or when the index is full; IndexOffsetOverflowError when
        offset - base_offset does not fit in an i32 (Kafka's rule)."""
    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= target;
        (base_offset, 0) when none."""

@final
class TimeIndex(_MmapIndex):
    """A segment's ``.timeindex``: 12-byte entries (timestamp i64, relative offset u32).
    Timestamps increase strictly; offsets do not decrease."""

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append when ``timestamp`` > the last entry's timestamp (equal: skipped);
        InvalidOffsetError if the timestamp goes back or the offset does not grow."""
    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the greatest entry with timestamp <= target;
        (-1, base_offset) when none."""

# ---------------------------------------------------------------- segments

@final
class ScanResult:
    """What a segment scan or recovery found."""

    valid_bytes: int  # bytes of valid batches from start_position; the caller truncates here
    batches: int
    last_offset: int  # -1 when no batch
    max_timestamp: int
    offset_of_max_timestamp: int
    error: str | None  # why the batch at error_position is invalid; None when clean
    error_position: int | None
    producer_batches: list[BatchInfo]  # batches with producer_id >= 0, in file order
    epochs: list[tuple[int, int]]  # (partition_leader_epoch, base_offset) at each epoch change

def recover_segment(
    log_path: str,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    *,
    index_interval_bytes: int,
    max_batch_size: int,
) -> ScanResult:
    """Kafka's LogSegment.recover: truncate both indexes, validate every batch
    from position 0 (v2 fully; legacy by CRC32), add an index entry after each
    ``index_interval_bytes`` of batches, stop at the first invalid or torn batch.
    The file is not modified: the caller truncates it to ``valid_bytes``."""

def scan_segment(
    log_path: str,
    *,
    start_position: int = 0,
    end_position: int | None = None,
    deep: bool = False,
    max_batch_size: int,
) -> ScanResult:
    """Validate without touching indexes (dump-log --verify, consistency checks)."""

def read_batch_infos(
    log_path: str, start_position: int = 0, max_batches: int = 1000, end_position: int | None = None
) -> tuple[list[BatchInfo], int]:
    """Up to ``max_batches`` batch headers from ``start_position`` (no CRC check;
    stops quietly at a torn tail); returns them and the next position."""

def translate_offset(
    log_path: str, target_offset: int, start_position: int, end_position: int
) -> tuple[int, int, int] | None:
    """Kafka's searchForOffsetWithSize: the first batch at or after
    ``start_position`` (and before ``end_position``) whose last offset >= target:
    (last_offset, position, size); None if there is none."""

def translate_offset_fd(
    fd: int, target_offset: int, start_position: int, end_position: int
) -> tuple[int, int, int] | None:
    """``translate_offset`` in an open segment file's descriptor (kept open by
    the caller for the call)."""

def find_offset_by_timestamp(
    log_path: str, target_timestamp: int, start_position: int, end_position: int
) -> tuple[int, int] | None:
    """Kafka's searchForTimestamp: the first record at or after ``start_position``
    with timestamp >= target, as (timestamp, offset); None if there is none."""

def read_offset_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """The (offset, position) entries of an offset index file, read (never
    mapped: a live broker may trim the file meanwhile), counted as
    ``OffsetIndex`` counts them and checked as its ``sanity_check`` does
    (CorruptIndexError)."""

def read_time_index(path: str, base_offset: int) -> list[tuple[int, int]]:
    """The (timestamp, offset) entries of a time index file, read as
    ``read_offset_index`` reads."""

# ---------------------------------------------------------------- timing wheel

@final
class TimingWheel:
    """The purgatory's hierarchical timing wheel: ids with deadlines in ms.

    Level 0 has ``wheel_size`` buckets of ``tick_ms``; a deadline beyond a
    level's span goes to an overflow level (tick = the span below), made on
    demand. ``add`` and ``cancel`` are O(1); ``advance`` flushes the buckets the
    clock reaches, in time order, expiring level-0 entries and moving higher
    ones down. The wheel has no clock: times are the caller's, in ms. Ids are
    any int64; ids numbered from a counter (as the purgatory's) are the fast
    case, found by direct indexing rather than hashing."""

    def __new__(cls, tick_ms: int = 1, wheel_size: int = 20, *, start_ms: int) -> TimingWheel:
        """ValueError unless tick_ms >= 1, wheel_size >= 2 and start_ms >= 0."""

    @property
    def tick_ms(self) -> int: ...
    @property
    def wheel_size(self) -> int: ...
    @property
    def current_ms(self) -> int:
        """The start of the current tick (the last advance, or start_ms)."""

    @property
    def levels(self) -> int:
        """Levels made so far (1 + overflow wheels)."""

    def add(self, id: int, expiration_ms: int) -> bool:
        """Schedules ``id`` (an int64) to expire at ``expiration_ms``; a pending
        id is rescheduled. False, keeping nothing, when the deadline is in the
        current tick or before: the caller completes the operation now."""

    def cancel(self, id: int) -> bool:
        """Drops ``id``'s deadline; False when it is not pending."""

    def add_many(self, ids: Sequence[int], expirations_ms: Sequence[int]) -> list[int]:
        """``add`` for each (id, deadline) pair, in order, in one call; returns
        the ids refused (deadline already reached), usually ``[]``. ValueError
        when the sequences differ in length."""

    def cancel_many(self, ids: Sequence[int]) -> int:
        """``cancel`` for each id, in order, in one call (the lookups of later
        ids are prefetched); returns how many were pending."""

    def advance(self, now_ms: int) -> list[int]:
        """Moves the clock to ``now_ms`` and returns the ids whose deadlines it
        reached, in deadline order (ties in no set order). An earlier time is a
        no-op."""

    def next_expiration_ms(self) -> int | None:
        """When the next bucket is due (no entry expires earlier; a reaper may
        sleep until then and advance); None when nothing is pending. Above
        level 0 that advance may only move entries down."""

    def __len__(self) -> int: ...
    def __contains__(self, key: int, /) -> bool: ...

# --------------------------------------------------------------- log compaction

@final
class OffsetMap:
    """The cleaner's map of key hash (XXH3-128) → latest offset, in ``memory``
    bytes fixed at creation (24 per slot), full at ``load_factor`` of its slots."""

    def __new__(cls, memory: int, load_factor: float) -> OffsetMap: ...
    def put(self, key: bytes, offset: int) -> bool:
        """Record ``offset`` as ``key``'s latest; False when the key is new and the map full."""
    def get(self, key: bytes) -> int:
        """``key``'s latest offset, -1 when absent."""
    def clear(self) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def max_entries(self) -> int: ...
    @property
    def latest_offset(self) -> int:
        """The offset of the last ``put`` since the last clear, -1 when none."""
    @property
    def utilization(self) -> float: ...
    @property
    def collision_rate(self) -> float: ...
    @property
    def memory(self) -> int: ...
    @property
    def is_full(self) -> bool: ...

def build_offset_map(
    map: OffsetMap,
    buf: _Bytes,
    start_offset: int,
    end_offset: int,
    position: int = 0,
    *,
    max_decompressed_size: int | None = None,
) -> tuple[int, int, bool, bool, int]:
    """Map the keys of the records in ``buf`` (whole batches read at
    ``position`` of a segment) with offsets in ``[start_offset, end_offset)``.
    Returns (bytes consumed, size of the batch cut at the buffer's end or 0,
    map full, reached ``end_offset``, records mapped)."""

def clean_batches(
    map: OffsetMap,
    buf: _Bytes,
    *,
    now_ms: int,
    delete_retention_ms: int,
    active_producers: dict[int, int],
    position: int = 0,
    max_decompressed_size: int | None = None,
) -> tuple[int, int, bytes, list[BatchInfo], int, int]:
    """Compact the batches in ``buf``: keep each key's latest record (a
    tombstone until its batch's delete horizon, KIP-534, which the first
    clean keeping it writes as ``now_ms + delete_retention_ms``), an active
    producer's last batch at least
    as an empty header, uncompressed (``active_producers``: id → last data
    offset); an empty batch with codec bits (older cleaners') is rewritten
    uncompressed. A batch decompresses to at most ``max_decompressed_size``
    bytes (None: ``MAX_DECOMPRESSED_SIZE``). Returns
    (bytes consumed, size of a cut batch or 0, retained batches, their infos
    with positions in them, records read, records kept)."""

# --- columnar reads (pylog.spark) ---------------------------------------------------------
# A binary column: (validity bitmap, int32 offsets, data, null count), Arrow's layout.
_BinaryColumn = tuple[bytes, bytes, bytes, int]
# (rows, int64 offsets, int64 timestamps in µs, int32 timestamp types, key, value,
#  headers: None or (int32 list offsets, header keys, header values)).
_Columns = tuple[
    int, bytes, bytes, bytes, _BinaryColumn, _BinaryColumn,
    tuple[bytes, _BinaryColumn, _BinaryColumn] | None,
]  # fmt: skip

def read_segment_columns(
    log_path: str,
    start_position: int,
    end_position: int | None,
    start_offset: int,
    end_offset: int,
    *,
    include_headers: bool = False,
    max_records: int = 65536,
    window: int = 8388608,
) -> tuple[_Columns, int, int, bool]: ...
def decode_columns(
    data: _Bytes,
    start_offset: int,
    end_offset: int,
    *,
    include_headers: bool = False,
    max_records: int = ...,
) -> tuple[_Columns, int, int, bool]: ...
def index_floor_position(index_path: str, base_offset: int, target_offset: int) -> int: ...
def index_entry_offsets(index_path: str, base_offset: int) -> list[int]: ...
def check_batches(data: _Bytes) -> tuple[str, int] | None: ...
