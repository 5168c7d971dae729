"""The wire codec against real bytes: round trips of every API and version, the
bytes kafka-python (an independent implementation) writes and reads, malformed
and truncated frames, unsupported versions and the ApiVersions v0 fallback."""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pylog.errors import InvalidRequestError, UnsupportedVersionError
from pylog.protocol import (
    GROUP_API_VERSIONS,
    MAX_REQUEST_ELEMENTS,
    SUPPORTED_VERSIONS,
    ZERO_UUID,
    ApiKey,
    CorruptResponseError,
    RequestHeader,
    Struct,
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
    response_correlation_id,
)
from pylog.protocol._spec import FieldSpec

ALL_VERSIONS = {**SUPPORTED_VERSIONS, **GROUP_API_VERSIONS}


def every_version(kinds: tuple[str, ...] = ("request", "response")) -> Iterator[Any]:
    for api, (lo, hi) in sorted(ALL_VERSIONS.items()):
        for v in range(lo, hi + 1):
            for kind in kinds:
                yield pytest.param(api, v, kind, id=f"{api.name}-v{v}-{kind}")


# --- sample bodies built from the message definitions ------------------------------------


class Sample:
    """Deterministic, non-default values for every field of a message version.

    ``nulls=True`` instead sets nullable fields to null and leaves arrays empty."""

    def __init__(self, version: int, nulls: bool = False) -> None:
        self.version = version
        self.nulls = nulls
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n

    def struct(self, fields: list[FieldSpec]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for f in fields:
            if self.version in f.versions:
                body[f.name] = self.value(f)
        return body

    def value(self, f: FieldSpec) -> Any:
        nullable = self.version in f.nullable
        if f.is_array:
            if self.nulls:
                return None if nullable else []
            if f.fields is not None:
                return [self.struct(f.fields) for _ in range(2)]
            return [self.scalar(f.type) for _ in range(2)]
        if f.fields is not None:
            if self.nulls and (nullable or self.version in f.tagged):
                return None
            return self.struct(f.fields)
        if self.nulls and nullable:
            return None
        return self.scalar(f.type)

    def scalar(self, t: str) -> Any:
        n = self.next()
        if t == "bool":
            return n % 2 == 1
        if t == "int8":
            return n % 100
        if t in ("int16", "uint16"):
            return 1000 + n
        if t in ("int32", "uint32"):
            return 100_000 + n
        if t == "int64":
            return 10_000_000_000 + n
        if t == "float64":
            return n + 0.5
        if t == "string":
            return f"s{n}-é"
        if t == "bytes":
            return bytes([n % 256]) * 3
        if t == "records":
            return b"records-" + str(n).encode() * 5
        if t == "uuid":
            raw = uuid.UUID(int=n * 0x1234567 + 1).bytes
            return base64.urlsafe_b64encode(raw)[:22].decode()
        raise AssertionError(t)


def sample(api: int, version: int, kind: str, nulls: bool = False) -> dict[str, Any]:
    return Sample(version, nulls).struct(message_spec(api, kind).fields)


def plain(value: Any) -> Any:
    """Decoded values as comparable plain data (records memoryviews -> bytes)."""
    if isinstance(value, Struct):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value


def project(decoded: Any, expected: Any) -> Any:
    """Keep only the keys ``expected`` has (fields present in the version)."""
    if isinstance(expected, dict):
        return {k: project(decoded[k], v) for k, v in expected.items()}
    if isinstance(expected, list) and isinstance(decoded, list):
        return [project(d, e) for d, e in zip(decoded, expected, strict=True)]
    return decoded


def frame_of(data: bytes) -> memoryview:
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    return memoryview(data)[4:]


# --- round trips ----------------------------------------------------------------------------


@pytest.mark.parametrize(("api", "version", "kind"), list(every_version()))
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_round_trip_every_api_and_version(api: int, version: int, kind: str, nulls: bool) -> None:
    body = sample(api, version, kind, nulls)
    data = encode_body(api, version, kind, body)
    decoded, end = decode_body(api, version, kind, data)
    assert end == len(data)
    assert project(plain(decoded), body) == body
    # a decoded Struct encodes back to the same bytes
    assert encode_body(api, version, kind, decoded) == data


@pytest.mark.parametrize(("api", "version", "kind"), list(every_version(("request",))))
def test_request_frames_round_trip(api: int, version: int, kind: str) -> None:
    body = sample(api, version, kind)
    data = encode_request(api, version, 0x7ABC, "client-1", body)
    frame = frame_of(data)
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version) == (api, version)
    assert (header.correlation_id, header.client_id) == (0x7ABC, "client-1")
    # header v2 carries one tagged-fields byte after the client id
    assert header.header_size == 2 + 2 + 4 + 2 + 8 + (1 if is_flexible(api, version) else 0)
    assert project(plain(decode_request(header, frame)), body) == body


