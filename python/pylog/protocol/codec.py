"""Request/response framing and the public codec functions (see ``pylog.protocol``)."""

from __future__ import annotations

import functools
import importlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar, overload

from pylog.errors import InvalidRequestError, UnsupportedVersionError

from . import messages
from ._runtime import Body, Chunk, Decoder, Encoder, FieldFailure, Malformed, records_size
from ._spec import MessageSpec, load_message, snake_case
from ._struct import Struct
from ._versions import GROUP_API_VERSIONS, SCHEMA_NAMES, SUPPORTED_VERSIONS, ApiKey
from .messages import Request, Response

_Req = TypeVar("_Req", bound=Request)
_Resp = TypeVar("_Resp", bound=Response)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HH = struct.Struct(">hh").unpack_from


class CorruptResponseError(ValueError):
    """A response frame that does not decode with its message definition."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_size: int  # bytes of the header inside the frame


# --- the generated message modules ----------------------------------------------------


class MessageCodec:
    """The generated decoders and encoders of one message (a ``messages`` module), by version."""

    __slots__ = ("decoders", "encoders", "flexible", "module", "valid")

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.valid: tuple[int, int] = module.VALID_VERSIONS
        self.flexible: tuple[int, int] = module.FLEXIBLE_VERSIONS
        self.decoders: dict[int, Decoder] = module.DECODERS
        self.encoders: dict[int, Encoder] = module.ENCODERS

    def _check(self, version: int) -> None:
        lo, hi = self.valid
        raise UnsupportedVersionError(
            f"{self.spec_name} has no version {version} (defined: {lo}-{hi})"
        )

    @property
    def spec_name(self) -> str:
        """The message's name as the definitions write it (``ProduceRequest``)."""
        return self.message.__name__

    @property
    def message(self) -> type[Struct]:
        """The message's class."""
        return self.module.MESSAGE  # type: ignore[no-any-return]

    def decoder(self, version: int) -> Decoder:
        fn = self.decoders.get(version)
        if fn is None:
            self._check(version)
        return fn  # type: ignore[return-value]

    def encoder(self, version: int) -> Encoder:
        fn = self.encoders.get(version)
        if fn is None:
            self._check(version)
        return fn  # type: ignore[return-value]

    def tracking_decoder(self, version: int) -> Decoder:
        self.decoder(version)
        return self.module.TRACKING_DECODERS[version]  # type: ignore[no-any-return]

    def tracking_encoder(self, version: int) -> Encoder:
        self.encoder(version)
        return self.module.TRACKING_ENCODERS[version]  # type: ignore[no-any-return]

    def is_flexible(self, version: int) -> bool:
        lo, hi = self.flexible
        return lo <= version <= hi


_codecs: dict[tuple[int, str], MessageCodec] = {}
_flexible: dict[int, bool] = {}  # (api_key << 16 | version) -> flexible


def _module_codec(name: str) -> MessageCodec:
    return MessageCodec(importlib.import_module(f"{messages.__name__}.{snake_case(name)}"))


def _codec(api_key: int, kind: str) -> MessageCodec:
    key = (api_key, kind)
    codec = _codecs.get(key)
    if codec is None:
        stem = SCHEMA_NAMES.get(api_key)
        if stem is None:
            raise UnsupportedVersionError(f"pylog has no codec for api key {api_key}")
        codec = _codecs[key] = _module_codec(f"{stem}{kind.capitalize()}")
    return codec


_REQUEST_HEADER = _module_codec("RequestHeader")
_RESPONSE_HEADER = _module_codec("ResponseHeader")
_REQUEST_HEADER_DECODERS = {v: _REQUEST_HEADER.decoder(v) for v in (1, 2)}
_RESPONSE_HEADER_ENCODERS = {v: _RESPONSE_HEADER.encoder(v) for v in (0, 1)}


@functools.cache
def message_spec(api_key: int, kind: str = "request") -> MessageSpec:
    """The parsed message definition of an API (``kind``: "request" or "response"),
    read from its JSON file: what the generator worked from."""
    stem = SCHEMA_NAMES.get(api_key)
    if stem is None:
        raise UnsupportedVersionError(f"pylog has no codec for api key {api_key}")
    return load_message(f"{stem}{kind.capitalize()}.json")


