"""The differential harness: one request, sent to Apache Kafka and to pylog,
both responses decoded by pylog's own typed codec, then compared field by field.

Apache Kafka (KRaft combined mode, bench/kafka_peer.py's KafkaPeer, the jars
`make kafka` fetches) is the oracle. A difference is a path into the response
(``topics[0].partitions[0].error_code``) with Kafka's and pylog's values;
before comparing, both responses are normalised the same way:

- lists of structs are sorted by their key fields (topic name, partition
  index, group id, ...): Kafka answers in hash-map order where the protocol
  promises no order;
- record batches (``records`` fields) are split into their header fields and
  records, so a difference names the batch field, not a byte offset;
- the values in ``EXPECTED`` are replaced by a placeholder on both sides when
  both are present — ids and ports that differ by construction, throttle times,
  free-text error messages. A placeholder still tells "absent" from "present"
  (a null error message against a text one is still a difference).

A scenario may add its own ``allow`` rules (a path pattern and why); every rule
names its reason, which docs/compatibility.md repeats.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pylog import _native
from pylog.protocol import ApiKey
from pylog.protocol._spec import FieldSpec, MessageSpec, load_message
from pylog.protocol._struct import Struct
from pylog.protocol._versions import SCHEMA_NAMES
from pylog.protocol.client import KafkaConnection

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

ApiKeyNames = dict[int, str]

# Both brokers: the same settings wherever a default differs or a test relies
# on one. Auto-creation is off so a Metadata for an unknown topic answers
# UNKNOWN_TOPIC_OR_PARTITION on both (the Metadata scenarios turn it on by request).
CONFIG = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.segment.delete.delay.ms": "1000",
}


@dataclass(frozen=True)
class Rule:
    """Values at paths matching ``pattern`` are not compared, only whether
    each side has one. The pattern is a glob over the path: ``[*]`` is any list
    element, ``*`` any part of one name, a leading ``**.`` any prefix
    (``**.throttle_time_ms``, ``topics[*].configs[name=remote.storage.enable]``)."""

    pattern: str
    why: str
    #: False: not compared at all, present on one side only included.
    presence: bool = True

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        body = self.pattern
        prefix = ""
        if body.startswith("**."):
            prefix, body = r"(?:.*\.)?", body[3:]
        rx = re.escape(body).replace(r"\[\*\]", r"\[[^\]]*\]").replace(r"\*", r"[^.\[]*")
        return re.compile(prefix + rx)

    def matches(self, path: str) -> bool:
        return self.regex.fullmatch(path) is not None


# The expected differences of every response: each differs by construction
# between two independently started brokers. docs/compatibility.md lists them.
EXPECTED: tuple[Rule, ...] = (
    Rule("**.throttle_time_ms", "throttle times depend on quotas and load, not on the request"),
    Rule("**.cluster_id", "each cluster generates its own id"),
    Rule("**.topic_id", "topic ids are random UUIDs (compared: zero or not)"),
    Rule("**.port", "each broker listens on its own ephemeral port"),
    Rule("**.error_message", "Kafka's error messages are free text (compared: null or not)"),
    Rule("**.batch_index_error_message", "free text, as error_message"),
    Rule(
        "**.member_id",
        "member ids are <client id>-<random UUID> (compared: the client-id prefix)",
    ),
    Rule("**.leader", "the leader is a member id (compared: the client-id prefix)"),
    Rule("**.session_id", "fetch session ids are random"),
)


@dataclass
class Difference:
    path: str
    kafka: Any
    pylog: Any

    def __str__(self) -> str:
        return f"{self.path}: Kafka {self.kafka!r}, pylog {self.pylog!r}"


# Fields that identify an element of a list: lists of structs are sorted by the
# first of these each element has.
_KEYS = (
    "name",
    "topic",
    "topic_name",
    "partition_index",
    "partition",
    "group_id",
    "resource_type",
    "resource_name",
    "api_key",
    "node_id",
    "broker_id",
    "key",
    "config_name",
    "partition_id",
    "entity",
)


def _key(d: dict[str, Any]) -> tuple[Any, ...]:
    """The identifying fields of a normalised struct, () when it has none
    (a list-valued one, as a quota entity, by its text)."""
    return tuple(
        (k, repr(d[k]) if isinstance(d[k], (list, dict)) else d[k]) for k in _KEYS if k in d
    )


def _sortable(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((k, (0, "") if v is None else (1, v)) for k, v in key)


_BATCH_HEADER = struct.Struct(">qiiBIhiqqqhii")


def split_batches(data: bytes | memoryview | None) -> Any:
    """A records field as a list of batches, each its header fields and records."""
    if data is None:
        return None
    raw = bytes(data)
    out: list[dict[str, Any]] = []
    pos = 0
    while pos + 12 <= len(raw):
        (length,) = struct.unpack_from(">i", raw, pos + 8)
        end = pos + 12 + length
        if end > len(raw):
            out.append({"partial_batch_bytes": len(raw) - pos})
            break
        batch = raw[pos:end]
        magic = batch[16]
        if magic != 2:
            out.append({"magic": magic, "bytes": batch.hex()})
            pos = end
            continue
        (
            base_offset,
            _length,
            leader_epoch,
            _magic,
            crc,
            attributes,
            last_delta,
            first_ts,
            max_ts,
            pid,
            epoch,
            base_seq,
            count,
        ) = _BATCH_HEADER.unpack_from(batch, 0)
        records = [
            {
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": r.key,
                "value": r.value,
                "headers": r.headers,
            }
            for r in _native.decode_records(batch)
        ]
        out.append(
            {
                "base_offset": base_offset,
                "partition_leader_epoch": leader_epoch,
                "crc": crc,
                "attributes": attributes,
                "last_offset_delta": last_delta,
                "base_timestamp": first_ts,
                "max_timestamp": max_ts,
                "producer_id": pid,
                "producer_epoch": epoch,
                "base_sequence": base_seq,
                "record_count": count,
                "records": records,
            }
        )
        pos = end
    return out


def normalise(value: Any) -> Any:
    """Plain data in a canonical order: structs as dicts, records as batches."""
    if isinstance(value, Struct):
        out: dict[str, Any] = {}
        for name in value._fields:
            v = getattr(value, name)
            out[name] = split_batches(v) if name == "records" else normalise(v)
        return out
    if isinstance(value, list):
        items = [normalise(v) for v in value]
        if items and all(isinstance(v, dict) and _key(v) for v in items):
            items.sort(key=lambda d: _sortable(_key(d)))
        return items
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def _placeholder(path: str, value: Any) -> Any:
    """What a value under an expected-difference rule compares as."""
    if value is None:
        return None
    leaf = path.rsplit(".", 1)[-1]
    if leaf in ("topic_id", "topic_uuid"):
        return "<zero uuid>" if value == ZERO_UUID else "<uuid>"
    if leaf in ("member_id", "leader"):
        # <client id>-<uuid>: the client-id part is Kafka's rule
        m = re.fullmatch(
            r"(.*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", value
        )
        return (
            f"{m.group(1)}-<uuid>" if m else ("" if value == "" else f"<not client-uuid: {value}>")
        )
    if leaf in ("error_message", "batch_index_error_message"):
        return "<text>" if value else value
    return "<any>"


def diff(kafka: Any, pylog: Any, allow: Iterable[Rule] = (), path: str = "") -> list[Difference]:
    """The differences between two normalised responses, outside the rules."""
    rules = (*allow, *EXPECTED)  # a scenario's own rules first
    out: list[Difference] = []
    _diff(normalise(kafka), normalise(pylog), rules, path, out)
    return out


def _diff(k: Any, p: Any, rules: tuple[Rule, ...], path: str, out: list[Difference]) -> None:
    rule = next((r for r in rules if r.matches(path)), None) if path else None
    if rule is not None and not rule.presence:
        return
    if rule is not None:
        k, p = _placeholder(path, k), _placeholder(path, p)
        if k != p:
            out.append(Difference(path, k, p))
        return
    if isinstance(k, dict) and isinstance(p, dict):
        for name in k.keys() | p.keys():
            sub = f"{path}.{name}" if path else name
            _diff(k.get(name), p.get(name), rules, sub, out)
        return
    if isinstance(k, list) and isinstance(p, list):
        keyed = [_key(v) if isinstance(v, dict) else () for v in (*k, *p)]
        if keyed and all(keyed):
            # matched by key: an element one side lacks is one difference, not a shift
            kk = {_key(v): v for v in k}
            pk = {_key(v): v for v in p}
            if len(kk) == len(k) and len(pk) == len(p):
                for key in sorted(kk.keys() | pk.keys(), key=_sortable):
                    sub = f"{path}[{','.join(f'{n}={v}' for n, v in key)}]"
                    one_sided = key not in pk or key not in kk
                    if one_sided and any(r.matches(sub) and not r.presence for r in rules):
                        continue
                    if key not in pk:
                        out.append(Difference(sub, _short(kk[key]), "<absent>"))
                    elif key not in kk:
                        out.append(Difference(sub, "<absent>", _short(pk[key])))
                    else:
                        _diff(kk[key], pk[key], rules, sub, out)
                return
        for i in range(max(len(k), len(p))):
            sub = f"{path}[{i}]"
            if (i >= len(k) or i >= len(p)) and any(
                r.matches(sub) and not r.presence for r in rules
            ):
                continue
            if i >= len(k):
                out.append(Difference(sub, "<absent>", _short(p[i])))
            elif i >= len(p):
                out.append(Difference(sub, _short(k[i]), "<absent>"))
            else:
                _diff(k[i], p[i], rules, sub, out)
        return
    if k != p:
        out.append(Difference(path, _short(k), _short(p)))


def _short(v: Any) -> Any:
    text = repr(v)
    return v if len(text) <= 300 else text[:300] + "..."


# ---------------------------------------------------------------- both brokers


@dataclass
class Exchange:
    """One request's two answers and their differences."""

    api: str
    version: int
    kafka: Any
    pylog: Any
    differences: list[Difference] = field(default_factory=list)

    def describe(self) -> str:
        lines = [f"{self.api} v{self.version}: {len(self.differences)} difference(s)"]
        lines += [f"  {d}" for d in self.differences]
        return "\n".join(lines)