@pytest.mark.parametrize(("api", "version", "kind"), list(every_version(("response",))))
def test_response_frames_round_trip(api: int, version: int, kind: str) -> None:
    body = sample(api, version, kind)
    header = RequestHeader(api, version, 99, "c", 0)
    data = b"".join(bytes(c) for c in encode_response(header, body))
    assert response_correlation_id(frame_of(data)) == 99
    decoded = decode_response(api, version, data, framed=True)
    assert project(plain(decoded), body) == body
    assert decode_response(api, version, frame_of(data)) == decoded


def test_fields_absent_from_a_version_decode_to_their_defaults() -> None:
    body = {"acks": 1, "timeout_ms": 5, "topic_data": []}
    frame = frame_of(encode_request(ApiKey.PRODUCE, 2, 1, None, body))
    req = decode_request(parse_request_header(frame), frame)
    assert req.transactional_id is None  # a v3+ field
    resp = decode_response(
        ApiKey.FETCH,
        4,
        b"".join(encode_response(RequestHeader(1, 4, 1, None, 0), {"responses": []})),
        framed=True,
    )
    assert (resp.session_id, resp.error_code, resp.node_endpoints) == (0, 0, [])


def test_struct_reads_as_attributes_and_as_a_mapping() -> None:
    frame = frame_of(encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": None}))
    req = decode_request(parse_request_header(frame), frame)
    assert req.topics is None and req["topics"] is None and req.get("nope", 3) == 3
    assert "allow_auto_topic_creation" in req and dict(req.items())["topics"] is None
    assert req.to_dict()["allow_auto_topic_creation"] is True
    with pytest.raises(AttributeError):
        _ = req.nope


# --- records: zero copy in, pass-through out -----------------------------------------------


def test_produce_records_decode_as_a_view_into_the_frame() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB
    body = {
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 3, "records": records}]}],
    }
    buffer = bytearray(encode_request(ApiKey.PRODUCE, 9, 1, "c", body))
    frame = memoryview(buffer)[4:]
    req = decode_request(parse_request_header(frame), frame)
    view = req.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview) and view.obj is buffer
    assert view == records
    start = buffer.find(records)
    buffer[start] ^= 0xFF  # the same memory, not a copy
    assert view[0] == records[0] ^ 0xFF


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.PRODUCE][1] + 1))
def test_produce_request_elements_counts_what_the_decoder_finds(version: int) -> None:
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30000,
        "topic_data": [
            {"name": "a", "partition_data": [{"index": 0, "records": b"x" * 70_000}]},
            {"name": "bb", "partition_data": [{"index": i, "records": None} for i in range(5)]},
            {"name": "c", "partition_data": []},
        ],
    }
    frame = memoryview(encode_request(ApiKey.PRODUCE, version, 1, "c", body))[4:]
    header = parse_request_header(frame)
    decoded = decode_request(header, frame)
    count = len(decoded.topic_data) + sum(len(t.partition_data) for t in decoded.topic_data)
    assert count == 9
    assert produce_request_elements(header, frame, 9) == 9
    assert produce_request_elements(header, frame, 8) is None  # over the limit: stops
    for cut in (len(frame) - 1, len(frame) // 2, header.header_size + 3):
        # a truncated frame: None or a count, never an exception
        assert produce_request_elements(header, frame[:cut], 100) in (None, *range(10))


def test_produce_request_elements_skips_tagged_fields() -> None:
    # Produce v9 by hand: one topic with two partitions, the first with an unknown tag.
    header_bytes = encode_request(ApiKey.PRODUCE, 9, 1, "c", {"topic_data": []})[4:]
    header = parse_request_header(memoryview(header_bytes))
    body = (
        b"\x00" + struct.pack(">hi", 1, 30000) + b"\x02" + b"\x02t" + b"\x03"
        + struct.pack(">i", 0) + b"\x04abc" + b"\x01\x05\x02xy"
        + struct.pack(">i", 1) + b"\x00\x00"
        + b"\x00\x00"
    )  # fmt: skip
    frame = memoryview(bytes(header_bytes[: header.header_size]) + body)
    decoded = decode_request(header, frame)
    assert [p.index for p in decoded.topic_data[0].partition_data] == [0, 1]
    assert produce_request_elements(header, frame, 10) == 3
    # a count far beyond the frame ends the walk at once
    huge = memoryview(bytes(header_bytes[: header.header_size]) + body[:7] + b"\xff\xff\xff\x0f")
    assert produce_request_elements(header, huge, 1000) is None


class FakeFileRecords:
    """What the network layer hands to sendfile: only ``size`` is read by the codec."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read_bytes(self) -> bytes:
        return self.data


@pytest.mark.parametrize("version", [4, 11, 12, 16, 17])
def test_fetch_response_passes_records_objects_through(version: int) -> None:
    file_records = FakeFileRecords(b"R" * 777)
    view = memoryview(b"0123456789abcdef")[2:12]
    body = {
        "responses": [
            {
                "topic": "t",
                "topic_id": uuid.UUID(int=5),
                "partitions": [
                    {"partition_index": 0, "high_watermark": 10, "records": file_records},
                    {"partition_index": 1, "high_watermark": 11, "records": view},
                    {"partition_index": 2, "high_watermark": 12, "records": None},
                ],
            }
        ]
    }
    chunks = encode_response(RequestHeader(ApiKey.FETCH, version, 7, "c", 0), body)
    assert chunks[1] is file_records and chunks[3] is view
    assert all(isinstance(c, bytearray) for c in chunks[0::2])
    whole = b"".join(c.read_bytes() if c is file_records else bytes(c) for c in chunks)
    resp = decode_response(ApiKey.FETCH, version, whole, framed=True)
    parts = resp.responses[0].partitions
    assert [plain(p.records) for p in parts] == [b"R" * 777, b"23456789ab", None]


# --- kafka-python: an independent implementation of the same protocol ----------------------


def kafka_python_classes() -> dict[tuple[int, str], Any]:
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer
    import kafka.protocol.sasl
    from kafka.protocol.api_message import ApiMessage

    found: dict[tuple[int, str], Any] = {}
    for module in (
        kafka.protocol.admin,
        kafka.protocol.consumer,
        kafka.protocol.metadata,
        kafka.protocol.producer,
        kafka.protocol.sasl,
    ):
        for name in dir(module):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, ApiMessage) and cls is not ApiMessage:
                try:
                    found[(cls.API_KEY, cls.type)] = cls
                except Exception:  # abstract helpers without a schema
                    continue
    return found


KP = kafka_python_classes()


def kp_class(api: int, version: int, kind: str) -> Any:
    cls = KP.get((api, kind))
    if cls is None or version > cls.max_version:
        pytest.skip(f"kafka-python has no {kind} class for {api} v{version}")
    return cls


def kafka_python_versions(kind: str) -> list[Any]:
    """The (api, version) pairs kafka-python has a class for: not the controller's
    requests (LeaderAndIsr, UpdateMetadata, StopReplica), which it never sends."""
    out = []
    for p in every_version((kind,)):
        api, version, _ = p.values
        cls = KP.get((api, kind))
        if cls is not None and version <= cls.max_version:
            out.append(p)
    return out


@pytest.mark.parametrize(("api", "version", "kind"), kafka_python_versions("request"))
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_kafka_python_requests_decode_identically(
    api: int, version: int, kind: str, nulls: bool
) -> None:
    """kafka-python writes the request (header and frame too); we read the values we meant."""
    cls = kp_class(api, version, kind)
    body = sample(api, version, kind, nulls)
    ours = encode_request(api, version, 4242, "kp-client", body)
    theirs_obj = cls.decode(ours, version=version, header=True, framed=True)
    theirs = theirs_obj.encode(version=version, header=True, framed=True)
    assert bytes(theirs) == ours
    frame = frame_of(bytes(theirs))
    header = parse_request_header(frame)
    assert (header.correlation_id, header.client_id) == (4242, "kp-client")
    assert project(plain(decode_request(header, frame)), body) == body


@pytest.mark.parametrize(("api", "version", "kind"), kafka_python_versions("response"))
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_our_responses_decode_with_kafka_python(
    api: int, version: int, kind: str, nulls: bool
) -> None:
    cls = kp_class(api, version, kind)
    body = sample(api, version, kind, nulls)
    if api == ApiKey.API_VERSIONS:
        body["error_code"] = 0  # clients read an ApiVersions error as a v0 body
    data = b"".join(
        bytes(c) for c in encode_response(RequestHeader(api, version, 31, "c", 0), body)
    )
    theirs = cls.decode(data, version=version, header=True, framed=True)
    assert theirs.header.correlation_id == 31
    # every value we wrote is what kafka-python reads, where the field names agree
    assert_same_values(theirs, body)
    # and kafka-python writes the same bytes back
    assert bytes(theirs.encode(header=True, framed=True)) == data


def assert_same_values(theirs: Any, body: dict[str, Any], path: str = "") -> None:
    for name, value in body.items():
        if not hasattr(theirs, name):
            continue  # a field kafka-python's newer definitions renamed
        got = getattr(theirs, name)
        here = f"{path}{name}"
        if isinstance(value, dict):
            assert_same_values(got, value, here + ".")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            assert len(got) == len(value), here
            for g, v in zip(got, value, strict=True):
                assert_same_values(g, v, here + "[].")
        else:
            assert normalise_kp(got) == value, here


def normalise_kp(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):  # kafka-python's view of an operations bit field
        return sum(1 << bit for bit in value)
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes)[:22].decode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def test_kafka_python_hand_built_requests() -> None:
    """Requests as kafka-python's client code builds them, not derived from our bytes."""
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    from kafka.protocol.producer import ProduceRequest

    produce = ProduceRequest[9](
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="orders",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=2, records=b"\x00" * 70
                    )
                ],
            )
        ],
    )
    produce.with_header(correlation_id=11, client_id="kafka-python-3")
    frame = frame_of(bytes(produce.encode(header=True, framed=True)))
    header = parse_request_header(frame)
    req = decode_request(header, frame)
    assert (header.api_key, header.api_version, header.header_size) == (0, 9, 25)
    assert (req.acks, req.timeout_ms, req.transactional_id) == (-1, 30000, None)
    part = req.topic_data[0].partition_data[0]
    assert (req.topic_data[0].name, part.index, bytes(part.records)) == ("orders", 2, b"\0" * 70)

    topic_id = uuid.uuid4()
    fetch = FetchRequest[16](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic_id=topic_id,
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=4,
                        fetch_offset=1234,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1048576,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    fetch.with_header(correlation_id=12, client_id="x")
    frame = frame_of(bytes(fetch.encode(header=True, framed=True)))
    req = decode_request(parse_request_header(frame), frame)
    assert req.topics[0].topic_id == base64.urlsafe_b64encode(topic_id.bytes)[:22].decode()
    assert uuid.UUID(bytes=base64.urlsafe_b64decode(req.topics[0].topic_id + "==")) == topic_id
    p = req.topics[0].partitions[0]
    assert (p.partition, p.current_leader_epoch, p.fetch_offset) == (0, 4, 1234)
    assert (req.session_id, req.session_epoch, req.isolation_level) == (0, -1, 1)

    metadata = MetadataRequest[12](topics=None, allow_auto_topic_creation=False)
    metadata.with_header(correlation_id=13, client_id=None)
    frame = frame_of(bytes(metadata.encode(header=True, framed=True)))
    header = parse_request_header(frame)
    assert header.client_id is None
    req = decode_request(header, frame)
    assert req.topics is None and req.allow_auto_topic_creation is False

    av = ApiVersionsRequest[3](client_software_name="kafka-python", client_software_version="3")
    av.with_header(correlation_id=14, client_id="kp")
    frame = frame_of(bytes(av.encode(header=True, framed=True)))
    header = parse_request_header(frame)
    assert header.header_size == 2 + 2 + 4 + 2 + 2 + 1
    req = decode_request(header, frame)
    assert (req.client_software_name, req.client_software_version) == ("kafka-python", "3")


def test_legacy_kafka_python_classes_agree() -> None:
    """kafka-python's older hand-written protocol classes (non-flexible versions)."""
    from kafka.protocol.old.fetch import FetchResponse as OldFetchResponse
    from kafka.protocol.old.metadata import MetadataRequest as OldMetadataRequest
    from kafka.protocol.old.produce import ProduceRequest as OldProduceRequest

    old = OldProduceRequest[7](
        transactional_id=None, required_acks=1, timeout=1000, topics=[("t", [(0, b"abc")])]
    )
    body = bytes(old.encode())
    decoded, end = decode_body(ApiKey.PRODUCE, 7, "request", body)
    assert end == len(body)
    assert decoded.acks == 1 and bytes(decoded.topic_data[0].partition_data[0].records) == b"abc"

    old_md = OldMetadataRequest[5](topics=["a", "b"], allow_auto_topic_creation=True)
    decoded, _ = decode_body(ApiKey.METADATA, 5, "request", old_md.encode())
    assert [t.name for t in decoded.topics] == ["a", "b"]

    ours = encode_body(
        ApiKey.FETCH,
        7,
        "response",
        {
            "session_id": 3,
            "responses": [
                {
                    "topic": "t",
                    "partitions": [
                        {"partition_index": 1, "high_watermark": 9, "records": b"", "error_code": 0}
                    ],
                }
            ],
        },
    )
    parsed = OldFetchResponse[7].decode(ours)
    assert parsed.session_id == 3 and parsed.topics[0][0] == "t"
    assert parsed.topics[0][1][0][:3] == (1, 0, 9)


# --- headers, ApiVersions -------------------------------------------------------------------


def test_api_versions_headers() -> None:
    # v3+ requests use header v2 ...
    frame = frame_of(encode_request(ApiKey.API_VERSIONS, 3, 5, "rdkafka", {}))
    assert parse_request_header(frame).header_size == 2 + 2 + 4 + 2 + 7 + 1
    # ... but the response header is v0 (no tagged fields), even for v3/v4
    for version in (3, 4):
        header = RequestHeader(ApiKey.API_VERSIONS, version, 5, "rdkafka", 0)
        data = b"".join(bytes(c) for c in encode_response(header, api_versions_body()))
        assert data[4:8] == struct.pack(">i", 5)
        assert data[8:10] == b"\x00\x00"  # the body's error_code right after the correlation id
        resp = decode_response(ApiKey.API_VERSIONS, version, data, framed=True)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert advertised == {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
    # other flexible responses do carry a tagged-fields byte in their header
    header = RequestHeader(ApiKey.METADATA, 12, 5, "c", 0)
    data = b"".join(bytes(c) for c in encode_response(header, {}))
    # size, correlation id, header tags | throttle, brokers, cluster_id, controller, topics, tags
    assert data[8] == 0 and len(data) == 4 + 4 + 1 + 4 + 1 + 1 + 4 + 1 + 1


def test_api_versions_fallback_for_a_too_new_request() -> None:
    # an ApiVersions v9 request: header v2 (flexible "3+" is open ended) and a body we do not know
    raw = struct.pack(">hhih", 18, 9, 77, 3) + b"abc" + b"\x00" + b"\x05junk\x02z\x00"
    frame = memoryview(raw)
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 9, 77)
    assert header.header_size == 2 + 2 + 4 + 2 + 3 + 1
    with pytest.raises(UnsupportedVersionError):
        decode_request(header, frame)
    data = b"".join(bytes(c) for c in encode_api_versions_fallback(header))
    # v0 layout: size, correlation id, error_code int16, int32 count, (int16 key, min, max)*
    size, corr, error, count = struct.unpack_from(">iihi", data, 0)
    assert (size, corr, error, count) == (len(data) - 4, 77, 35, len(SUPPORTED_VERSIONS))
    entries = [struct.unpack_from(">hhh", data, 14 + 6 * i) for i in range(count)]
    assert {k: (lo, hi) for k, lo, hi in entries} == {
        int(k): v for k, v in SUPPORTED_VERSIONS.items()
    }
    assert len(data) == 14 + 6 * count
    from kafka.protocol.metadata import ApiVersionsResponse

    theirs = ApiVersionsResponse.decode(data, version=0, header=True, framed=True)
    assert theirs.error_code == 35 and len(theirs.api_keys) == count
    merged = {**SUPPORTED_VERSIONS, **GROUP_API_VERSIONS}
    data = b"".join(bytes(c) for c in encode_api_versions_fallback(header, 35, merged))
    # in key order, the highest key served last
    keys = [k.api_key for k in decode_response(18, 0, data, framed=True).api_keys]
    assert keys == sorted(int(k) for k in merged)


def test_supported_versions_cover_what_real_clients_negotiate() -> None:
    sv = {k: v for k, v in SUPPORTED_VERSIONS.items()}
    # librdkafka: Produce advertised from 0 (compression), Fetch up to 16 with Metadata 10+
    assert sv[ApiKey.PRODUCE][0] == 0 and sv[ApiKey.FETCH][1] >= 16
    assert sv[ApiKey.METADATA][1] >= 10 and sv[ApiKey.API_VERSIONS] == (0, 4)
    # aiokafka: only non-flexible versions
    assert sv[ApiKey.PRODUCE][0] <= 8 and sv[ApiKey.FETCH][0] <= 11 and sv[ApiKey.METADATA][0] <= 5
    assert GROUP_API_VERSIONS[ApiKey.OFFSET_COMMIT][0] <= 3
    assert GROUP_API_VERSIONS[ApiKey.OFFSET_FETCH][0] <= 3
    # KIP-320 leader epochs
    assert sv[ApiKey.OFFSET_FOR_LEADER_EPOCH][1] >= 2 and sv[ApiKey.METADATA][1] >= 7
    # every advertised version is one the definitions carry
    for api, (lo, hi) in ALL_VERSIONS.items():
        for kind in ("request", "response"):
            valid = message_spec(api, kind).valid
            assert valid.low <= lo <= hi <= valid.high, (api, kind)
    # kafka-python infers the broker version from the maxima: DescribeLogDirs 5
    # is Kafka 4.3's
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    assert infer_broker_version_from_api_versions({int(k): v for k, v in sv.items()}) == (4, 3)


# --- errors -----------------------------------------------------------------------------------


def test_unknown_api_key_and_versions() -> None:
    raw = struct.pack(">hhih", 999, 0, 1, -1)
    header = parse_request_header(memoryview(raw))
    assert (header.api_key, header.client_id, header.header_size) == (999, None, 10)
    with pytest.raises(UnsupportedVersionError):
        decode_request(header, memoryview(raw))
    for api, version in ((ApiKey.FETCH, 3), (ApiKey.FETCH, 19), (ApiKey.VOTE, 0)):
        raw = struct.pack(">hhih", api, version, 1, -1) + b"\x00" * 64
        header = parse_request_header(memoryview(raw))
        with pytest.raises(UnsupportedVersionError) as err:
            decode_request(header, memoryview(raw))
        assert err.value.code == 35
    with pytest.raises(UnsupportedVersionError):
        encode_response(RequestHeader(ApiKey.PRODUCE, 14, 1, None, 0), {})


@pytest.mark.parametrize(("api", "version", "kind"), list(every_version(("request",))))
def test_every_truncation_is_an_invalid_request(api: int, version: int, kind: str) -> None:
    data = encode_request(api, version, 1, "c", sample(api, version, kind))
    frame = frame_of(data)
    header = parse_request_header(frame)
    name = message_spec(api, kind).name
    for cut in range(header.header_size, len(frame)):
        short = frame[:cut]
        with pytest.raises(InvalidRequestError) as err:
            decode_request(header, short)
        assert f"{name} v{version}: field " in str(err.value)
        assert err.value.code == 42
    for cut in range(10):
        with pytest.raises(InvalidRequestError):
            parse_request_header(frame[:cut])


def test_malformed_fields_are_named() -> None:
    # Produce v3: transactional_id(int16 len) acks timeout topic_data[int32 count] ...
    good = encode_request(
        ApiKey.PRODUCE,
        3,
        1,
        "c",
        {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"xyz"}]}]},
    )
    frame = bytearray(frame_of(good))
    header = parse_request_header(memoryview(frame))
    body_at = header.header_size
    # records length larger than the frame
    bad = bytearray(frame)
    struct.pack_into(">i", bad, len(bad) - 3 - 4, 1000)
    with pytest.raises(InvalidRequestError, match=r"ProduceRequest v3: field topic_data\[\]"):
        decode_request(header, memoryview(bad))
    with pytest.raises(InvalidRequestError, match=r"partition_data\[\]\.records"):
        decode_request(header, memoryview(bad))
    # a null name for a non-nullable string
    bad = bytearray(frame)
    struct.pack_into(">h", bad, body_at + 2 + 2 + 4 + 4, -1)
    with pytest.raises(InvalidRequestError, match=r"topic_data\[\]\.name: null"):
        decode_request(header, memoryview(bad))
    # an array count far beyond the frame
    bad = bytearray(frame)
    struct.pack_into(">i", bad, body_at + 2 + 2 + 4, 0x7FFFFFFF)
    with pytest.raises(InvalidRequestError, match="topic_data: array of 2147483647"):
        decode_request(header, memoryview(bad))
    # invalid UTF-8
    bad = bytearray(frame)
    bad[body_at + 2 + 2 + 4 + 4 + 2] = 0xFF
    with pytest.raises(InvalidRequestError, match="UTF-8"):
        decode_request(header, memoryview(bad))
    # a varint that never ends (flexible version)
    flex = bytearray(frame_of(encode_request(ApiKey.METADATA, 12, 1, "c", {"topics": []})))
    h = parse_request_header(memoryview(flex))
    flex[h.header_size : h.header_size + 1] = b"\xff\xff\xff\xff\xff\xff"
    with pytest.raises(InvalidRequestError, match="MetadataRequest v12: field topics: unsigned"):
        decode_request(h, memoryview(flex))


