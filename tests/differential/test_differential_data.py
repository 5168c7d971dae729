"""Kafka as the oracle for the data path: Produce, Fetch, ListOffsets,
DeleteRecords and InitProducerId (idempotent producers), at every version
both brokers serve."""

from __future__ import annotations

from typing import Any

import pytest

from pylog.errors import KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection

from .conftest import Brokers
from .diff_harness import TS, Oracle, Pair, Rule, batch, name, versions

ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def vr(brokers: Brokers, key: ApiKey, lo: int = 0) -> range:
    r = versions(brokers.kafka_versions, brokers.pylog_versions, key)
    assert len(r) > 0, f"{key.name}: no version both serve"
    return range(max(lo, r.start), r.stop)


def produce_body(
    topic: str,
    records: bytes,
    acks: int = -1,
    partition: int = 0,
    topic_id: str = "AAAAAAAAAAAAAAAAAAAAAA",
) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": topic,
                "topic_id": topic_id,
                "partition_data": [{"index": partition, "records": records}],
            }
        ],
    }


def produce_at(
    pair: Pair, version: int, topic: str, records: bytes, acks: int = -1, partition: int = 0
) -> Any:
    """A Produce body for ``version``: from v13 (KIP-516) the topic is named
    by its id, each broker's own (the zero id for a topic neither has)."""
    if version < 13:
        return produce_body(topic, records, acks, partition)
    ids = {side: topic_ids(c, [topic]).get(topic, ZERO) for side, c in
           (("kafka", pair.kafka), ("pylog", pair.pylog))}  # fmt: skip
    return lambda side: produce_body(topic, records, acks, partition, ids[side])


def topic_ids(conn: KafkaConnection, topics: list[str]) -> dict[str, str]:
    r = conn.request(
        ApiKey.METADATA, 12, {"topics": [{"name": t} for t in topics],
                              "allow_auto_topic_creation": False}
    )  # fmt: skip
    return {t.name: t.topic_id for t in r.topics}


# ---------------------------------------------------------------- Produce


def test_produce_at_every_version(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    """acks 1 and all, then the errors of a request: unknown topic (from v13
    an unknown topic id) and partition, acks 2, a batch of magic 2 where it is
    not allowed."""
    t = name("produce")
    oracle.create({t: 2})
    for v in vr(brokers, ApiKey.PRODUCE, lo=3):  # v3+: magic 2 batches
        for acks in (1, -1):
            oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"a", b"b"]), acks))
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"p1"]), 1, partition=1))
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"x"]), 1, partition=7))
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, name("produce-absent"), batch([b"x"])))
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"x"]), acks=2))
        if v >= 13:
            # an id neither broker gave any topic: UNKNOWN_TOPIC_ID
            stray = produce_body(t, batch([b"x"]), topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
            oracle.send(ApiKey.PRODUCE, v, stray)
    oracle.send(ApiKey.LIST_OFFSETS, 7, list_offsets_body(t, [-1]))
    oracle.verify()


def test_produce_acks_0_then_read_back(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    t = name("acks0")
    oracle.create({t: 1})
    for v in vr(brokers, ApiKey.PRODUCE, lo=3):
        pair.send_acks0(v, produce_at(pair, v, t, batch([f"v{v}".encode()]), acks=0))
    # a request after them on the same connections: answered once they are written
    oracle.send(ApiKey.LIST_OFFSETS, 7, list_offsets_body(t, [-1, -2]))
    oracle.send(ApiKey.FETCH, 12, fetch_body({t: 0}, 0))
    oracle.verify()


def test_produce_idempotent_sequences(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    """InitProducerId, then in-order, duplicate, gapped and stale-epoch
    batches: the producer id is each broker's own."""
    t = name("idem")
    oracle.create({t: 1})
    pids: dict[str, tuple[int, int]] = {}
    for v in vr(brokers, ApiKey.INIT_PRODUCER_ID):
        x = oracle.send(
            ApiKey.INIT_PRODUCER_ID,
            v,
            {"transactional_id": None, "transaction_timeout_ms": 60000,
             "producer_id": -1, "producer_epoch": -1},
            allow=[Rule("producer_id", "each broker allocates its own producer ids")],
        )  # fmt: skip
        pids = {
            "kafka": (x.kafka.producer_id, x.kafka.producer_epoch),
            "pylog": (x.pylog.producer_id, x.pylog.producer_epoch),
        }

    def send(seq: int, epoch_delta: int = 0, values: tuple[bytes, ...] = (b"i0", b"i1")) -> None:
        def body(side: str) -> dict[str, Any]:
            pid, epoch = pids[side]
            return produce_body(
                t,
                batch(list(values), producer_id=pid, producer_epoch=epoch + epoch_delta,
                      base_sequence=seq),
            )  # fmt: skip

        oracle.send(ApiKey.PRODUCE, 9, body)

    send(0)  # offsets 0-1
    send(0)  # a duplicate: its first answer again
    send(2, values=(b"i2",))  # in order
    send(5)  # a gap: OUT_OF_ORDER_SEQUENCE_NUMBER
    send(1)  # not the last batch, not in order
    send(3, epoch_delta=-1)  # an older epoch: INVALID_PRODUCER_EPOCH
    send(0, epoch_delta=1)  # a newer epoch from sequence 0: accepted
    oracle.send(
        ApiKey.FETCH,
        12,
        fetch_body({t: 0}, 0),
        allow=[
            Rule("**.records[*].producer_id", "each broker allocates its own producer ids"),
            Rule("**.records[*].crc", "the CRC covers the producer id"),
        ],
    )
    oracle.verify()


def test_produce_record_validation_errors(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    compacted, t = name("compacted"), name("validated")
    oracle.create({compacted: 1}, {"cleanup.policy": "compact"})
    oracle.create({t: 1}, {"message.timestamp.type": "CreateTime",
                           "message.timestamp.before.max.ms": "3600000"})  # fmt: skip
    for v in vr(brokers, ApiKey.PRODUCE, lo=3):
        # a compacted topic takes no record without a key
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, compacted, batch([b"nokey"])))
        # a timestamp too far in the past
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"old"], timestamps=[TS])))
    oracle.verify()


