"""What a Kafka 3.x broker in ZooKeeper mode asks of its controller beyond
ControlledShutdown, served by pylog's KafkaController (the mixed cluster,
docs/migration.md):

- **AlterPartition** (KIP-497): from inter.broker.protocol.version 2.7 on, a
  Kafka partition leader no longer writes its ISR changes to ZooKeeper itself
  (pylog's brokers still do, as Kafka's ZkAlterIsrManager did, and raise
  ``/isr_change_notification``); it proposes them to the controller, which
  checks them against its context, writes the partition's state znode fenced
  on ``/controller_epoch`` and answers with the new state, then tells every
  broker with UpdateMetadata (Kafka's KafkaController.processAlterPartition).
- **AllocateProducerIds** (KIP-730): from IBP 3.0 a Kafka broker takes its
  producer-id blocks from the controller (RPCProducerIdManager) rather than
  from ``/latest_producer_id_block`` itself; in ZooKeeper mode the controller
  takes the block from that same znode, with the same conditional write
  pylog's brokers use for their own blocks (KafkaZkClient.allocate_producer_id_block,
  Kafka's ZkProducerIdManager), so ids never repeat across both kinds.

Each request is one event on the controller's queue, like the rest of its work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.metadata.kafka_zk_client import ControllerMovedError
from pylog.metadata.zk_data import LeaderAndIsr, ProducerIdBlock

if TYPE_CHECKING:
    from pylog.controller.kafka_controller import KafkaController

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "ProposedState",
    "allocate_producer_ids",
    "alter_partition",
]

_log = logging.getLogger("pylog.controller")

#: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE, the block a broker is given;
#: pylog's own brokers reserve blocks of the same size.
PRODUCER_ID_BLOCK_SIZE = 1000

#: KIP-704's LeaderRecoveryState.
_RECOVERED, _RECOVERING = 0, 1

T = TypeVar("T")


@dataclass(frozen=True)
class ProposedState:
    """One partition of an AlterPartition: the ISR its leader proposes, on the
    leader and partition epochs it last saw."""

    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


async def _on_queue(
    controller: KafkaController,
    name: str,
    work: Callable[[], Awaitable[T]],
    not_controller: T,
) -> T:
    """Run ``work`` as one controller event and return its answer;
    ``not_controller`` when this broker is not (or stops being) the controller."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def reply(result: T) -> None:
        if not answer.done():
            answer.set_result(result)

    async def process() -> None:
        if not controller.is_active:
            reply(not_controller)
            return
        try:
            reply(await work())
        except ControllerMovedError:
            reply(not_controller)
            await controller.elect()
        except Exception:
            # Logged; the requester retries on NOT_CONTROLLER, as after a move.
            _log.exception("%s failed", name)
            reply(not_controller)

    controller.put_event(name, process, lambda: reply(not_controller))
    return await answer


# ------------------------------------------------------------------ AlterPartition


async def alter_partition(
    controller: KafkaController,
    broker_id: int,
    broker_epoch: int,
    proposals: Mapping[TopicPartition, ProposedState],
    *,
    version: int,
) -> int | dict[TopicPartition, LeaderAndIsr | int]:
    """The controller's answer to an AlterPartition: a request-level error
    code, or per partition its new state (or the one already there) or an
    error code."""

    async def work() -> int | dict[TopicPartition, LeaderAndIsr | int]:
        return await _process_alter_partition(
            controller, broker_id, broker_epoch, proposals, version
        )

    return await _on_queue(
        controller, f"AlterPartition({broker_id})", work, int(ErrorCode.NOT_CONTROLLER)
    )


def _check(
    current: LeaderAndIsr | None,
    broker_id: int,
    new: ProposedState,
    eligible: set[int],
    version: int,
) -> LeaderAndIsr | int | None:
    """A proposal against the controller's state: an answer now (the state
    already there, or an error code), or None to write it."""
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if new.partition_epoch > current.zk_version or new.leader_epoch > current.leader_epoch:
        # The leader has seen a newer state than this controller: it is
        # likely no longer the controller (Kafka answers the same).
        return ErrorCode.NOT_CONTROLLER
    if new.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if (
        current.leader == broker_id
        and sorted(current.isr) == sorted(new.isr)
        and current.leader_recovery_state == new.leader_recovery_state
    ):
        # Already so (a retry whose first answer was lost): before the
        # partition-epoch check, so a retry stays idempotent.
        return current
    if current.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if new.partition_epoch < current.zk_version:
        return ErrorCode.INVALID_UPDATE_VERSION
    if new.leader_recovery_state == _RECOVERING and len(new.isr) > 1:
        return ErrorCode.INVALID_REQUEST
    if current.leader_recovery_state == _RECOVERED and new.leader_recovery_state == _RECOVERING:
        return ErrorCode.INVALID_REQUEST
    if set(new.isr) - eligible:
        # KIP-841: only live brokers, not shutting down, may join an ISR.
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return None


