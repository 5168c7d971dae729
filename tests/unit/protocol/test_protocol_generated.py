"""The generated message modules (``pylog/protocol/messages/``): they are what the
generator writes from the JSON definitions today, and every function in them, for
every version a definition has (served or not, headers too), round-trips typed
objects through encode and decode, on the fast path and on the tracking one."""

from __future__ import annotations

import base64
import importlib
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pylog.protocol import (
    REQUEST_CLASSES,
    RESPONSE_CLASSES,
    ApiKey,
    RequestHeader,
    Struct,
    decode_request,
    encode_request,
    encode_response,
    parse_request_header,
)
from pylog.protocol import messages as messages_pkg
from pylog.protocol._runtime import FieldFailure
from pylog.protocol._spec import FieldSpec, MessageSpec, load_message
from pylog.protocol.generator import MESSAGES_DIR, definition_files, render, stale, write
from pylog.protocol.messages import FetchResponse, ProduceRequest
from pylog.protocol.messages.produce_request import PartitionProduceData, TopicProduceData


def test_checked_in_modules_are_what_the_generator_writes() -> None:
    assert stale() == [], "the generated modules are stale: run `make protocol`"


def test_generator_writes_every_module_and_removes_leftovers(tmp_path: Path) -> None:
    (tmp_path / "leftover.py").write_text("x = 1\n")
    written = write(tmp_path)
    assert "leftover.py" in written and not (tmp_path / "leftover.py").exists()
    assert sorted(p.name for p in tmp_path.glob("*.py")) == sorted(render())
    for path in tmp_path.glob("*.py"):
        assert path.read_text("utf-8") == (MESSAGES_DIR / path.name).read_text("utf-8")
    assert write(tmp_path) == [] and stale(tmp_path) == []


# --- every function of every module ---------------------------------------------------------


def definitions() -> list[Any]:
    return [pytest.param(name, id=name.removesuffix(".json")) for name in definition_files()]


def module_of(spec: MessageSpec) -> ModuleType:
    from pylog.protocol._codegen import module_name

    return importlib.import_module(f"{messages_pkg.__name__}.{module_name(spec)}")


class Build:
    """Typed objects with a distinct non-default value in every field of a version,
    or (``nulls``) null in every nullable field and empty arrays."""

    def __init__(self, module: ModuleType, version: int, nulls: bool) -> None:
        self.module, self.version, self.nulls, self.n = module, version, nulls, 0

    def struct(self, name: str, fields: list[FieldSpec]) -> Struct:
        values = {f.name: self.value(f) for f in fields if self.version in f.versions}
        obj: Struct = getattr(self.module, name)(**values)
        return obj

    def value(self, f: FieldSpec) -> Any:
        nullable = self.version in f.nullable
        if f.is_array:
            if self.nulls:
                return None if nullable else []
            if f.fields is not None:
                return [self.struct(f.type, f.fields) for _ in range(2)]
            return [self.scalar(f.type) for _ in range(2)]
        if f.fields is not None:
            if self.nulls and (nullable or self.version in f.tagged):
                return None
            return self.struct(f.type, f.fields)
        if self.nulls and nullable:
            return None
        return self.scalar(f.type)

    def scalar(self, t: str) -> Any:
        self.n += 1
        n = self.n
        values = {
            "bool": n % 2 == 1,
            "int8": n % 100,
            "int16": 1000 + n,
            "uint16": 1000 + n,
            "int32": 100_000 + n,
            "uint32": 100_000 + n,
            "int64": 10_000_000_000 + n,
            "float64": n + 0.25,
            "string": f"s{n}-ü",
            "bytes": bytes([n % 256]) * 3,
            "records": b"rec-" + str(n).encode() * 3,
            "uuid": base64.urlsafe_b64encode(uuid.UUID(int=n * 7919 + 1).bytes)[:22].decode(),
        }
        return values[t]


