"""The coordinators' records as ``kafka-dump-log`` prints them with
``--offsets-decoder`` (``__consumer_offsets``) and ``--transaction-log-decoder``
(``__transaction_state``): Kafka 4.3's DumpLogSegments (its
CoordinatorRecordMessageParser, OffsetsMessageParser and
TransactionLogMessageParser).

A key prints as ``{"type":"<record type>","data":{...}}``, a value as
``{"version":"<value version>","data":{...}}``, a tombstone as ``<DELETE>``.
``data`` holds the record schema's fields in the schema's order, named as
Kafka's generated JSON converters name them (the field name with its first
letter lower-cased), at the version the bytes carry: nullable strings and
structs as ``null``, bytes in base64, topic ids as Kafka prints a Uuid
(URL-safe base64, unpadded). A tagged field is printed only when it is not
its default (a nullable array or struct also when it is null), as the
generated converters do. A classic group's member subscription and assignment
(protocol type ``consumer``) print decoded as ConsumerProtocolSubscription /
ConsumerProtocolAssignment, their bytes when they do not decode.

The schemas are the records pylog writes (pylog.coordinator.records,
consumer_group_records, share_group; pylog.transaction.transaction_log) and
the ones Kafka's files may hold beside them, described here field by field.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

from pylog.coordinator.records import GROUP_METADATA_KEY_VERSION
from pylog.transaction.transaction_log import TXN_KEY_VERSION

__all__ = ["MessageParser", "offsets_message_parser", "transaction_log_message_parser"]

JsonValue: TypeAlias = bool | int | str | list["JsonValue"] | dict[str, "JsonValue"] | None

_ANY = 1 << 15  # a version range with no upper end


@dataclass(frozen=True)
class Field:
    """One field of a record schema. ``kind``: int8|int16|int32|int64|string|
    bytes|uuid, ``[]`` + one of those for an array, or ``struct`` /
    ``[]struct`` with ``fields``. ``versions``: (first, last) it is in;
    ``nullable``: the first version where it may be null; ``tag``: its tag
    when it is a tagged field (then ``versions`` are its tagged versions)."""

    name: str
    kind: str
    versions: tuple[int, int] = (0, _ANY)
    nullable: int | None = None
    tag: int | None = None
    default: int | None = None
    fields: tuple[Field, ...] = ()

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def may_be_null(self, version: int) -> bool:
        return self.nullable is not None and version >= self.nullable


@dataclass(frozen=True)
class Schema:
    name: str
    fields: tuple[Field, ...]
    versions: tuple[int, int] = (0, 0)
    flexible: int | None = None  # the first flexible version


def F(
    name: str,
    kind: str,
    versions: tuple[int, int] = (0, _ANY),
    *,
    nullable: int | None = None,
    tag: int | None = None,
    default: int | None = None,
    fields: tuple[Field, ...] = (),
) -> Field:
    return Field(name, kind, versions, nullable, tag, default, fields)


# ---------------------------------------------------------------- the schemas

_TOPIC_PARTITIONS = (F("topicId", "uuid"), F("partitions", "[]int32"))


def _key(name: str, *fields: str) -> Schema:
    return Schema(name, tuple(F(f, "string") for f in fields))


TRANSACTION_LOG_KEYS = {TXN_KEY_VERSION: _key("TransactionLogKey", "transactionalId")}
TRANSACTION_LOG_VALUES = {
    TXN_KEY_VERSION: Schema(
        "TransactionLogValue",
        (
            F("producerId", "int64"),
            F("previousProducerId", "int64", (1, _ANY), tag=0, default=-1),
            F("nextProducerId", "int64", (1, _ANY), tag=1, default=-1),
            F("producerEpoch", "int16"),
            F("nextProducerEpoch", "int16", (1, _ANY), tag=3, default=-1),
            F("transactionTimeoutMs", "int32"),
            F("transactionStatus", "int8"),
            F(
                "transactionPartitions",
                "[]struct",
                nullable=0,
                fields=(F("topic", "string"), F("partitionIds", "[]int32")),
            ),
            F("transactionLastUpdateTimestampMs", "int64"),
            F("transactionStartTimestampMs", "int64"),
            F("clientTransactionVersion", "int16", (1, _ANY), tag=2, default=0),
        ),
        versions=(0, 1),
        flexible=1,
    )
}

_OFFSET_KEY = ("group", "topic", "partition")
_MEMBER_METADATA = (
    F("memberId", "string"),
    F("groupInstanceId", "string", (3, _ANY), nullable=3),
    F("clientId", "string"),
    F("clientHost", "string"),
    F("rebalanceTimeout", "int32", (1, _ANY)),
    F("sessionTimeout", "int32"),
    F("subscription", "bytes"),
    F("assignment", "bytes"),
)
_CURRENT_ASSIGNMENT = (
    *_TOPIC_PARTITIONS,
    F("assignmentEpochs", "[]int32", nullable=0, tag=0),
)
_TOPIC_INFO = (F("topicId", "uuid"), F("topicName", "string"))

OFFSETS_KEYS: dict[int, Schema] = {
    0: Schema(
        "LegacyOffsetCommitKey",
        (F("group", "string"), F("topic", "string"), F("partition", "int32")),
    ),
    1: Schema(
        "OffsetCommitKey",
        (F("group", "string"), F("topic", "string"), F("partition", "int32")),
    ),
    GROUP_METADATA_KEY_VERSION: _key("GroupMetadataKey", "group"),
    3: _key("ConsumerGroupMetadataKey", "groupId"),
    4: _key("ConsumerGroupPartitionMetadataKey", "groupId"),
    5: _key("ConsumerGroupMemberMetadataKey", "groupId", "memberId"),
    6: _key("ConsumerGroupTargetAssignmentMetadataKey", "groupId"),
    7: _key("ConsumerGroupTargetAssignmentMemberKey", "groupId", "memberId"),
    8: _key("ConsumerGroupCurrentMemberAssignmentKey", "groupId", "memberId"),
    10: _key("ShareGroupMemberMetadataKey", "groupId", "memberId"),
    11: _key("ShareGroupMetadataKey", "groupId"),
    12: _key("ShareGroupTargetAssignmentMetadataKey", "groupId"),
    13: _key("ShareGroupTargetAssignmentMemberKey", "groupId", "memberId"),
    14: _key("ShareGroupCurrentMemberAssignmentKey", "groupId", "memberId"),
    15: _key("ShareGroupStatePartitionMetadataKey", "groupId"),
    16: _key("ConsumerGroupRegularExpressionKey", "groupId", "regularExpression"),
}

OFFSETS_VALUES: dict[int, Schema] = {
    0: Schema(
        "LegacyOffsetCommitValue",
        (F("offset", "int64"), F("metadata", "string"), F("commitTimestamp", "int64")),
    ),
    1: Schema(
        "OffsetCommitValue",
        (
            F("offset", "int64"),
            F("leaderEpoch", "int32", (3, _ANY)),
            F("metadata", "string"),
            F("commitTimestamp", "int64"),
            F("expireTimestamp", "int64", (1, 1)),
            F("topicId", "uuid", (4, _ANY), tag=0),
        ),
        versions=(0, 4),
        flexible=4,
    ),
    2: Schema(
        "GroupMetadataValue",
        (
            F("protocolType", "string"),
            F("generation", "int32"),
            F("protocol", "string", nullable=0),
            F("leader", "string", nullable=0),
            F("currentStateTimestamp", "int64", (2, _ANY)),
            F("members", "[]struct", fields=_MEMBER_METADATA),
        ),
        versions=(0, 4),
        flexible=4,
    ),
    3: Schema(
        "ConsumerGroupMetadataValue",
        (F("epoch", "int32"), F("metadataHash", "int64", tag=0, default=0)),
        flexible=0,
    ),
    4: Schema(
        "ConsumerGroupPartitionMetadataValue",
        (
            F(
                "topics",
                "[]struct",
                fields=(
                    *_TOPIC_INFO,
                    F("numPartitions", "int32"),
                    F(
                        "partitionMetadata",
                        "[]struct",
                        fields=(F("partition", "int32"), F("racks", "[]string")),
                    ),
                ),
            ),
        ),
        flexible=0,
    ),
    5: Schema(
        "ConsumerGroupMemberMetadataValue",
        (
            F("instanceId", "string", nullable=0),
            F("rackId", "string", nullable=0),
            F("clientId", "string"),
            F("clientHost", "string"),
            F("subscribedTopicNames", "[]string"),
            F("subscribedTopicRegex", "string", nullable=0),
            F("rebalanceTimeoutMs", "int32"),
            F("serverAssignor", "string", nullable=0),
            F(
                "classicMemberMetadata",
                "struct",
                nullable=0,
                tag=0,
                fields=(
                    F("sessionTimeoutMs", "int32"),
                    F(
                        "supportedProtocols",
                        "[]struct",
                        fields=(F("name", "string"), F("metadata", "bytes")),
                    ),
                ),
            ),
        ),
        flexible=0,
    ),
    6: Schema(
        "ConsumerGroupTargetAssignmentMetadataValue",
        (F("assignmentEpoch", "int32"), F("assignmentTimestamp", "int64", tag=0, default=0)),
        flexible=0,
    ),
    7: Schema(
        "ConsumerGroupTargetAssignmentMemberValue",
        (F("topicPartitions", "[]struct", fields=_TOPIC_PARTITIONS),),
        flexible=0,
    ),
    8: Schema(
        "ConsumerGroupCurrentMemberAssignmentValue",
        (
            F("memberEpoch", "int32"),
            F("previousMemberEpoch", "int32"),
            F("state", "int8"),
            F("assignedPartitions", "[]struct", fields=_CURRENT_ASSIGNMENT),
            F("partitionsPendingRevocation", "[]struct", fields=_CURRENT_ASSIGNMENT),
        ),
        flexible=0,
    ),
    10: Schema(
        "ShareGroupMemberMetadataValue",
        (
            F("rackId", "string", nullable=0),
            F("clientId", "string"),
            F("clientHost", "string"),
            F("subscribedTopicNames", "[]string"),
        ),
        flexible=0,
    ),
    11: Schema(
        "ShareGroupMetadataValue", (F("epoch", "int32"), F("metadataHash", "int64")), flexible=0
    ),
    12: Schema(
        "ShareGroupTargetAssignmentMetadataValue",
        (F("assignmentEpoch", "int32"), F("assignmentTimestamp", "int64", tag=0, default=0)),
        flexible=0,
    ),
    13: Schema(
        "ShareGroupTargetAssignmentMemberValue",
        (F("topicPartitions", "[]struct", fields=_TOPIC_PARTITIONS),),
        flexible=0,
    ),
    14: Schema(
        "ShareGroupCurrentMemberAssignmentValue",
        (
            F("memberEpoch", "int32"),
            F("previousMemberEpoch", "int32"),
            F("state", "int8"),
            F("assignedPartitions", "[]struct", fields=_TOPIC_PARTITIONS),
        ),
        flexible=0,
    ),
    15: Schema(
        "ShareGroupStatePartitionMetadataValue",
        (
            F(
                "initializingTopics",
                "[]struct",
                fields=(*_TOPIC_INFO, F("partitions", "[]int32")),
            ),
            F(
                "initializedTopics",
                "[]struct",
                fields=(*_TOPIC_INFO, F("partitions", "[]int32")),
            ),
            F("deletingTopics", "[]struct", fields=_TOPIC_INFO),
        ),
        flexible=0,
    ),
    16: Schema(
        "ConsumerGroupRegularExpressionValue",
        (F("topics", "[]string"), F("version", "int64"), F("timestamp", "int64")),
        flexible=0,
    ),
}

# The consumer protocol's embedded messages (a classic group's members).
CONSUMER_PROTOCOL_SUBSCRIPTION = Schema(
    "ConsumerProtocolSubscription",
    (
        F("topics", "[]string"),
        F("userData", "bytes", nullable=0),
        F(
            "ownedPartitions",
            "[]struct",
            (1, _ANY),
            fields=(F("topic", "string"), F("partitions", "[]int32")),
        ),
        F("generationId", "int32", (2, _ANY)),
        F("rackId", "string", (3, _ANY), nullable=3),
    ),
    versions=(0, 3),
)
CONSUMER_PROTOCOL_ASSIGNMENT = Schema(
    "ConsumerProtocolAssignment",
    (
        F(
            "assignedPartitions",
            "[]struct",
            fields=(F("topic", "string"), F("partitions", "[]int32")),
        ),
        F("userData", "bytes", nullable=0),
    ),
    versions=(0, 3),
)


# ---------------------------------------------------------------- reading


class _Truncated(ValueError):
    pass


class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, pos: int, flexible: bool) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise _Truncated(f"needs {n} bytes at position {self.pos} of {len(self.buf)}")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def fixed(self, fmt: str) -> int:
        s = struct.Struct(">" + fmt)
        return int(s.unpack(self.take(s.size))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise _Truncated("a varint longer than 5 bytes")

    def length(self, wide: bool) -> int:
        """A string's, bytes' or array's length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        return self.fixed("i" if wide else "h")