async def _process_alter_partition(
    controller: KafkaController,
    broker_id: int,
    broker_epoch: int,
    proposals: Mapping[TopicPartition, ProposedState],
    version: int,
) -> int | dict[TopicPartition, LeaderAndIsr | int]:
    ctx = controller.context
    info = ctx.live_brokers.get(broker_id)
    if info is None or info.epoch != broker_epoch:
        _log.info("AlterPartition from broker %d at epoch %d: not its registration (%s)",
                  broker_id, broker_epoch, info.epoch if info else "none")  # fmt: skip
        return ErrorCode.STALE_BROKER_EPOCH
    answers: dict[TopicPartition, LeaderAndIsr | int] = {}
    eligible = ctx.live_broker_ids()
    zk = controller.zk
    for tp, new in sorted(proposals.items()):
        current = ctx.leadership.get(tp)
        verdict = _check(current, broker_id, new, eligible, version)
        if verdict is not None:
            answers[tp] = verdict
            if isinstance(verdict, int) and verdict != ErrorCode.NOT_CONTROLLER:
                _log.info("AlterPartition of %s by broker %d refused: %s",
                          tp, broker_id, ErrorCode(verdict).name)  # fmt: skip
            continue
        assert current is not None
        state = LeaderAndIsr(
            leader=broker_id,
            leader_epoch=new.leader_epoch,
            isr=list(new.isr),
            controller_epoch=ctx.epoch,
            leader_recovery_state=new.leader_recovery_state,
        )
        written = await zk.run(
            zk.update_leader_and_isr,
            tp.topic,
            tp.partition,
            state,
            current.zk_version,
            controller_epoch_zk_version=ctx.epoch_zk_version,
        )
        if not written.succeeded:
            answers[tp] = ErrorCode.INVALID_UPDATE_VERSION
            # Someone else wrote it (the leader of an older IBP, or a lost
            # race): read it back so the next proposal is judged on it.
            fresh = await zk.run(zk.get_partition_state, tp.topic, tp.partition)
            if fresh is not None:
                ctx.leadership[tp] = fresh
            continue
        ctx.leadership[tp] = answers[tp] = replace(state, zk_version=written.version)
        _log.info("ISR of %s is now %s (AlterPartition from broker %d)",
                  tp, list(new.isr), broker_id)  # fmt: skip
    known = [tp for tp in proposals if tp in ctx.leadership]
    if known:
        batch = controller.new_batch()
        batch.add_update_metadata(ctx.live_brokers, known)
        batch.send()
    # A new replica that joined the ISR may be the one a reassignment waits for.
    controller.on_reassignment_isr_change(
        [tp for tp, a in answers.items() if isinstance(a, LeaderAndIsr)]
    )
    return answers


# ------------------------------------------------------------------ AllocateProducerIds


async def allocate_producer_ids(
    controller: KafkaController, broker_id: int, broker_epoch: int
) -> ProducerIdBlock | int:
    """The next producer-id block for ``broker_id``, or an error code."""

    async def work() -> ProducerIdBlock | int:
        info = controller.context.live_brokers.get(broker_id)
        if info is None:
            return ErrorCode.BROKER_ID_NOT_REGISTERED
        if info.epoch != broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        zk = controller.zk
        block = await zk.run(zk.allocate_producer_id_block, broker_id, PRODUCER_ID_BLOCK_SIZE)
        _log.info("producer ids %d-%d for broker %d", block.first, block.last, broker_id)
        return block

    return await _on_queue(
        controller, f"AllocateProducerIds({broker_id})", work, int(ErrorCode.NOT_CONTROLLER)
    )
