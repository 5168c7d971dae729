"""The ``partition.metadata`` file: the topic id a partition directory belongs to.

Kafka's format, two text lines::

    version: 0
    topic_id: <topic id>

A topic id is a 128-bit UUID written as unpadded URL-safe base64 (22
characters), as Kafka prints ``Uuid``. The file lets a broker notice that a
directory belongs to an older incarnation of a topic with the same name.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading

from pylog.errors import KafkaError, KafkaStorageError
from pylog.log.checkpoint import replace_file_durably

__all__ = [
    "PARTITION_METADATA_FILE",
    "CorruptPartitionMetadataError",
    "InconsistentTopicIdError",
    "PartitionMetadataFile",
    "new_topic_id",
    "parse_topic_id",
]

PARTITION_METADATA_FILE = "partition.metadata"
_VERSION = 0
_ZERO = bytes(16)
_METADATA_TOPIC = bytes(15) + b"\x01"  # Kafka reserves this id for its metadata topic


class InconsistentTopicIdError(KafkaError):
    """The log's topic id differs from the one the request or metadata names."""

    code, error_name = 103, "INCONSISTENT_TOPIC_ID"


class CorruptPartitionMetadataError(KafkaStorageError):
    """A ``partition.metadata`` file that does not parse."""


def parse_topic_id(text: str) -> bytes:
    """The 16 bytes of a base64url topic id; ValueError if it is not one."""
    if len(text) != 22:
        raise ValueError(f"topic id {text!r} is not 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"topic id {text!r} is not base64url: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes")
    return raw


def format_topic_id(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def new_topic_id() -> str:
    """A random topic id, avoiding the ids Kafka reserves and ones starting with '-'
    (which command-line tools would read as an option)."""
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40  # version 4, as Java's randomUUID
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = format_topic_id(bytes(raw))
        if bytes(raw) not in (_ZERO, _METADATA_TOPIC) and not text.startswith("-"):
            return text


class PartitionMetadataFile:
    """``<partition dir>/partition.metadata``. Thread-safe."""

    def __init__(self, partition_dir: str | os.PathLike[str]):
        self.path = os.path.join(os.fspath(partition_dir), PARTITION_METADATA_FILE)
        self._lock = threading.Lock()

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def write(self, topic_id: str) -> None:
        parse_topic_id(topic_id)
        data = f"version: {_VERSION}\ntopic_id: {topic_id}\n".encode("ascii")
        with self._lock:
            try:
                replace_file_durably(self.path, data)
            except OSError as e:
                raise KafkaStorageError(
                    f"error writing partition metadata {self.path}: {e}", e.errno
                ) from e

    def read(self) -> str | None:
        """The topic id, or None when the file does not exist."""
        with self._lock:
            try:
                with open(self.path, encoding="ascii") as f:
                    text = f.read()
            except FileNotFoundError:
                return None
            except (OSError, UnicodeDecodeError) as e:
                raise CorruptPartitionMetadataError(
                    f"cannot read partition metadata {self.path}: {e}"
                ) from e
        lines = text.splitlines()
        if len(lines) < 2:
            raise CorruptPartitionMetadataError(
                f"partition metadata {self.path} has {len(lines)} lines, expected 2"
            )
        key, _, value = lines[0].partition(":")
        if key.strip() != "version" or value.strip() != str(_VERSION):
            raise CorruptPartitionMetadataError(
                f"partition metadata {self.path} line 1: unrecognized version line {lines[0]!r}"
            )
        key, _, value = lines[1].partition(":")
        if key.strip() != "topic_id":
            raise CorruptPartitionMetadataError(
                f"partition metadata {self.path} line 2: expected 'topic_id: ...', got {lines[1]!r}"
            )
        topic_id = value.strip()
        try:
            parse_topic_id(topic_id)
        except ValueError as e:
            raise CorruptPartitionMetadataError(
                f"partition metadata {self.path} line 2: {e}"
            ) from None
        return topic_id

    def check_or_write(self, topic_id: str) -> str:
        """Write ``topic_id`` if the file is absent, else check it matches.

        Raises InconsistentTopicIdError naming both ids on a mismatch.
        """
        existing = self.read()
        if existing is None:
            self.write(topic_id)
            return topic_id
        if existing != topic_id:
            raise InconsistentTopicIdError(
                f"{self.path} holds topic id {existing}, not {topic_id}: the directory "
                "belongs to an older topic of the same name"
            )
        return existing