def test_produce_corrupt_batch(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    t = name("corrupt")
    oracle.create({t: 1})
    good = bytearray(batch([b"c"]))
    good[-1] ^= 0xFF  # the record's last byte: the CRC no longer matches
    for v in vr(brokers, ApiKey.PRODUCE, lo=3):
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, bytes(good)))
    oracle.verify()


# ---------------------------------------------------------------- Fetch


def fetch_body(
    partitions: dict[str, int],
    offset: int,
    *,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    ids: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": t,
                "topic_id": (ids or {}).get(t, "AAAAAAAAAAAAAAAAAAAAAA"),
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": -1,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
            for t, p in partitions.items()
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def _fetch(pair: Pair, topics: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    return topic_ids(pair.kafka, topics), topic_ids(pair.pylog, topics)


def test_fetch_at_every_version(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    """From the start, from the middle of a batch, past the end, a byte limit
    smaller than a batch, both isolation levels, an unknown partition."""
    t = name("fetch")
    oracle.create({t: 1})
    for i in range(3):
        oracle.send(
            ApiKey.PRODUCE, 9, produce_body(t, batch([b"f%d-%d" % (i, j) for j in range(3)]))
        )
    kids, pids = _fetch(pair, [t])
    for v in vr(brokers, ApiKey.FETCH):

        def at(offset: int, **kw: Any) -> Any:
            # v13+ names topics by id: each broker's own
            return lambda side: fetch_body(
                {t: 0}, offset, ids=kids if side == "kafka" else pids, **kw
            )

        oracle.send(ApiKey.FETCH, v, at(0))
        oracle.send(ApiKey.FETCH, v, at(4))
        oracle.send(ApiKey.FETCH, v, at(9))
        oracle.send(ApiKey.FETCH, v, at(10))  # OFFSET_OUT_OF_RANGE
        oracle.send(ApiKey.FETCH, v, at(-5))
        oracle.send(ApiKey.FETCH, v, at(0, max_bytes=1, partition_max_bytes=1))
        oracle.send(ApiKey.FETCH, v, at(3, partition_max_bytes=80))
        if v >= 4:
            oracle.send(ApiKey.FETCH, v, at(0, isolation_level=1))
        if v < 13:
            oracle.send(ApiKey.FETCH, v, fetch_body({t: 0, name("fetch-absent"): 0}, 0))
            oracle.send(ApiKey.FETCH, v, fetch_body({t: 3}, 0))
    oracle.verify()


# ---------------------------------------------------------------- ListOffsets


def list_offsets_body(
    topic: str, timestamps: list[int], isolation_level: int = 0
) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": i, "current_leader_epoch": -1, "timestamp": ts}
                    for i, ts in enumerate(timestamps)
                ],
            }
        ],
    }