def same(decoded: Any, built: Any, fields: list[FieldSpec] | None, version: int) -> None:
    """``decoded`` holds ``built``'s value in every field of ``version``."""
    if fields is None or built is None:
        assert decoded == built
        return
    assert type(decoded) is type(built)
    for f in fields:
        if version not in f.versions:
            continue
        d, b = getattr(decoded, f.name), getattr(built, f.name)
        if f.is_array and b is not None:
            assert len(d) == len(b), f.name
            for x, y in zip(d, b, strict=True):
                same(x, y, f.fields, version)
        else:
            same(d, b, f.fields, version)


@pytest.mark.parametrize("file_name", definitions())
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_every_version_round_trips_typed_objects(file_name: str, nulls: bool) -> None:
    spec = load_message(file_name)
    module = module_of(spec)
    assert module.MESSAGE.__name__ == spec.name
    assert (spec.valid.low, spec.valid.high) == module.VALID_VERSIONS
    for version in range(spec.valid.low, spec.valid.high + 1):
        built = Build(module, version, nulls).struct(spec.name, spec.fields)
        chunks: list[Any] = []
        chunks.append(module.ENCODERS[version](built, bytearray(), chunks))
        data = b"".join(bytes(c) for c in chunks)
        tracked: list[Any] = []
        tracked.append(module.TRACKING_ENCODERS[version](built, bytearray(), tracked))
        assert b"".join(bytes(c) for c in tracked) == data
        # the mapping form of the same body encodes to the same bytes
        assert encode_plain(module, version, built.to_dict()) == data
        view = memoryview(data)
        decoded, end = module.DECODERS[version](view, 0)
        assert end == len(data)
        assert isinstance(decoded, module.MESSAGE)
        same(decoded, built, spec.fields, version)
        assert module.TRACKING_DECODERS[version](view, 0) == (decoded, end)
        if len(data) > 1:
            with pytest.raises(FieldFailure):
                module.TRACKING_DECODERS[version](view[: len(data) - 1], 0)


def encode_plain(module: ModuleType, version: int, body: dict[str, Any]) -> bytes:
    chunks: list[Any] = []
    chunks.append(module.ENCODERS[version](body, bytearray(), chunks))
    return b"".join(bytes(c) for c in chunks)


# --- the typed API ---------------------------------------------------------------------------


def test_classes_by_api_key() -> None:
    assert REQUEST_CLASSES[ApiKey.PRODUCE] is ProduceRequest
    assert RESPONSE_CLASSES[ApiKey.FETCH] is FetchResponse
    assert set(REQUEST_CLASSES) == set(RESPONSE_CLASSES)


def test_a_request_built_from_classes_decodes_to_the_same_classes() -> None:
    body = ProduceRequest(
        acks=-1,
        timeout_ms=500,
        topic_data=[
            TopicProduceData(
                name="t",
                partition_data=[PartitionProduceData(index=1, records=memoryview(b"abc"))],
            )
        ],
    )
    frame = memoryview(encode_request(ApiKey.PRODUCE, 9, 5, "c", body))[4:]
    req = decode_request(parse_request_header(frame), frame)
    assert isinstance(req, ProduceRequest)
    assert req == body and req.topic_data[0].partition_data[0].records == b"abc"
    assert ProduceRequest().topic_data == [] and ProduceRequest().transactional_id is None


def test_responses_encode_from_classes_and_mappings_alike() -> None:
    from pylog.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

    header = RequestHeader(ApiKey.FETCH, 12, 3, "c", 0)
    typed = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t", partitions=[PartitionData(partition_index=0, records=b"xyz")]
            )
        ]
    )
    mapping = {
        "responses": [{"topic": "t", "partitions": [{"partition_index": 0, "records": b"xyz"}]}]
    }
    as_bytes = [b"".join(bytes(c) for c in encode_response(header, b)) for b in (typed, mapping)]
    assert as_bytes[0] == as_bytes[1]