_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q"}


def _uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _scalar(r: _Reader, kind: str, nullable: bool) -> JsonValue:
    if kind in _FIXED:
        return r.fixed(_FIXED[kind])
    if kind == "uuid":
        return _uuid(r.take(16))
    n = r.length(kind == "bytes")
    if n < 0:
        if not nullable:
            raise _Truncated(f"a null {kind} where none may be")
        return None
    raw = r.take(n)
    if kind == "bytes":
        return base64.b64encode(raw).decode()
    return raw.decode("utf-8", errors="replace")


def _read_field(r: _Reader, f: Field, version: int) -> JsonValue:
    nullable = f.may_be_null(version)
    if f.kind.startswith("[]"):
        n = r.length(True)
        if n < 0:
            if not nullable:
                raise _Truncated(f"a null array {f.name}")
            return None
        item = f.kind[2:]
        if item == "struct":
            return [_read_struct(r, f.fields, version) for _ in range(n)]
        return [_scalar(r, item, False) for _ in range(n)]
    if f.kind == "struct":
        # A nullable struct leads with a marker: -1 null, 1 present (Kafka
        # writes a null tagged one as the single byte 0).
        if nullable and r.fixed("b") <= 0:
            return None
        return _read_struct(r, f.fields, version)
    return _scalar(r, f.kind, nullable)


