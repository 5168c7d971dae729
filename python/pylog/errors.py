"""Every error pylog raises, each carrying the Kafka error code it answers with.

The native extension raises these classes too (it resolves them once, when
it is imported), so this module is the
single place where a failure meets its wire-level code. Codes and names are
Kafka's (see the protocol's ``ErrorCodes``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class ErrorCode(enum.IntEnum):
    """Kafka's error codes as the protocol carries them (the ones pylog answers)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    # The ZooKeeper controller's answers to a Kafka 3.x broker's AlterPartition
    # and AllocateProducerIds (the mixed cluster, docs/migration.md).
    OPERATION_NOT_ATTEMPTED = 55
    INVALID_UPDATE_VERSION = 95
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    # KIP-848's consumer groups.
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    # KIP-714's client telemetry.
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    # KIP-932's share groups.
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_REGULAR_EXPRESSION = 128


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


class RecordErrorsMixin(Exception):
    """A batch refused for some of its records (KIP-467): ``record_errors``
    holds (index in the batch, why) of each, which the Produce response names
    so a client fails those records and not the others for themselves."""

    def __init__(self, message: str = "", record_errors: Sequence[tuple[int, str]] = ()) -> None:
        super().__init__(message)
        self.record_errors: list[tuple[int, str]] = list(record_errors)


class InvalidTimestampError(RecordErrorsMixin, KafkaError):
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


class InvalidTxnStateError(KafkaError):
    code, error_name = 48, "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(KafkaError):
    """A transaction marker from a coordinator epoch older than the partition
    has seen for that producer (a zombie coordinator)."""

    code, error_name = 52, "TRANSACTION_COORDINATOR_FENCED"


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


class UnknownTopicOrPartitionError(KafkaError):
    code, error_name, retriable = 3, "UNKNOWN_TOPIC_OR_PARTITION", True


class NotLeaderOrFollowerError(KafkaError):
    code, error_name, retriable = 6, "NOT_LEADER_OR_FOLLOWER", True


class RequestTimedOutError(KafkaError):
    code, error_name, retriable = 7, "REQUEST_TIMED_OUT", True


class InvalidTopicError(KafkaError):
    code, error_name = 17, "INVALID_TOPIC_EXCEPTION"


class NotEnoughReplicasError(KafkaError):
    code, error_name, retriable = 19, "NOT_ENOUGH_REPLICAS", True


class InvalidRequiredAcksError(KafkaError):
    code, error_name = 21, "INVALID_REQUIRED_ACKS"


class UnsupportedSaslMechanismError(KafkaError):
    code, error_name = 33, "UNSUPPORTED_SASL_MECHANISM"


class UnsupportedVersionError(KafkaError):
    code, error_name = 35, "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(KafkaError):
    code, error_name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(KafkaError):
    code, error_name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaError):
    code, error_name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(KafkaError):
    code, error_name = 39, "INVALID_REPLICA_ASSIGNMENT"


class PolicyViolationError(KafkaError):
    code, error_name = 44, "POLICY_VIOLATION"


class ThrottlingQuotaExceededError(KafkaError):
    """KIP-599: a topic or partition mutation over the client's
    ``controller_mutation_rate``; ``throttle_time_ms`` says how long until
    the quota has room again."""

    code, error_name, retriable = 89, "THROTTLING_QUOTA_EXCEEDED", True

    def __init__(self, throttle_time_ms: int) -> None:
        # Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message.
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_time_ms = throttle_time_ms


class ReassignmentInProgressError(KafkaError):
    code, error_name = 60, "REASSIGNMENT_IN_PROGRESS"


class UnknownTopicIdError(KafkaError):
    code, error_name, retriable = 100, "UNKNOWN_TOPIC_ID", True


class CloseConnection(Exception):
    """Not a Kafka error: the request cannot be answered (malformed frame,
    unsupported version), so the network layer closes the connection as Kafka does."""


class InvalidRecordError(RecordErrorsMixin, KafkaError):
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