def test_list_offsets_at_every_version(brokers: Brokers, oracle: Oracle) -> None:
    t = name("offsets")
    oracle.create({t: 4})
    for p in range(4):
        for i in range(2):
            stamps = [TS + 100 * i + d for d in (0, 50, 10)]
            oracle.send(
                ApiKey.PRODUCE, 9, produce_body(t, batch([b"o1", b"o2", b"o3"], timestamps=stamps),
                                                partition=p)
            )  # fmt: skip
    for v in vr(brokers, ApiKey.LIST_OFFSETS):
        # latest, earliest, a timestamp inside, one past every record
        oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-1, -2, TS + 60, TS + 10_000]))
        if v >= 2:
            oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-1, -2], isolation_level=1))
        if v >= 8:  # EARLIEST_LOCAL (-4) of KIP-405
            oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-4]))
        if v >= 9:  # LATEST_TIERED (-5) of KIP-1005: no remote storage here
            oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-5]))
        if v >= 11:  # EARLIEST_PENDING_UPLOAD (-6) of KIP-1023
            oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-6, -2]))
    oracle.send(ApiKey.LIST_OFFSETS, 7, list_offsets_body(name("offsets-absent"), [-1]))
    bad = list_offsets_body(t, [-1])
    bad["topics"][0]["partitions"][0]["partition_index"] = 9
    oracle.send(ApiKey.LIST_OFFSETS, 7, bad)
    oracle.verify()


def test_list_offsets_max_timestamp(brokers: Brokers, oracle: Oracle) -> None:
    t = name("maxts")
    oracle.create({t: 1})
    oracle.send(
        ApiKey.PRODUCE, 9, produce_body(t, batch([b"m1", b"m2", b"m3"],
                                                 timestamps=[TS, TS + 50, TS + 10]))
    )  # fmt: skip
    for v in vr(brokers, ApiKey.LIST_OFFSETS, lo=7):
        oracle.send(ApiKey.LIST_OFFSETS, v, list_offsets_body(t, [-3]))
    oracle.verify()


# ---------------------------------------------------------------- DeleteRecords


def test_delete_records(brokers: Brokers, oracle: Oracle) -> None:
    for v in vr(brokers, ApiKey.DELETE_RECORDS):
        t = name(f"dr{v}")
        oracle.create({t: 3})
        for p in range(3):
            oracle.send(ApiKey.PRODUCE, 9, produce_body(t, batch([b"d"] * 5), partition=p))
        body = {
            "topics": [
                {
                    "name": t,
                    "partitions": [
                        {"partition_index": 0, "offset": 2},
                        {"partition_index": 1, "offset": -1},  # the high watermark
                        {"partition_index": 2, "offset": 9},  # past it
                        {"partition_index": 5, "offset": 1},
                    ],
                },
                {
                    "name": name(f"dr{v}-absent"),
                    "partitions": [{"partition_index": 0, "offset": 1}],
                },
            ],
            "timeout_ms": 30000,
        }
        oracle.send(ApiKey.DELETE_RECORDS, v, body)
        oracle.send(ApiKey.LIST_OFFSETS, 7, list_offsets_body(t, [-2, -2, -2]))
        oracle.send(ApiKey.FETCH, 12, fetch_body({t: 0}, 0))
    oracle.verify()


def _legacy(magic: int) -> bytes:
    """Two records in a magic 0 or 1 message set, as a pre-0.11 client sends."""
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=TS if magic else None, key=b"k", value=b"v")
    b.append(1, timestamp=TS + 1 if magic else None, key=None, value=b"w")
    return bytes(b.build())


def test_produce_v3_takes_one_magic_2_batch(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    """Legacy message sets, two batches, no batch: INVALID_RECORD from v3."""
    t = name("one-batch")
    oracle.create({t: 1})
    for v in vr(brokers, ApiKey.PRODUCE, lo=3):
        for records in (_legacy(0), _legacy(1), batch([b"a"]) + batch([b"b"]), b""):
            oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, records))
        oracle.send(ApiKey.PRODUCE, v, produce_at(pair, v, t, batch([b"ok"])))
    oracle.send(ApiKey.LIST_OFFSETS, 7, list_offsets_body(t, [-1]))
    oracle.verify()


def test_produce_below_v3_is_a_documented_difference(brokers: Brokers) -> None:
    """Kafka 4 advertises Produce v0-2 (librdkafka before 2.11.1 turns
    compression off without them) but closes the connection on one; pylog, a
    ZooKeeper-era broker, still serves them (docs/compatibility.md)."""
    t = name("v0")
    with brokers.pair() as pair:
        Oracle(pair).create({t: 1})
    for v in range(3):
        with KafkaConnection(brokers.kafka, timeout=30) as c:
            c.send(ApiKey.PRODUCE, v, produce_body(t, _legacy(min(v, 1))))
            with pytest.raises(KafkaError, match="closed the connection"):
                c.recv(ApiKey.PRODUCE, v)
        with KafkaConnection(brokers.pylog, timeout=30) as c:
            r = c.request(ApiKey.PRODUCE, v, produce_body(t, _legacy(min(v, 1))))
            assert r.responses[0].partition_responses[0].error_code == 0
