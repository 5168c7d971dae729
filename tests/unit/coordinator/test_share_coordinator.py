"""The share coordinator's answers (KIP-932's InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and the
summary), as Kafka 4.3 gives them, on a real log and metadata store; and
that a second coordinator reading the same log back finds the state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pylog.coordinator.group_config import validate_group_config
from pylog.coordinator.share_coordinator import ShareCoordinator
from pylog.errors import ErrorCode, InvalidConfigurationError
from pylog.log import LogManager
from pylog.metadata import JsonMetadataStore
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager
from pylog.server.share.persister import PersistedState, StateBatch

CONFIG = KafkaConfig.from_props({"share.coordinator.state.topic.num.partitions": 3})


def _coordinator(path: Path) -> tuple[ShareCoordinator, str, LogManager, ReplicaManager]:
    lm = LogManager({"log.dirs": str(path)})
    store = JsonMetadataStore(str(path))
    rm = ReplicaManager(lm, store)
    rm.startup()
    if store.topic("t") is None:
        store.create_topic("t", 2, 1, {})
    meta = store.topic("t")
    assert meta is not None
    return ShareCoordinator(CONFIG, rm, store), meta.topic_id, lm, rm


def test_state_rpcs_answer_as_kafka(tmp_path: Path) -> None:
    async def run() -> None:
        sc, tid, lm, rm = _coordinator(tmp_path)
        try:
            # never initialized: Read and Write refuse, the summary has no start
            assert await sc.read("g", tid, 0) == (ErrorCode.INVALID_REQUEST, None)
            state = PersistedState(5, 0, 0, [StateBatch(5, 6, 0, 1)])
            assert await sc.write("g", tid, 0, state) == ErrorCode.INVALID_REQUEST
            assert await sc.summary("g", tid, 0) == (ErrorCode.NONE, None)
            # an unknown topic-partition
            assert await sc.initialize("g", tid, 9, 0, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            assert await sc.initialize("g", "AAAAAAAAAAAAAAAAAAAAAA", 0, 0, 0) == (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            assert await sc.initialize("g", tid, 0, 0, 5) == ErrorCode.NONE
            assert await sc.write("g", tid, 0, state) == ErrorCode.NONE
            code, got = await sc.read("g", tid, 0)
            assert code == ErrorCode.NONE and got == state
            # a leader behind the last writer's epoch, an older state epoch
            assert await sc.read("g", tid, 0, leader_epoch=-1) == (ErrorCode.NONE, state)
            newer = PersistedState(6, 0, 3, [])
            assert await sc.write("g", tid, 0, newer) == ErrorCode.NONE
            assert (await sc.read("g", tid, 0, leader_epoch=2))[0] == ErrorCode.FENCED_LEADER_EPOCH
            assert await sc.write("g", tid, 0, PersistedState(7, 0, 2, [])) == (
                ErrorCode.FENCED_LEADER_EPOCH
            )
            # an alter: the next state epoch fences the older writer
            assert await sc.initialize("g", tid, 0, 0, 0) == ErrorCode.FENCED_STATE_EPOCH
            assert await sc.initialize("g", tid, 0, 1, 0) == ErrorCode.NONE
            assert await sc.write("g", tid, 0, PersistedState(8, 0, 3, [])) == (
                ErrorCode.FENCED_STATE_EPOCH
            )
            assert await sc.write("g", tid, 0, PersistedState(2, 1, 3, [])) == ErrorCode.NONE
        finally:
            rm.shutdown()
            lm.shutdown()
        # Another coordinator over the same log reads the last state back.
        sc2, tid2, lm2, rm2 = _coordinator(tmp_path)
        try:
            assert sc2.load() == 1
            assert await sc2.read("g", tid2, 0) == (ErrorCode.NONE, PersistedState(2, 1, 3, []))
            assert await sc2.delete("g", tid2, 0) == ErrorCode.NONE
            assert await sc2.read("g", tid2, 0) == (ErrorCode.INVALID_REQUEST, None)
        finally:
            rm2.shutdown()
            lm2.shutdown()

    asyncio.run(run())


def test_group_config_validation() -> None:
    config = KafkaConfig.from_props({})
    validate_group_config(config, {"share.auto.offset.reset": "earliest"})
    validate_group_config(config, {"share.record.lock.duration.ms": "15000"})
    for bad in (
        {"share.no.such.key": "1"},
        {"share.auto.offset.reset": "by_duration:PT1H"},
        {"share.record.lock.duration.ms": "14999"},
        {"share.delivery.count.limit": "11"},
        {"consumer.session.timeout.ms": "abc"},
        {"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "15000"},
    ):
        with pytest.raises(InvalidConfigurationError):
            validate_group_config(config, bad)
