"""Kafka as the oracle for KIP-932's share groups: one heartbeat/fetch
sequence sent to Kafka 4.3 and pylog alike — two members joining a share
group on a topic of one partition, their epochs and (shared) assignments,
ShareGroupDescribe, a ShareFetch acquiring records, a second member's
fetch finding them held, acknowledgements piggybacked and in
ShareAcknowledge, the share-session epochs, and the errors Kafka's checks
give (empty member id, an unknown member, a wrong epoch, no session)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pylog.protocol import ApiKey

from .conftest import Brokers
from .diff_harness import Oracle, Pair, Rule, batch, name
from .test_differential_data import produce_body, topic_ids

HB, DESCRIBE, FETCH, ACK = (
    ApiKey.SHARE_GROUP_HEARTBEAT,
    ApiKey.SHARE_GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH,
    ApiKey.SHARE_ACKNOWLEDGE,
)

# Member ids are the client's own (KIP-1082): the same on both sides here.
M1, M2 = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"

MEMBER_ORDER = Rule(
    "groups[*].members[*].member_id",
    "Kafka lists members in its hash map's order (the members are alike but for their ids)",
    presence=False,
)
CLIENT_HOST = Rule("**.client_host", "each side sees its own connection's address")
LEADER = Rule("**.current_leader.leader_id", "each broker has its own node id")
_EPOCHS_WHY = (
    "Kafka 4.3 bumps a share group's epoch again once the partitions' share state is "
    "initialized and computes its target assignment apart (group.share.assignment.interval.ms): "
    "the epochs move on differently, compared only for presence"
)
EPOCHS = [Rule(f"**.{f}", _EPOCHS_WHY) for f in ("member_epoch", "group_epoch", "assignment_epoch")]
ASSIGNMENT = Rule(
    "**.assignment.topic_partitions[*]",
    "Kafka assigns a partition once its share state is initialized, in the background; "
    "pylog at once",
    presence=False,
)
LOCK = Rule(
    "acquisition_lock_timeout_ms",
    "group.share.record.lock.duration.ms: the harness leaves Kafka's default",
    presence=True,
)


@pytest.fixture
def oracle(pair: Pair) -> Oracle:
    return Oracle(pair)


def test_share_group_sequence(brokers: Brokers, oracle: Oracle) -> None:
    t = name("share")
    group = name("share-group")
    oracle.create({t: 1})
    ids = {
        "kafka": topic_ids(oracle.pair.kafka, [t])[t],
        "pylog": topic_ids(oracle.pair.pylog, [t])[t],
    }
    # the coordinator of the group (both create their offsets topic on demand)
    oracle.until(
        ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": [group]},
        lambda r: r.coordinators[0].error_code == 0,
    )  # fmt: skip

    def hb(member: str, epoch: int, topics: list[str] | None = None) -> dict[str, Any]:
        return {
            "group_id": group,
            "member_id": member,
            "member_epoch": epoch,
            "rack_id": None,
            "subscribed_topic_names": topics,
        }

    oracle.send(HB, 1, hb("", 0, [t]))  # INVALID_REQUEST: no member id
    oracle.send(HB, 1, hb(M1, 0, None))  # INVALID_REQUEST: no topics on joining
    oracle.send(HB, 1, hb(M1, 5, [t]))  # GROUP_ID_NOT_FOUND: no such group
    joined = [*EPOCHS, ASSIGNMENT]
    oracle.send(HB, 1, hb(M1, 0, [t]), joined)
    oracle.send(HB, 1, hb(M2, 0, [t]), joined)
    oracle.send(HB, 1, hb(M1, 7, None), joined)  # FENCED_MEMBER_EPOCH
    oracle.send(HB, 1, hb("CCCCCCCCCCCCCCCCCCCCCC", 3, None))  # UNKNOWN_MEMBER_ID
    # Kafka assigns a partition once its share state is initialized, which it
    # does in the background: heartbeat there (uncompared) until both members
    # hold it; pylog assigned it at the join.
    epochs = {M1: 0, M2: 0}
    for side in ("kafka", "pylog"):
        conn = oracle.pair.kafka if side == "kafka" else oracle.pair.pylog
        holds = {M1: False, M2: False}
        for m in (M1, M2):
            r = conn.request(HB, 1, hb(m, 0, [t]))
            epochs[m] = r.member_epoch
            holds[m] = bool(r.assignment and r.assignment.topic_partitions)
        deadline = time.monotonic() + 60
        while True:
            for m in (M1, M2):
                r = conn.request(HB, 1, hb(m, epochs[m], [t]))
                assert r.error_code == 0, (side, r)
                epochs[m] = r.member_epoch
                if r.assignment is not None:  # absent: unchanged
                    holds[m] = bool(r.assignment.topic_partitions)
            if all(holds.values()):
                break
            assert time.monotonic() < deadline, f"{side} never assigned the partition"
            time.sleep(0.5)
    oracle.send(
        DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False},
        allow=[CLIENT_HOST, MEMBER_ORDER, *EPOCHS],
    )  # fmt: skip

    def fetch(member: str, epoch: int, acks: list[Any] | None = None, wait: int = 3000) -> Any:
        return lambda side: {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": epoch,
            "max_wait_ms": wait,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "max_records": 500,
            "batch_size": 500,
            "topics": [
                {
                    "topic_id": ids[side],
                    "partitions": [{"partition_index": 0, "acknowledgement_batches": acks or []}],
                }
            ],
            "forgotten_topics_data": [],
        }

    def acknowledge(member: str, epoch: int, first: int, last: int, kind: int) -> Any:
        return lambda side: {
            "group_id": group,
            "member_id": member,
            "share_session_epoch": epoch,
            "topics": [
                {
                    "topic_id": ids[side],
                    "partitions": [
                        {
                            "partition_index": 0,
                            "acknowledgement_batches": [
                                {"first_offset": first, "last_offset": last,
                                 "acknowledge_types": [kind]}
                            ],
                        }
                    ],
                }
            ],
        }  # fmt: skip

    allow = [LEADER, LOCK]
    ack = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]
    oracle.send(FETCH, 1, fetch(M1, 3), allow)  # SHARE_SESSION_NOT_FOUND
    # The first fetch opens the session and, at the latest, fixes the start
    # offset (share.auto.offset.reset=latest) on both.
    oracle.send(FETCH, 1, fetch(M1, 0, wait=500), allow)
    oracle.send(FETCH, 1, fetch(M1, 0, ack, wait=500), allow)  # INVALID_REQUEST: acks at 0
    oracle.send(ApiKey.PRODUCE, 9, produce_body(t, batch([b"a", b"b", b"c"])))
    oracle.send(FETCH, 1, fetch(M1, 1), allow)  # acquires the three records
    oracle.send(FETCH, 1, fetch(M2, 0, wait=500), allow)  # nothing left to acquire
    oracle.send(FETCH, 1, fetch(M1, 7), allow)  # INVALID_SHARE_SESSION_EPOCH
    oracle.send(FETCH, 1, fetch(M1, 2, ack, wait=500), allow)  # ACCEPT 0, piggybacked
    oracle.send(ACK, 1, acknowledge(M2, 1, 1, 1, 1), allow)  # INVALID_RECORD_STATE: M1 holds it
    oracle.send(ACK, 1, acknowledge(M1, 3, 1, 1, 2), allow)  # RELEASE
    oracle.send(FETCH, 1, fetch(M2, 2), allow)  # M2 gets offset 1, its second delivery
    oracle.send(ACK, 1, acknowledge(M1, 4, 2, 2, 3), allow)  # REJECT
    oracle.send(ACK, 1, acknowledge(M2, 3, 1, 1, 1), allow)  # ACCEPT
    oracle.send(ACK, 1, acknowledge(M2, 4, 1, 1, 1), allow)  # INVALID_RECORD_STATE: done
    oracle.send(FETCH, 1, fetch(M2, -1, wait=0), allow)  # closes the session
    oracle.send(HB, 1, hb(M2, -1, None))  # leaves
    oracle.send(
        DESCRIBE, 1, {"group_ids": [group], "include_authorized_operations": False},
        allow=[CLIENT_HOST, MEMBER_ORDER, *EPOCHS, ASSIGNMENT],
    )  # fmt: skip
    share_group_offsets(oracle, group, t, lambda: hb(M1, -1, None))
    oracle.verify()


DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = (
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
)


def share_group_offsets(oracle: Oracle, group: str, t: str, leave: Any) -> None:
    """The offsets admin on the group the sequence left (offsets 0-2 done, so
    its start offset is 3): described, an alter refused while a member is
    in, an unknown topic, an alter to 0 and a delete once it is empty."""

    def describe(topics: list[Any] | None) -> dict[str, Any]:
        return {"groups": [{"group_id": group, "topics": topics}]}

    def alter(topic: str, offset: int) -> dict[str, Any]:
        return {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": offset}]}
        ]}  # fmt: skip

    named = [{"topic_name": t, "partitions": [0]}]
    lagging = Rule(
        "groups[*].topics[*].partitions[*].start_offset",
        "Kafka 4.3's persisted start offset stayed at 1 after offsets 1 and 2 of the same "
        "batch were done; pylog's moves past every completed record (3)",
    )
    oracle.send(DESCRIBE_OFFSETS, 1, describe(named), [lagging])
    oracle.send(DESCRIBE_OFFSETS, 0, describe(named), [lagging])
    oracle.send(DESCRIBE_OFFSETS, 1, describe([{"topic_name": name("none"), "partitions": [0]}]))
    oracle.send(ALTER_OFFSETS, 0, alter(t, 0))  # NON_EMPTY_GROUP: M1 is still in
    oracle.send(HB, 1, leave())
    oracle.send(ALTER_OFFSETS, 0, alter(name("none"), 0))  # UNKNOWN_TOPIC_OR_PARTITION
    oracle.send(ALTER_OFFSETS, 0, alter(t, 1))
    oracle.send(DESCRIBE_OFFSETS, 1, describe(named))
    oracle.send(DELETE_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": t}]})
    oracle.send(DESCRIBE_OFFSETS, 1, describe(named))
    oracle.send(DESCRIBE_OFFSETS, 1, {"groups": [{"group_id": name("nogroup"), "topics": None}]})


def test_share_group_configs(brokers: Brokers, oracle: Oracle) -> None:
    """GroupConfig on the GROUP resource (32): set, described (overrides and
    the broker's values), and the refusals of an unknown key or a value out
    of the broker's bounds."""
    group = name("configured")

    def alter(configs: dict[str, str], validate_only: bool = False) -> dict[str, Any]:
        return {"resources": [{
            "resource_type": 32, "resource_name": group,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in configs.items()],
        }], "validate_only": validate_only}  # fmt: skip

    def describe(keys: list[str] | None) -> dict[str, Any]:
        return {
            "resources": [
                {"resource_type": 32, "resource_name": group, "configuration_keys": keys}
            ],
            "include_synonyms": True,
            "include_documentation": False,
        }

    keys = ["share.auto.offset.reset", "share.record.lock.duration.ms", "share.session.timeout.ms"]
    message = Rule("responses[*].error_message", "the refusal's wording is each broker's own")
    oracle.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter({"share.auto.offset.reset": "earliest"}))
    oracle.send(ApiKey.DESCRIBE_CONFIGS, 4, describe(keys))
    oracle.send(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter({"share.no.such.key": "1"}), [message])
    oracle.send(
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        1,
        alter({"share.record.lock.duration.ms": "1"}),
        [message],
    )
    oracle.send(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter({"share.auto.offset.reset": "never"}), [message]
    )
    oracle.send(ApiKey.DESCRIBE_CONFIGS, 4, describe(keys))
    oracle.verify()