class Pair:
    """A connection to each broker; every request goes to both."""

    def __init__(
        self, kafka_bootstrap: str, pylog_bootstrap: str, client_id: str = "differential"
    ) -> None:
        self.kafka = KafkaConnection(kafka_bootstrap, client_id=client_id, timeout=60)
        self.pylog = KafkaConnection(pylog_bootstrap, client_id=client_id, timeout=60)

    def close(self) -> None:
        self.kafka.close()
        self.pylog.close()

    def __enter__(self) -> Pair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self,
        api_key: int,
        version: int,
        body: Any,
        allow: Iterable[Rule] = (),
    ) -> Exchange:
        """``body``: the request (a typed message or a mapping), or a function of
        the broker's name ("kafka" / "pylog") giving it — for requests that
        carry what the broker answered before (member ids, producer ids).
        PYLOG_DIFFERENTIAL_TRACE=1 prints every request as it is sent."""
        answers = []
        for name, conn in (("kafka", self.kafka), ("pylog", self.pylog)):
            b = body(name) if callable(body) else body
            if isinstance(b, Mapping):
                b = fit(api_key, version, b)
            if os.environ.get("PYLOG_DIFFERENTIAL_TRACE"):
                print(name, ApiKey(api_key).name, version, b, flush=True)
            answers.append(conn.request(api_key, version, b))
        k, p = answers
        return Exchange(ApiKey(api_key).name, version, k, p, diff(k, p, allow))

    def send_acks0(self, version: int, body: Any) -> None:
        """A Produce with acks=0: no response comes back from either broker.
        ``body`` may be a function of the broker's name, as for ``Oracle.send``."""
        for side, conn in (("kafka", self.kafka), ("pylog", self.pylog)):
            conn.send(ApiKey.PRODUCE, version, body(side) if callable(body) else body)