def _default_struct(fields: tuple[Field, ...], version: int) -> dict[str, JsonValue]:
    return {f.name: _default(f, version) for f in fields if f.tag is None and f.present(version)}


def _default(f: Field, version: int) -> JsonValue:
    if f.kind in _FIXED:
        return f.default if f.default is not None else 0
    if f.kind == "uuid":
        return _uuid(bytes(16))
    if f.kind.startswith("[]"):
        return []
    if f.kind == "struct":
        # Even a nullable one: Kafka's generated classes start it as an empty
        # struct, so an absent tag reads as that, not as null.
        return _default_struct(f.fields, version)
    return None if f.may_be_null(version) else ""


def _tag_written(f: Field, value: JsonValue, version: int) -> bool:
    """Kafka's generated converters print a tagged field that is not its default."""
    if f.kind.startswith("[]"):
        return value is None or bool(value)
    if f.kind == "struct":
        return value is None or value != _default_struct(f.fields, version)
    return value != _default(f, version)


def _read_struct(r: _Reader, fields: tuple[Field, ...], version: int) -> dict[str, JsonValue]:
    values: dict[str, JsonValue] = {}
    for f in fields:
        if f.tag is None and f.present(version):
            values[f.name] = _read_field(r, f, version)
    tags: dict[int, bytes] = {}
    if r.flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            tags[tag] = r.take(size)
    out: dict[str, JsonValue] = {}
    for f in fields:
        if f.tag is None:
            if f.present(version):
                out[f.name] = values[f.name]
            continue
        if not (r.flexible and f.present(version)):
            continue
        raw = tags.get(f.tag)
        value = (
            _default(f, version) if raw is None else _read_field(_Reader(raw, 0, True), f, version)
        )
        if _tag_written(f, value, version):
            out[f.name] = value
    return out