def is_flexible(api_key: int, version: int) -> bool:
    """Whether ``version`` of the API uses the flexible (compact, tagged) encoding.

    Open ranges ("9+") count for versions above the newest definition too, so a
    too-new ApiVersions request is still read with header v2. False for an API
    pylog has no definition of.
    """
    key = (api_key << 16) | (version & 0xFFFF)
    flexible = _flexible.get(key)
    if flexible is None:
        if api_key in SCHEMA_NAMES:
            flexible = _codec(api_key, "request").is_flexible(version)
        else:
            flexible = False
        if len(_flexible) < 4096:  # bounded: api keys and versions come from the network
            _flexible[key] = flexible
    return flexible


def request_header_version(api_key: int, version: int) -> int:
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """1 for flexible versions, except ApiVersions, whose response header is always v0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, version) else 0


def served_versions(api_key: int) -> tuple[int, int] | None:
    """The (min, max) decode_request accepts: SUPPORTED_VERSIONS, else GROUP_API_VERSIONS."""
    rng = SUPPORTED_VERSIONS.get(api_key)  # type: ignore[call-overload]
    if rng is None:
        rng = GROUP_API_VERSIONS.get(api_key)  # type: ignore[call-overload]
    return rng  # type: ignore[no-any-return]


# --- errors with the field they happened at ------------------------------------------------


def _describe(exc: BaseException) -> str:
    if isinstance(exc, Malformed):
        return str(exc)
    if isinstance(exc, (struct.error, IndexError)):
        return "the frame ends inside this field"
    if isinstance(exc, UnicodeDecodeError):
        return "string is not valid UTF-8"
    return f"{type(exc).__name__}: {exc}"


def _locate_decode(codec: MessageCodec, version: int, buf: memoryview, pos: int) -> str:
    try:
        codec.tracking_decoder(version)(buf, pos)
    except FieldFailure as failure:
        return f"field {failure.path}: {_describe(failure.cause)}"
    return "unknown field"


def _locate_encode(codec: MessageCodec, version: int, body: Any) -> tuple[str, BaseException]:
    try:
        codec.tracking_encoder(version)(body, bytearray(), [])
    except FieldFailure as failure:
        return failure.path, failure.cause
    return "(unknown)", RuntimeError("encoding failed once and succeeded when retried")


def _encode_body(
    codec: MessageCodec, version: int, body: Any, out: bytearray, chunks: list[Any]
) -> bytearray:
    encoder = codec.encoder(version)
    try:
        return encoder(body, out, chunks)
    except Exception as exc:
        path, cause = _locate_encode(codec, version, body)
        kind = (
            TypeError
            if isinstance(cause, (TypeError, AttributeError, struct.error))
            else ValueError
        )
        raise kind(f"{codec.spec_name} v{version}: cannot encode field {path}: {cause}") from exc


def _as_view(frame: Any) -> memoryview:
    view = frame if type(frame) is memoryview else memoryview(frame)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# --- requests (broker side: parse; client side: encode) ----------------------------------


def parse_request_header(frame: memoryview) -> RequestHeader:
    """The header of a request frame (without its 4-byte size prefix).

    Header v2 (tagged fields) for flexible versions, else v1. An unknown api key or
    version still yields the header; InvalidRequestError when it cannot be parsed.
    """
    frame = _as_view(frame)
    if len(frame) < 10:
        raise InvalidRequestError(
            f"request frame of {len(frame)} bytes is shorter than a request header"
        )
    api_key, api_version = _HH(frame, 0)
    version = 2 if is_flexible(api_key, api_version) else 1
    try:
        header, pos = _REQUEST_HEADER_DECODERS[version](frame, 0)
    except Exception as exc:
        where = _locate_decode(_REQUEST_HEADER, version, frame, 0)
        raise InvalidRequestError(
            f"request header v{version} (api {api_key} v{api_version}): {where}"
        ) from exc
    return RequestHeader(api_key, api_version, header.correlation_id, header.client_id, pos)


@overload
def decode_request(header: RequestHeader, frame: memoryview) -> Request: ...
@overload
def decode_request(header: RequestHeader, frame: memoryview, expect: type[_Req]) -> _Req: ...
def decode_request(
    header: RequestHeader, frame: memoryview, expect: type[Struct] | None = None
) -> Struct:
    """The request body after the header, as its message class (``REQUEST_CLASSES``).

    With ``expect`` (``ProduceRequest``, ...), the result is typed as that class;
    TypeError when the header's api key decodes to another one.
    UnsupportedVersionError for an api/version outside SUPPORTED_VERSIONS (or
    GROUP_API_VERSIONS); InvalidRequestError naming the field when malformed.
    Records fields are zero-copy memoryviews into ``frame``.
    """
    api_key, version = header.api_key, header.api_version
    rng = served_versions(api_key)
    if rng is None or not rng[0] <= version <= rng[1]:
        raise UnsupportedVersionError(
            f"api key {api_key} version {version} is not supported"
            + ("" if rng is None else f" (supported: {rng[0]}-{rng[1]})")
        )
    frame = _as_view(frame)
    codec = _codec(api_key, "request")
    try:
        body, _ = codec.decoder(version)(frame, header.header_size)
    except Exception as exc:
        where = _locate_decode(codec, version, frame, header.header_size)
        raise InvalidRequestError(f"{codec.spec_name} v{version}: {where}") from exc
    if expect is not None and type(body) is not expect:
        raise TypeError(f"api key {api_key} is a {type(body).__name__}, not a {expect.__name__}")
    return body  # type: ignore[no-any-return]


def produce_request_elements(header: RequestHeader, frame: memoryview, limit: int) -> int | None:
    """How many array elements (topics and partitions) a Produce request holds,
    read without decoding it; None when more than ``limit`` (the walk stops
    there) or when the frame does not parse (its decode says why).

    A request's decode costs per element, not per byte (its records stay views
    of the frame), so a large Produce frame with few elements is as cheap to
    decode as a small one: this is how the broker tells the two apart in
    microseconds."""
    try:
        return _produce_elements(_as_view(frame), header.header_size, header.api_version, limit)
    except (IndexError, ValueError, struct.error):
        return None


def _produce_elements(buf: memoryview, pos: int, version: int, limit: int) -> int | None:
    flexible = version >= 9
    end = len(buf)

    def uvarint() -> int:
        nonlocal pos
        value, shift = 0, 0
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def length(wide: int) -> int:  # a string's, array's or bytes' length (-1: null)
        nonlocal pos
        if flexible:
            return uvarint() - 1
        (n,) = (_I16 if wide == 2 else _I32).unpack_from(buf, pos)
        pos += wide
        return int(n)

    def skip(n: int) -> None:
        nonlocal pos
        pos += max(n, 0)
        if pos > end:
            raise ValueError("past the frame's end")

    def skip_tags() -> None:
        if flexible:
            for _ in range(uvarint()):
                uvarint()
                skip(uvarint())

    if version >= 3:
        skip(length(2))  # transactional_id
    skip(6)  # acks, timeout_ms
    topics = length(4)
    count = max(topics, 0)
    if count > limit:
        return None
    for _ in range(topics):
        if version >= 13:
            skip(16)  # topic_id (KIP-516)
        else:
            skip(length(2))  # name
        partitions = length(4)
        count += max(partitions, 0)
        if count > limit:
            return None
        for _ in range(partitions):
            skip(4)  # index
            skip(length(4))  # records
            skip_tags()
        skip_tags()
    return count if count <= limit else None


def encode_request(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    body: Body,
) -> bytes:
    """A whole request frame, size prefix included (what a client writes to the socket)."""
    codec = _codec(api_key, "request")
    hv = request_header_version(api_key, version)
    header = {
        "request_api_key": api_key,
        "request_api_version": version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    out = _REQUEST_HEADER.encoder(hv)(header, bytearray(4), [])
    chunks: list[Any] = []
    chunks.append(_encode_body(codec, version, body, out, chunks))
    data = b"".join(_chunk_bytes(c) for c in chunks)
    return _I32.pack(len(data) - 4) + data[4:]


def _chunk_bytes(chunk: Any) -> bytes | bytearray | memoryview:
    if isinstance(chunk, (bytes, bytearray, memoryview)):
        return chunk
    read = getattr(chunk, "read_bytes", None)
    if read is not None:
        return read()  # type: ignore[no-any-return]
    return memoryview(chunk)


# --- responses (broker side: encode; client side: decode) --------------------------------


def encode_response(header: RequestHeader, body: Body) -> list[Chunk]:
    """The chunks of one response frame: size prefix, response header, body.

    ``body`` is the response's class (``FetchResponse``, ...) or a mapping of its
    snake_case keys (nested lists of dicts or classes); a missing key takes the
    field's default. Records fields are passed through as their own chunks.
    """
    api_key, version = header.api_key, header.api_version
    codec = _codec(api_key, "response")
    hv = response_header_version(api_key, version)
    out = _RESPONSE_HEADER_ENCODERS[hv]({"correlation_id": header.correlation_id}, bytearray(4), [])
    chunks: list[Any] = []
    chunks.append(_encode_body(codec, version, body, out, chunks))
    _frame_size(chunks)
    return chunks


def _frame_size(chunks: list[Any]) -> None:
    """Write the size prefix into the first chunk (a bytearray with 4 spare bytes ahead)."""
    if len(chunks) == 1:
        total = len(chunks[0])
    else:
        total = 0
        for c in chunks:
            total += len(c) if type(c) is bytearray else records_size(c)
    _I32.pack_into(chunks[0], 0, total - 4)


def api_versions_body(
    error_code: int = 0,
    versions: Mapping[int, tuple[int, int]] | None = None,
    throttle_time_ms: int = 0,
) -> dict[str, Any]:
    """An ApiVersions response body listing ``versions`` (default SUPPORTED_VERSIONS)."""
    table = SUPPORTED_VERSIONS if versions is None else versions
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": int(k), "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(table.items())
        ],
        "throttle_time_ms": throttle_time_ms,
    }


def encode_api_versions_fallback(
    header: RequestHeader,
    error_code: int = 35,
    versions: Mapping[int, tuple[int, int]] | None = None,
) -> list[Chunk]:
    """The v0-format answer to an ApiVersions request newer than pylog knows:
    response header v0, ``error_code`` (UNSUPPORTED_VERSION) and the api keys list."""
    v0 = RequestHeader(ApiKey.API_VERSIONS, 0, header.correlation_id, header.client_id, 0)
    return encode_response(v0, api_versions_body(error_code, versions))


def response_correlation_id(frame: Any) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    return int(_I32.unpack_from(frame, 0)[0])


@overload
def decode_response(api_key: int, version: int, frame: Any, *, framed: bool = ...) -> Response: ...
@overload
def decode_response(
    api_key: int, version: int, frame: Any, *, framed: bool = ..., expect: type[_Resp]
) -> _Resp: ...
def decode_response(
    api_key: int,
    version: int,
    frame: Any,
    *,
    framed: bool = False,
    expect: type[Struct] | None = None,
) -> Struct:
    """Decode a response frame (without its size prefix unless ``framed``) into its
    message class (``RESPONSE_CLASSES``; with ``expect``, typed as that class).

    CorruptResponseError, naming the field, when it does not decode.
    """
    view = _as_view(frame)
    if framed:
        size = _I32.unpack_from(view, 0)[0]
        if size != len(view) - 4:
            raise CorruptResponseError(f"frame size {size} but {len(view) - 4} bytes follow")
        view = view[4:]
    codec = _codec(api_key, "response")
    hv = response_header_version(api_key, version)
    hcodec = _RESPONSE_HEADER
    try:
        _, pos = hcodec.decoder(hv)(view, 0)
        body, _ = codec.decoder(version)(view, pos)
    except UnsupportedVersionError:
        raise
    except Exception as exc:
        try:
            _, pos = hcodec.decoder(hv)(view, 0)
        except Exception:
            raise CorruptResponseError(f"response header v{hv}: truncated") from exc
        where = _locate_decode(codec, version, view, pos)
        raise CorruptResponseError(f"{codec.spec_name} v{version}: {where}") from exc
    if expect is not None and type(body) is not expect:
        raise TypeError(f"api key {api_key} is a {type(body).__name__}, not a {expect.__name__}")
    return body  # type: ignore[no-any-return]


def decode_body(api_key: int, version: int, kind: str, body: Any) -> tuple[Struct, int]:
    """Decode a bare message body (no header); returns the struct and the bytes consumed."""
    view = _as_view(body)
    result, end = _codec(api_key, kind).decoder(version)(view, 0)
    return result, end


def encode_body(api_key: int, version: int, kind: str, body: Body) -> bytes:
    """Encode a bare message body (no header, no size prefix) to bytes."""
    codec = _codec(api_key, kind)
    chunks: list[Any] = []
    chunks.append(_encode_body(codec, version, body, bytearray(), chunks))
    return b"".join(_chunk_bytes(c) for c in chunks)


def warm_up(api_keys: Mapping[int, tuple[int, int]] | None = None) -> None:
    """Look up the request decoders and response encoders ahead of the first request.

    They are generated at build time now, so this only checks that every version
    in ``api_keys`` has one (UnsupportedVersionError otherwise); kept for callers.
    """
    table = api_keys if api_keys is not None else {**SUPPORTED_VERSIONS, **GROUP_API_VERSIONS}
    for key, (lo, hi) in table.items():
        req, resp = _codec(key, "request"), _codec(key, "response")
        for v in range(lo, hi + 1):
            req.decoder(v)
            resp.encoder(v)