def _array_paths(
    fields: list[FieldSpec], version: int, path: tuple[str, ...] = ()
) -> Iterator[Any]:
    for f in fields:
        if version not in f.versions:
            continue
        if f.is_array:
            yield (*path, f.name), f
        if f.fields is not None:
            yield from _array_paths(f.fields, version, (*path, f.name))


def _smallest(f: FieldSpec) -> Any:
    """An element of the array ``f`` in its fewest bytes: every field at its default."""
    if f.fields is not None:
        return {}
    return {"string": "", "uuid": ZERO_UUID, "float64": 0.0, "bool": False}.get(f.type, 0)


def _with_array(fields: list[FieldSpec], path: tuple[str, ...], items: list[Any]) -> dict[str, Any]:
    """A body whose array at ``path`` holds ``items``, inside one element of each parent."""
    head, rest = path[0], path[1:]
    if not rest:
        return {head: items}
    f = next(f for f in fields if f.name == head)
    assert f.fields is not None
    inner = _with_array(f.fields, rest, items)
    return {head: [inner] if f.is_array else inner}


@pytest.mark.parametrize(("api", "version", "kind"), list(every_version()))
def test_arrays_of_smallest_elements_still_decode(api: int, version: int, kind: str) -> None:
    # The decoders refuse an array count the bytes left in the frame cannot hold at
    # the element's smallest encoding; that smallest encoding itself must still pass,
    # also at the very end of the frame, where the bound is tight.
    spec = message_spec(api, kind)
    for path, f in _array_paths(spec.fields, version):
        items = [_smallest(f)] * 40
        body = _with_array(spec.fields, path, items)
        data = encode_body(api, version, kind, body)
        decoded, end = decode_body(api, version, kind, data)
        assert end == len(data)
        value: Any = decoded
        for name in path:
            value = value[name]
            if isinstance(value, list) and name != path[-1]:
                value = value[0]
        assert len(value) == 40, (path, version)


