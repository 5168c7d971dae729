"""Requests that must not sink the broker: a real broker on loopback, raw
requests built with pylog's own codec (KafkaConnection), and where a restart
or a signal matters, a `pylog broker start` process.

Each test reproduces one finding of the hostile test of the admin and metadata
paths: oversized partition counts, mass auto-creation, internal topics,
requests by topic id and extreme retention, client strings in log lines."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pylog.errors import ErrorCode
from pylog.protocol import ZERO_UUID, ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.testing import EmbeddedBroker, broker

E = ErrorCode
K = ApiKey
PYLOG = str(Path(sys.executable).with_name("pylog"))


@pytest.fixture
def b() -> Iterator[EmbeddedBroker]:
    with broker() as running:
        yield running


def conn(b: EmbeddedBroker, timeout: float = 30) -> KafkaConnection:
    return KafkaConnection(b.bootstrap_servers, timeout=timeout)


def metadata(c: KafkaConnection, version: int, topics: list[dict[str, Any]] | None) -> Any:
    return c.request(
        K.METADATA,
        version,
        {
            "topics": topics,
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )


# ---------------------------------------------------------------- 10: by id, retention


def test_metadata_v10_v11_by_topic_id_is_answered_not_a_closed_connection(
    b: EmbeddedBroker,
) -> None:
    with conn(b) as c:
        c.request(K.CREATE_TOPICS, 5, {"topics": [{"name": "known", "num_partitions": 2,
                  "replication_factor": 1, "assignments": [], "configs": []}],
                  "timeout_ms": 5000})  # fmt: skip
        known = metadata(c, 12, [{"name": "known"}]).topics[0].topic_id
        for version in (10, 11, 12):
            empty = None if version >= 12 else ""
            r = metadata(c, version, [{"name": None, "topic_id": ZERO_UUID}])
            assert [(t.error_code, t.name) for t in r.topics] == [(E.INVALID_REQUEST, empty)]
            r = metadata(c, version, [{"name": None, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}])
            assert [(t.error_code, t.name) for t in r.topics] == [(E.UNKNOWN_TOPIC_ID, empty)]
            r = metadata(c, version, [{"name": None, "topic_id": known}])
            assert [(t.error_code, t.name, len(t.partitions)) for t in r.topics] == [
                (E.NONE, "known", 2)
            ]


def test_offset_commit_with_the_largest_retention_is_accepted(b: EmbeddedBroker) -> None:
    with conn(b) as c:
        assert c.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}).error_code == 0
        deadline = time.monotonic() + 20
        while True:
            r = c.request(
                K.OFFSET_COMMIT,
                4,
                {
                    "group_id": "g",
                    "generation_id_or_member_epoch": -1,
                    "member_id": "",
                    "retention_time_ms": 2**63 - 1,
                    "topics": [{"name": "t", "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}
                    ]}],
                },
            )  # fmt: skip
            code = r.topics[0].partitions[0].error_code
            if code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert code == E.NONE
        r = c.request(
            K.OFFSET_FETCH,
            3,
            {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]},
        )
        assert r.topics[0].partitions[0].committed_offset == 5