def read_message(schema: Schema, data: bytes, pos: int, version: int) -> dict[str, JsonValue]:
    """The fields of ``schema`` at ``version`` from ``data[pos:]``."""
    if not schema.versions[0] <= version <= schema.versions[1]:
        raise _Truncated(f"{schema.name} has no version {version}")
    flexible = schema.flexible is not None and version >= schema.flexible
    return _read_struct(_Reader(data, pos, flexible), schema.fields, version)


def _embedded(schema: Schema, encoded: JsonValue) -> JsonValue:
    """A consumer-protocol message held as bytes, decoded at the version its
    first two bytes name; its base64 bytes when it does not decode."""
    if not isinstance(encoded, str):
        return encoded
    raw = base64.b64decode(encoded)
    try:
        (version,) = struct.unpack_from(">h", raw)
        return read_message(schema, raw, 2, min(version, schema.versions[1]))
    except (struct.error, _Truncated, UnicodeDecodeError):
        return encoded


def _consumer_members(value: dict[str, JsonValue]) -> None:
    members = value.get("members")
    if value.get("protocolType") != "consumer" or not isinstance(members, list):
        return
    for m in members:
        if isinstance(m, dict):
            m["subscription"] = _embedded(CONSUMER_PROTOCOL_SUBSCRIPTION, m.get("subscription"))
            m["assignment"] = _embedded(CONSUMER_PROTOCOL_ASSIGNMENT, m.get("assignment"))