def test_array_counts_beyond_the_frame_are_refused_before_decoding() -> None:
    # Metadata v1: int32 count, then topics of at least 2 bytes (an int16 length).
    head = encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": []})[4:-4]
    for count, ok in ((50_000, True), (50_001, False), (0x7FFFFFFF, False)):
        frame = memoryview(head + struct.pack(">i", count) + bytes(100_000))
        header = parse_request_header(frame)
        if ok:
            assert len(decode_request(header, frame).topics or ()) == 50_000
            continue
        with pytest.raises(InvalidRequestError, match=f"topics: array of {count} elements"):
            decode_request(header, frame)
    # Metadata v12: a compact count; a topic is at least 18 bytes (topic id, an empty
    # compact name, no tagged fields), so 100 bytes hold 5 of them and not 6.
    head = encode_request(ApiKey.METADATA, 12, 1, "c", {"topics": []})[4:-4]
    for count, ok in ((5, True), (6, False)):
        body = bytes([count + 1]) + (bytes(16) + b"\x01\x00") * 5 + bytes(10)
        frame = memoryview(head + body)
        header = parse_request_header(frame)
        if ok:
            decoded = decode_request(header, frame)
            assert decoded.topics is not None and len(decoded.topics) == 5
            continue
        with pytest.raises(InvalidRequestError, match="topics: array of 6 elements"):
            decode_request(header, frame)
    # a tagged-field count no frame could hold (each is at least two bytes)
    head = encode_request(ApiKey.METADATA, 12, 1, "c", {"topics": []})[4:-4]
    frame = memoryview(head + b"\x01\x00\x00\xf0\xff\xff\xff\x0f" + bytes(8))
    header = parse_request_header(frame)
    with pytest.raises(InvalidRequestError, match="tagged fields are longer than the frame"):
        decode_request(header, frame)
    # int32 elements (OffsetFetch v7 partition indexes): 4 bytes each
    good = encode_request(
        ApiKey.OFFSET_FETCH, 7, 1, "c",
        {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [1, 2]}]},
    )  # fmt: skip
    frame = bytearray(frame_of(good))
    at = frame.rindex(b"\x03\x00\x00\x00\x01")  # the compact count 2 of [1, 2]
    frame[at] = 4  # claims 3 indexes, 9 bytes left
    header = parse_request_header(memoryview(frame))
    with pytest.raises(InvalidRequestError, match="partition_indexes: array of 3 elements"):
        decode_request(header, memoryview(frame))


