"""The controller's pure parts: the offline-partition leader election and the
requests a ControllerBrokerRequestBatch builds per broker."""

from __future__ import annotations

from typing import Any

from pylog.common.topic_partition import TopicPartition
from pylog.controller.controller_channel_manager import (
    LEADER_DURING_DELETE,
    ControllerBrokerRequestBatch,
    ControllerChannelManager,
)
from pylog.controller.controller_context import ControllerContext
from pylog.controller.partition_state_machine import offline_partition_leader
from pylog.metadata.zk_data import BrokerInfo, EndPointInfo, LeaderAndIsr
from pylog.protocol import ApiKey


def test_offline_leader_is_the_first_live_isr_member_in_assignment_order() -> None:
    assert offline_partition_leader([3, 1, 2], [1, 2], {1, 2}, unclean=False) == (1, False)
    assert offline_partition_leader([3, 2, 1], [1, 2], {1, 2}, unclean=False) == (2, False)
    # no live ISR member: none, unless unclean election is on
    assert offline_partition_leader([1, 2, 3], [1], {2, 3}, unclean=False) == (None, False)
    assert offline_partition_leader([1, 2, 3], [1], {2, 3}, unclean=True) == (2, True)
    assert offline_partition_leader([1, 2], [1], set(), unclean=True) == (None, False)


class _Recorder(ControllerChannelManager):
    def __init__(self) -> None:
        super().__init__("PLAINTEXT")
        self.sent: list[tuple[int, int, Any]] = []

    def send(
        self, broker_id: int, api_key: int, version: int, body: Any, callback: Any = None
    ) -> None:
        self.sent.append((broker_id, api_key, body))


def _context() -> ControllerContext:
    ctx = ControllerContext(epoch=4, epoch_zk_version=3)
    for b in (1, 2):
        ctx.live_brokers[b] = BrokerInfo(
            b, (EndPointInfo("PLAINTEXT", "127.0.0.1", 9090 + b, "PLAINTEXT"),), epoch=100 + b
        )
    ctx.assignments["t"] = {0: [1, 2, 3]}
    ctx.topic_ids["t"] = "K5ajVKzyTquhzPc0AZ1SIg"
    ctx.leadership[TopicPartition("t", 0)] = LeaderAndIsr(2, 7, [2, 1], 4, zk_version=9)
    return ctx


def test_batch_sends_leader_and_isr_to_live_replicas_and_metadata_to_all() -> None:
    ctx, channel = _context(), _Recorder()
    batch = ControllerBrokerRequestBatch(1, ctx, channel)
    batch.add_leader_and_isr([1, 2, 3], TopicPartition("t", 0))
    batch.send()
    kinds = sorted((b, k) for b, k, _ in channel.sent)
    # broker 3 is not live: nothing to it
    assert kinds == [(1, ApiKey.LEADER_AND_ISR), (1, ApiKey.UPDATE_METADATA),
                     (2, ApiKey.LEADER_AND_ISR), (2, ApiKey.UPDATE_METADATA)]  # fmt: skip
    lai = next(body for b, k, body in channel.sent if b == 2 and k == ApiKey.LEADER_AND_ISR)
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (1, 4, 102)
    p = lai.topic_states[0].partition_states[0]
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch, p.replicas) == (
        2, 7, [2, 1], 9, [1, 2, 3])  # fmt: skip
    assert lai.topic_states[0].topic_id == "K5ajVKzyTquhzPc0AZ1SIg"
    assert [(x.broker_id, x.port) for x in lai.live_leaders] == [(2, 9092)]
    um = next(body for b, k, body in channel.sent if b == 1 and k == ApiKey.UPDATE_METADATA)
    assert sorted(x.id for x in um.live_brokers) == [1, 2]
    assert um.topic_states[0].partition_states[0].offline_replicas == [3]


def test_deleting_topic_is_announced_with_leader_during_delete() -> None:
    ctx, channel = _context(), _Recorder()
    ctx.topics_being_deleted.add("t")
    batch = ControllerBrokerRequestBatch(1, ctx, channel)
    batch.add_update_metadata(ctx.live_brokers, [TopicPartition("t", 0)])
    batch.add_stop_replica(1, TopicPartition("t", 0), delete=True)
    batch.send()
    um = next(body for b, k, body in channel.sent if k == ApiKey.UPDATE_METADATA)
    assert um.topic_states[0].partition_states[0].leader == LEADER_DURING_DELETE
    stop = next(body for b, k, body in channel.sent if k == ApiKey.STOP_REPLICA)
    s = stop.topic_states[0].partition_states[0]
    assert (s.partition_index, s.delete_partition) == (0, True)