def _json(obj: JsonValue) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class MessageParser:
    """A coordinator topic's record decoder (Kafka's CoordinatorRecordMessageParser)."""

    keys: dict[int, Schema]
    values: dict[int, Schema]
    fix_value: Callable[[int, dict[str, JsonValue]], None] | None = None

    def parse(self, offset: int, key: bytes | None, value: bytes | None) -> tuple[str, str | None]:
        """(key text, value text or None), as kafka-dump-log prints them; a
        record of an unknown type or that does not decode is named, not fatal."""
        if key is None:
            raise ValueError(
                f"Failed to decode message at offset {offset} using the specified decoder "
                "(message had a missing key)"
            )
        try:
            if len(key) < 2:
                raise _Truncated("a key shorter than its type")
            (record_type,) = struct.unpack_from(">h", key)
            key_schema = self.keys.get(record_type)
            value_schema = self.values.get(record_type)
            if key_schema is None or value_schema is None:
                return f"Unknown record type {record_type} at offset {offset}, skipping.", None
            key_text = _json(
                {"type": str(record_type), "data": read_message(key_schema, key, 2, 0)}
            )
            if value is None:
                return key_text, "<DELETE>"
            if len(value) < 2:
                raise _Truncated("a value shorter than its version")
            (version,) = struct.unpack_from(">h", value)
            if not value_schema.versions[0] <= version <= value_schema.versions[1]:
                # Kafka's CoordinatorRecordSerde words it so.
                raise _Truncated(
                    f"Found an unknown record version {version} for {record_type} type"
                )
            data = read_message(value_schema, value, 2, version)
            if self.fix_value is not None:
                self.fix_value(record_type, data)
            return key_text, _json({"version": str(version), "data": data})
        except (_Truncated, UnicodeDecodeError) as e:
            return f"Error at offset {offset}, skipping. {e}", None


def _offsets_fix(record_type: int, data: dict[str, JsonValue]) -> None:
    if record_type == GROUP_METADATA_KEY_VERSION:
        _consumer_members(data)


offsets_message_parser = MessageParser(OFFSETS_KEYS, OFFSETS_VALUES, _offsets_fix)
transaction_log_message_parser = MessageParser(TRANSACTION_LOG_KEYS, TRANSACTION_LOG_VALUES)