def test_a_request_holds_at_most_max_request_elements() -> None:
    # The frame could hold more (a 10 MB Metadata v1 request names 5 M empty topics),
    # but decoding them would cost gigabytes: the arrays of one request share a budget.
    assert MAX_REQUEST_ELEMENTS == 100_000
    head = encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": []})[4:-4]
    for count in (MAX_REQUEST_ELEMENTS, MAX_REQUEST_ELEMENTS + 1, 5_000_000):
        frame = memoryview(head + struct.pack(">i", count) + bytes(2 * count))
        header = parse_request_header(frame)
        if count == MAX_REQUEST_ELEMENTS:
            assert len(decode_request(header, frame).topics or ()) == count
            continue
        with pytest.raises(InvalidRequestError, match="more than 100000 array elements"):
            decode_request(header, frame)
    # the budget is the whole request's: 2 topics of 60,000 partitions each exceed it
    topics = [{"name": f"t{i}", "partition_data": [{"index": 0}] * 60_000} for i in range(2)]
    frame = frame_of(encode_request(ApiKey.PRODUCE, 9, 1, "c", {"topic_data": topics[:1]}))
    assert len(decode_request(parse_request_header(frame), frame).topic_data) == 1
    frame = frame_of(encode_request(ApiKey.PRODUCE, 9, 1, "c", {"topic_data": topics}))
    with pytest.raises(InvalidRequestError, match="partition_data: more than 100000"):
        decode_request(parse_request_header(frame), frame)
    # responses (decoded by clients from their broker) have no such budget
    big = {
        "topics": [{"name": "t", "partitions": [{"partition_index": i} for i in range(150_000)]}]
    }
    data = encode_body(ApiKey.METADATA, 9, "response", big)
    assert len(decode_body(ApiKey.METADATA, 9, "response", data)[0].topics[0].partitions) == 150_000


