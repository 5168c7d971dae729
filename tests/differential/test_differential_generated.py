"""Generated scenarios: seeded random requests, the same to both brokers.
PYLOG_DIFFERENTIAL_SEED picks another seed (the failure message names the one
used); each test draws a bounded number of requests."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import TS, Oracle, Pair, Rule, batch, name, versions
from .test_differential_admin import MIN_ISR_RULES, TOPIC_CONFIG_RULES
from .test_differential_data import fetch_body, list_offsets_body, produce_body, topic_ids

SEED = int(os.environ.get("PYLOG_DIFFERENTIAL_SEED", "13"))


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def test_random_produce_fetch_list_offsets(brokers: Brokers, oracle: Oracle, pair: Pair) -> None:
    rng = random.Random(SEED)
    t = name(f"gen-{SEED}")
    oracle.create({t: 3})
    kids, pids = topic_ids(pair.kafka, [t]), topic_ids(pair.pylog, [t])
    fetch_v = versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.FETCH)
    list_v = versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.LIST_OFFSETS)
    produce_v = range(3, versions(brokers.kafka_versions, brokers.pylog_versions,
                                  ApiKey.PRODUCE).stop)  # fmt: skip
    ends = [0, 0, 0]
    for _ in range(60):
        op = rng.choice(("produce", "produce", "fetch", "list"))
        partition = rng.choice((0, 1, 2, 2, 5))
        if op == "produce":
            n = rng.randint(1, 5)
            stamps = [TS + rng.randint(-1000, 1000) for _ in range(n)]
            key = rng.choice((None, b"k", os.urandom(8)))
            values = [rng.randbytes(rng.randint(0, 300)) for _ in range(n)]
            records = batch(values, key=key, timestamps=stamps, compression=rng.randint(0, 4))
            pv, acks = rng.choice(produce_v), rng.choice((1, -1))
            # v13+ names the topic by id (KIP-516): each broker's own
            oracle.send(ApiKey.PRODUCE, pv,
                        lambda side, pv=pv, r=records, a=acks, p=partition: produce_body(
                            t, r, a, p, (kids if side == "kafka" else pids)[t]
                            if pv >= 13 else "AAAAAAAAAAAAAAAAAAAAAA"))  # fmt: skip
            if partition < 3:
                ends[partition] += n
        elif op == "fetch":
            v = rng.choice(fetch_v)
            end = ends[partition] if partition < 3 else 0
            offset = rng.choice((0, rng.randint(0, end + 2), end, -1))
            limit = rng.choice((1, 64, 300, 1 << 20))
            level = rng.choice((0, 1))
            oracle.send(
                ApiKey.FETCH,
                v,
                lambda side, p=partition, o=offset, lim=limit, lv=level: fetch_body(
                    {t: p}, o, partition_max_bytes=lim,
                    ids=kids if side == "kafka" else pids,
                    isolation_level=lv,
                ),
            )  # fmt: skip
        else:
            stamp = rng.choice((-1, -2, TS + rng.randint(-1500, 1500)))
            body = list_offsets_body(t, [stamp])
            body["topics"][0]["partitions"][0]["partition_index"] = partition
            oracle.send(ApiKey.LIST_OFFSETS, rng.choice(list_v), body)
    try:
        oracle.verify()
    except AssertionError as e:
        raise AssertionError(f"seed {SEED}: {e}") from None


# Values either broker may refuse: a topic with two or more of them (or a bad
# name, partition count or replication factor besides) is refused by both, but
# for the first check that fails — and KRaft checks configs, then the
# replication factor, then the partition count, where ZooKeeper-era Kafka (and
# pylog) checks partitions, replication factor, then configs.
DOUBTFUL = {"abc", "-5", "bogus", "100", "x", "0", "-1", "none"}

CONFIG_POOL = {
    "retention.ms": ["1000", "-1", "abc", "-5"],
    "cleanup.policy": ["compact", "delete", "compact,delete", "bogus"],
    "segment.bytes": ["1048576", "100", "x"],
    "min.insync.replicas": ["1", "2", "0"],
    "max.message.bytes": ["1000", "-1"],
    "message.timestamp.type": ["CreateTime", "LogAppendTime", "bogus"],
    "compression.type": ["gzip", "zstd", "none", "bogus"],
}


def test_random_create_topics(brokers: Brokers, oracle: Oracle) -> None:
    rng = random.Random(SEED)
    create_v = versions(brokers.kafka_versions, brokers.pylog_versions, ApiKey.CREATE_TOPICS)
    made: list[str] = []
    for i in range(12):
        topics: list[dict[str, Any]] = []
        allow = list(TOPIC_CONFIG_RULES)
        for j in range(rng.randint(1, 4)):
            base = rng.choice(("ok", "ok", "with.dot", "bad name", "x" * 260, "under_score"))
            keys = rng.sample(sorted(CONFIG_POOL), rng.randint(0, 3))
            topic: dict[str, Any] = {
                "name": name(f"rc{SEED}-{i}-{j}-{base}"),
                "num_partitions": rng.choice((-1, 0, 1, 3)),
                "replication_factor": rng.choice((-1, 0, 1, 1, 2)),
                "configs": [{"name": k, "value": rng.choice(CONFIG_POOL[k])} for k in keys],
            }
            topics.append(topic)
            doubts = (
                (topic["num_partitions"] == 0)
                + (topic["replication_factor"] in (0, 2))
                + sum(
                    c["value"] in DOUBTFUL or c["name"] == "min.insync.replicas"
                    for c in topic["configs"]
                )
            )
            if doubts > 1:
                allow.append(
                    Rule(
                        f"topics[name={topic['name']}].error_code",
                        "several bad values: KRaft and ZooKeeper-era Kafka check them in "
                        "different orders",
                    )
                )
        x = oracle.send(
            ApiKey.CREATE_TOPICS,
            rng.choice(create_v),
            {"topics": topics, "timeout_ms": 30000, "validate_only": rng.random() < 0.3},
            allow=allow,
        )
        made += [r.name for r in x.kafka.topics if r.error_code == 0]
    if made:
        oracle.send(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            {"resources": [{"resource_type": 2, "resource_name": n,
                            "configuration_keys": sorted(CONFIG_POOL)} for n in made],
             "include_synonyms": True},
            allow=MIN_ISR_RULES,
        )  # fmt: skip
    try:
        oracle.verify()
    except AssertionError as e:
        raise AssertionError(f"seed {SEED}: {e}") from None
