"""What the generated message modules (``messages/*.py``) call at run time.

Varints, uuids, records sizes, the failures a decoder raises and the types of
the per-version codec functions. Kept apart from ``codec`` so the generated
modules import nothing that imports them back.
"""

from __future__ import annotations

import base64
import functools
import struct
import uuid as _uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias, Union

from ._struct import Struct

if TYPE_CHECKING:
    from pylog.records import FileRecords

__all__ = [
    "EMPTY",
    "MAX_REQUEST_ELEMENTS",
    "UV",
    "Body",
    "Chunk",
    "Decoder",
    "Encoder",
    "FieldFailure",
    "Malformed",
    "Records",
    "len16",
    "len32",
    "pack",
    "rd16",
    "rd32",
    "read_uvarint",
    "records_size",
    "unpack_from",
    "uuid_raw",
    "uuid_text",
    "uvarint_bytes",
]

#: One piece of a response frame: our own bytes, or a records object passed through.
Chunk = Union[bytes, bytearray, memoryview, "FileRecords"]

#: A records field of a response: a view of a frame, bytes, or a ``FileRecords``
#: span of a segment that the network layer sends with sendfile.
Records = Union[memoryview, bytes, bytearray, "FileRecords"]

#: What an encoder takes: the message's class, or a mapping of its snake_case field names.
Body: TypeAlias = Struct | Mapping[str, Any]

#: ``decode(buf, pos) -> (message, end)``
Decoder = Callable[[memoryview, int], "tuple[Any, int]"]
#: ``encode(body, out, chunks) -> out``: appends to ``out``; a records field ends
#: ``out`` (appended to ``chunks``), adds the records object as its own chunk and
#: continues in a fresh ``bytearray``, which it returns.
Encoder = Callable[[Any, bytearray, "list[Chunk]"], bytearray]


#: The default of an array field in a message class's constructor: each instance
#: gets a fresh empty list in its place (``None`` is a null array).
EMPTY: Final[list[Any]] = []


#: The most array elements one request may hold, all its arrays together; a request
#: claiming more is Malformed. A decoded element costs some 50-100 bytes of Python
#: objects (and its handler's answer as much again) where the frame spends as little
#: as one or two bytes on it, so the frame's size alone lets a 10 MB request cost
#: gigabytes and seconds of the event loop. 100,000 is far above what a client sends
#: (topics or partitions named in one Produce, Fetch, Metadata, OffsetCommit, ...).
#: The generator writes the figure into each request decoder: regenerate after a change.
MAX_REQUEST_ELEMENTS: Final = 100_000


class Malformed(ValueError):
    """Raised by generated decoders for bytes that break the schema."""


class FieldFailure(Exception):
    """A failure inside a tracking function, with the field path it happened at."""

    def __init__(self, path: str, cause: BaseException) -> None:
        super().__init__(path, cause)
        self.path = path
        self.cause = cause


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint (at most 5 bytes, 32 bits) at ``pos``."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise Malformed("unsigned varint longer than 5 bytes")


def uvarint_bytes(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"negative length {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


#: the one-byte varints 0..127
UV = [bytes([i]) for i in range(128)]


def uuid_text(raw: bytes) -> str:
    """16 bytes -> Kafka's text form of a Uuid (base64url, no padding)."""
    return base64.urlsafe_b64encode(raw)[:22].decode("ascii")


@functools.lru_cache(maxsize=1024)
def _uuid_text_raw(value: str) -> bytes:
    # Every Fetch response names its topics by id: a broker has few of them,
    # and base64 decoding each one per response showed in its profile.
    if len(value) == 22:
        return base64.urlsafe_b64decode(value + "==")
    return _uuid.UUID(value).bytes


def uuid_raw(value: Any) -> bytes:
    """A Uuid given as Kafka text, ``uuid.UUID``, 16 bytes or ``None`` (zero) -> 16 bytes."""
    if value is None:
        return bytes(16)
    if isinstance(value, str):
        raw = _uuid_text_raw(value)
    elif isinstance(value, _uuid.UUID):
        raw = value.bytes
    else:
        raw = bytes(value)
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, not {len(raw)}")
    return raw


def records_size(value: Any) -> int:
    t = type(value)
    if value is None:  # a non-nullable records field left unset: no records
        return 0
    if t is bytes or t is bytearray:
        return len(value)
    if t is memoryview:
        return int(value.nbytes)
    size = getattr(value, "size", None)
    if isinstance(size, int):
        return size
    return len(memoryview(value).cast("B"))


unpack_from = struct.unpack_from
pack = struct.pack
rd16 = struct.Struct(">h").unpack_from
rd32 = struct.Struct(">i").unpack_from
len16 = struct.Struct(">h").pack
len32 = struct.Struct(">i").pack