def test_truncated_and_malformed_responses() -> None:
    header = RequestHeader(ApiKey.METADATA, 9, 3, None, 0)
    data = b"".join(bytes(c) for c in encode_response(header, sample(3, 9, "response")))
    with pytest.raises(CorruptResponseError, match="frame size"):
        decode_response(3, 9, data[:-1], framed=True)
    with pytest.raises(CorruptResponseError, match="MetadataResponse v9: field"):
        decode_response(3, 9, data[4:-1])


def test_encode_errors_name_the_field() -> None:
    header = RequestHeader(ApiKey.PRODUCE, 9, 1, None, 0)
    bad = {"responses": [{"name": "t", "partition_responses": [{"index": "zero"}]}]}
    with pytest.raises(TypeError, match=r"responses\[\]\.partition_responses\[\]\.index"):
        encode_response(header, bad)
    with pytest.raises(TypeError, match=r"responses\[\]\.name"):
        encode_response(header, {"responses": [{"name": None}]})
    # a non-ignorable field the version lacks must keep its default ...
    with pytest.raises(ValueError, match="preferred_read_replica is not in version 10"):
        encode_response(
            RequestHeader(ApiKey.FETCH, 10, 1, None, 0),
            {"responses": [{"topic": "t", "partitions": [{"preferred_read_replica": 2}]}]},
        )
    # ... while ignorable ones are dropped silently
    encode_response(
        RequestHeader(ApiKey.METADATA, 0, 1, None, 0),
        {"cluster_id": "abc", "controller_id": 1, "topics": []},
    )


