"""Every error pylog raises, each carrying the Kafka error code it answers with.

The native extension raises these classes too (by name), so this module is the
single place where a failure meets its wire-level code. Codes and names are
Kafka's (see the protocol's ``ErrorCodes``).
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of pylog's errors. ``code``/``error_name`` are what a client receives."""

    code: int = -1
    error_name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False


class OffsetOutOfRangeError(KafkaError):
    code, error_name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(KafkaError):
    """Bytes that do not frame or checksum as a record batch."""

    code, error_name, retriable = 2, "CORRUPT_MESSAGE", True

    def __init__(self, message: str, position: int | None = None, file: str | None = None):
        super().__init__(message)
        self.position = position
        self.file = file

    def __str__(self) -> str:
        base = super().__str__()
        return f"{self.file}: {base}" if self.file else base


class MessageTooLargeError(KafkaError):
    code, error_name = 10, "MESSAGE_TOO_LARGE"


class RecordListTooLargeError(KafkaError):
    code, error_name = 18, "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(KafkaError):
    code, error_name = 32, "INVALID_TIMESTAMP"


class InvalidConfigurationError(KafkaError, ValueError):
    """A config value that fails validation; the message names key and value."""

    code, error_name = 40, "INVALID_CONFIG"


class InvalidRequestError(KafkaError):
    code, error_name = 42, "INVALID_REQUEST"


class OutOfOrderSequenceError(KafkaError):
    code, error_name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceError(KafkaError):
    code, error_name = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(KafkaError):
    code, error_name = 47, "INVALID_PRODUCER_EPOCH"


class KafkaStorageError(KafkaError):
    """The disk failed us (full, gone, permission); wraps the OS error number."""

    code, error_name, retriable = 56, "KAFKA_STORAGE_ERROR", True

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


class UnknownProducerIdError(KafkaError):
    code, error_name = 59, "UNKNOWN_PRODUCER_ID"


class UnsupportedCompressionTypeError(KafkaError):
    code, error_name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(KafkaError):
    """A well-formed batch the broker refuses (e.g. a keyless record on a compacted topic)."""

    code, error_name = 87, "INVALID_RECORD"


# --- storage-internal conditions (answered as UNKNOWN_SERVER_ERROR if they ever escape) ---


class InvalidOffsetError(KafkaError):
    """An index append that would break the index's monotonic order."""


class UnexpectedAppendOffsetError(InvalidOffsetError):
    """A follower append whose first offset is below the log end offset (or whose
    offsets go backwards); carries the offsets so a fetcher can resolve it."""

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class IndexOffsetOverflowError(KafkaError):
    """An offset too far from its segment's base to fit a 32-bit relative offset."""


class CorruptIndexError(KafkaError):
    """An index file failing its sanity check; it is rebuilt from the log."""


class LogDirLockedError(KafkaStorageError):
    """Another live process holds the log directory's ``.lock``."""


class LogSegmentOffsetOverflowError(KafkaError):
    """A segment holding offsets too far from its base; it must be split."""
