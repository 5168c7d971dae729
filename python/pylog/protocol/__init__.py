"""The Kafka wire protocol: requests and responses of every version real clients use.

Generated from Kafka's JSON message definitions (``schema/``, Apache-2.0, with
their LICENSE and NOTICE) at build time: ``make protocol`` (``python -m
pylog.protocol.generator``) writes one checked-in module per definition into
``messages/`` — a typed class per struct, named as the JSON names it
(``ProduceRequest``, ``TopicProduceData``, ``PartitionProduceData``), and per
version a straight-line decoder and encoder without per-field dispatch, each
with a *tracking* twin that names the malformed field. The codec imports them.

Broker side::

    header = parse_request_header(frame)       # frame: the request without its size prefix
    request = decode_request(header, frame)    # a ProduceRequest, ...: request.topic_data[0].name
    chunks = encode_response(header, {"responses": [...], "throttle_time_ms": 0})

``decode_request(header, frame, ProduceRequest)`` types the result as that
class; ``REQUEST_CLASSES`` / ``RESPONSE_CLASSES`` give the class of an api key.
A handler names its body ``body: ProduceRequest`` (from ``pylog.protocol.messages``).
Encoders take the response classes or mappings of their fields alike.

Client side (tests, the CLI): ``encode_request`` and ``decode_response``.

Values: field names are the snake_case of the JSON names; arrays are lists;
strings ``str``; bytes ``bytes``; records fields decode to zero-copy
``memoryview`` slices of the frame and encode from any bytes-like object or an
object with a ``size`` (``pylog.records.FileRecords``), passed through as its
own chunk; uuids are Kafka's text form (22 characters of base64url,
``ZERO_UUID`` for none), and encode from that, ``uuid.UUID`` or 16 bytes. A
field a version lacks decodes to its default; on encode, a missing key takes the
default, and a non-ignorable field the version lacks must keep its default.
"""

from . import messages
from ._runtime import MAX_REQUEST_ELEMENTS, Body, Chunk, Records
from ._spec import ZERO_UUID
from ._struct import Struct
from ._versions import GROUP_API_VERSIONS, SUPPORTED_VERSIONS, ApiKey
from .codec import (
    CorruptResponseError,
    RequestHeader,
    api_versions_body,
    decode_body,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_body,
    encode_request,
    encode_response,
    is_flexible,
    message_spec,
    parse_request_header,
    produce_request_elements,
    request_header_version,
    response_correlation_id,
    response_header_version,
    served_versions,
    warm_up,
)
from .messages import REQUEST_CLASSES, RESPONSE_CLASSES, Request, Response

__all__ = [
    "GROUP_API_VERSIONS",
    "MAX_REQUEST_ELEMENTS",
    "REQUEST_CLASSES",
    "RESPONSE_CLASSES",
    "SUPPORTED_VERSIONS",
    "ZERO_UUID",
    "ApiKey",
    "Body",
    "Chunk",
    "CorruptResponseError",
    "Records",
    "Request",
    "RequestHeader",
    "Response",
    "Struct",
    "api_versions_body",
    "decode_body",
    "decode_request",
    "decode_response",
    "encode_api_versions_fallback",
    "encode_body",
    "encode_request",
    "encode_response",
    "is_flexible",
    "message_spec",
    "messages",
    "parse_request_header",
    "produce_request_elements",
    "request_header_version",
    "response_correlation_id",
    "response_header_version",
    "served_versions",
    "warm_up",
]