def test_uuid_forms() -> None:
    u = uuid.UUID("f0e1d2c3-b4a5-9687-7869-5a4b3c2d1e0f")
    text = base64.urlsafe_b64encode(u.bytes)[:22].decode()
    for given in (u, text, u.bytes, str(u)):
        body = {"topics": [{"topic_id": given, "name": None}]}
        decoded, _ = decode_body(3, 12, "request", encode_body(3, 12, "request", body))
        assert decoded.topics[0].topic_id == text
    decoded, _ = decode_body(3, 12, "request", encode_body(3, 12, "request", {"topics": [{}]}))
    assert decoded.topics[0].topic_id == ZERO_UUID


def test_tagged_fields_known_and_unknown() -> None:
    # Fetch v12 request: ClusterId (tag 0) in the top-level tagged fields
    body = {"cluster_id": "the-cluster", "topics": []}
    data = encode_body(ApiKey.FETCH, 12, "request", body)
    decoded, _ = decode_body(ApiKey.FETCH, 12, "request", data)
    assert decoded.cluster_id == "the-cluster"
    # defaults are not written: no tagged fields -> one zero byte
    plain_data = encode_body(ApiKey.FETCH, 12, "request", {"topics": []})
    assert plain_data[-1] == 0 and len(data) > len(plain_data)
    # an unknown tag (5) is skipped
    spliced = plain_data[:-1] + b"\x01\x05\x03abc"
    decoded, end = decode_body(ApiKey.FETCH, 12, "request", spliced)
    assert end == len(spliced) and decoded.cluster_id is None