def both(fn: Callable[[KafkaConnection, str], Any], pair: Pair) -> tuple[Any, Any]:
    """Run ``fn(connection, broker name)`` against each broker."""
    return fn(pair.kafka, "kafka"), fn(pair.pylog, "pylog")


def versions(
    kafka_api_versions: Mapping[int, tuple[int, int]],
    pylog_api_versions: Mapping[int, tuple[int, int]],
    api_key: int,
) -> range:
    """Every version of ``api_key`` both brokers advertise."""
    k = kafka_api_versions.get(api_key)
    p = pylog_api_versions.get(api_key)
    if k is None or p is None:
        return range(0)
    return range(max(k[0], p[0]), min(k[1], p[1]) + 1)


@functools.cache
def _request_spec(api_key: int) -> MessageSpec:
    return load_message(f"{SCHEMA_NAMES[api_key]}Request.json")


def fit(api_key: int, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` without the fields ``version`` of the request lacks (nested too):
    one request written once, sent at every version."""
    return _fit(_request_spec(api_key).fields, version, body)


def _fit(fields: list[FieldSpec], version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    specs = {f.name: f for f in fields}
    out: dict[str, Any] = {}
    for name, value in body.items():
        spec = specs.get(name)
        if spec is None:
            raise KeyError(f"no field {name!r}")
        if version not in spec.versions:
            continue
        if spec.fields is not None and value is not None:
            if spec.is_array:
                value = [_fit(spec.fields, version, v) for v in value]
            else:
                value = _fit(spec.fields, version, value)
        out[name] = value
    return out


# ---------------------------------------------------------------- what a scenario uses

#: Every topic and group name of a session ends with this: scenarios may run
#: again against brokers that are still up (PYLOG_DIFFERENTIAL_BROKERS).
SUFFIX = uuid.uuid4().hex[:6]

#: A fixed record timestamp (2023-11-14), so both brokers store the same batch.
TS = 1_700_000_000_000


def name(base: str) -> str:
    return f"{base}-{SUFFIX}"


def batch(
    values: list[bytes],
    *,
    key: bytes | None = None,
    timestamps: list[int] | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression: int = 0,
) -> bytes:
    """One v2 batch of ``values`` as a producer sends it (base offset 0)."""
    stamps = timestamps or [TS + i for i in range(len(values))]
    return _native.build_batch(
        [(key, v, [], ts) for v, ts in zip(values, stamps, strict=True)],
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


class Oracle:
    """Sends every request to both brokers and keeps each exchange's
    differences; ``verify()`` fails the test with all of them."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.exchanges: list[Exchange] = []

    def send(self, api_key: int, version: int, body: Any, allow: Iterable[Rule] = ()) -> Exchange:
        x = self.pair.send(api_key, version, body, allow)
        self.exchanges.append(x)
        return x

    def sweep(
        self,
        api_key: int,
        vrange: Iterable[int],
        body: Callable[[int], Any],
        allow: Iterable[Rule] = (),
    ) -> list[Exchange]:
        """The request ``body(version)`` at every version of ``vrange``."""
        return [self.send(api_key, v, body(v), allow) for v in vrange]

    def settle(self, api_key: int, version: int, body: Any, timeout: float = 10) -> None:
        """Until Kafka answers ``body`` the same twice 0.3 s apart: KRaft answers
        an admin request once its controller has committed it, and the broker's
        own view (configs, offsets) follows a moment later. Not compared."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            now = normalise(self.pair.kafka.request(api_key, version, body))
            if now == last:
                return
            last = now
            time.sleep(0.3)

    def differences(self) -> list[str]:
        return [x.describe() for x in self.exchanges if x.differences]

    def verify(self) -> None:
        bad = self.differences()
        if bad:
            raise AssertionError(
                f"{len(bad)} of {len(self.exchanges)} exchanges differ from Kafka:\n"
                + "\n".join(bad)
            )
        assert self.exchanges, "the scenario sent nothing"

    def wait_topics(self, topics: Mapping[str, int], timeout: float = 30) -> None:
        """Until Metadata on both brokers shows every topic with its partitions
        led: Kafka answers CreateTopics before its metadata cache has them."""
        deadline = time.monotonic() + timeout
        for conn in (self.pair.kafka, self.pair.pylog):
            while True:
                r = conn.request(
                    ApiKey.METADATA,
                    12,
                    {"topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False},
                )
                ready = {
                    t.name
                    for t in r.topics
                    if t.error_code == 0
                    and len(t.partitions) == topics[t.name]
                    and all(p.leader_id >= 0 for p in t.partitions)
                }
                if ready == set(topics) and self._leading(conn, topics):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"topics not ready: {r}")
                time.sleep(0.05)

    @staticmethod
    def _leading(conn: KafkaConnection, topics: Mapping[str, int]) -> bool:
        """Whether ListOffsets is answered for every partition: KRaft Kafka's
        metadata shows a leader a moment before its replica manager leads."""
        r = conn.request(
            ApiKey.LIST_OFFSETS,
            7,
            {
                "replica_id": -1,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": i, "timestamp": -1}
                                               for i in range(n)]}
                    for t, n in topics.items()
                ],
            },
        )  # fmt: skip
        return all(p.error_code == 0 for t in r.topics for p in t.partitions)

    def until(
        self, api_key: int, version: int, body: Any, ok: Callable[[Any], bool], timeout: float = 30
    ) -> None:
        """Until each side's answer to ``body`` satisfies ``ok`` (a coordinator
        created on demand, or one that moved or reloaded after topic changes):
        waits, never compares. Both sides: a scenario that waited on Kafka
        alone depended on an earlier test having readied pylog."""
        for side, conn in (("Kafka", self.pair.kafka), ("pylog", self.pair.pylog)):
            deadline = time.monotonic() + timeout
            while not ok(conn.request(api_key, version, body)):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{side} never answered {body} as wanted")
                time.sleep(0.2)

    def create(self, topics: Mapping[str, int], configs: Mapping[str, str] | None = None) -> None:
        """Create topics on both (not compared: the scenario's set-up)."""
        body = {
            "topics": [
                {
                    "name": t,
                    "num_partitions": n,
                    "replication_factor": 1,
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
                for t, n in topics.items()
            ],
            "timeout_ms": 30000,
        }
        for conn in (self.pair.kafka, self.pair.pylog):
            r = conn.request(ApiKey.CREATE_TOPICS, 7, body)
            assert all(t.error_code == 0 for t in r.topics), r
        self.wait_topics(topics)
