"""ZkAlterIsrManager: a partition leader's ISR changes written to ZooKeeper
(Kafka's ``ZkIsrManager``), the :class:`AlterIsrManager` of a broker started
with ``zookeeper.connect``.

``submit`` hands the proposal to one worker thread (ZooKeeper calls block; the
event loop never waits on them), which

1. writes ``/brokers/topics/<t>/partitions/<p>/state`` conditionally on the
   znode version the leader based its proposal on (its partition epoch): a
   leader changing its ISR and the controller electing a new leader cannot
   overwrite each other;
2. on success, creates ``/isr_change_notification/isr_change_<seq>`` naming the
   partition, so the controller re-reads the state and sends UpdateMetadata;
3. calls the callback exactly once: the state as written (its new partition
   epoch = the znode's new version), FENCED_LEADER_EPOCH when the stored leader
   epoch moved on (a new leader was elected), INVALID_UPDATE_VERSION when only
   the version did (the controller rewrote the state; its LeaderAndIsr will
   follow).

A write whose outcome is unknown (the connection dropped) is retried; if the
stored state already is the proposal, the earlier attempt landed and counts as
written. The callback runs on the worker thread; the Partition and
ReplicaManager it reaches hand their follow-up work to the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.metadata import zk_data
from pylog.metadata.kafka_zk_client import KafkaZkClient, ZkError
from pylog.server.alter_isr_manager import (
    INVALID_UPDATE_VERSION,
    AlterIsrCallback,
    LeaderAndIsr,
)

__all__ = ["ZkAlterIsrManager"]

_log = logging.getLogger("pylog.server.alter_isr")


class ZkAlterIsrManager:
    """ISR changes as conditional writes of the partition state znode."""

    def __init__(self, zk: KafkaZkClient, *, retry_backoff_s: float = 0.1) -> None:
        self.zk = zk
        self.retry_backoff_s = retry_backoff_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pylog-alter-isr")
        self._closed = threading.Event()
        #: names of the isr_change notifications created, in order (for tests and logs)
        self.notifications: list[str] = []

    def submit(
        self,
        tp: TopicPartition,
        proposed: LeaderAndIsr,
        controller_epoch: int,
        callback: AlterIsrCallback,
    ) -> None:
        if self._closed.is_set():
            raise RuntimeError("the AlterIsrManager is shut down")
        self._executor.submit(self._write, tp, proposed, controller_epoch, callback)

    def shutdown(self) -> None:
        """Stop retrying; pending proposals are answered INVALID_UPDATE_VERSION."""
        self._closed.set()
        self._executor.shutdown(wait=True, cancel_futures=False)

    # ------------------------------------------------------------------ worker

    def _write(
        self,
        tp: TopicPartition,
        proposed: LeaderAndIsr,
        controller_epoch: int,
        callback: AlterIsrCallback,
    ) -> None:
        try:
            result = self._write_until_known(tp, proposed, controller_epoch)
        except Exception:  # never leave the leader waiting for an answer
            _log.exception("ISR change of %s failed", tp)
            result = INVALID_UPDATE_VERSION
        try:
            callback(result)
        except Exception:
            _log.exception("ISR change callback of %s failed", tp)

    def _write_until_known(
        self, tp: TopicPartition, proposed: LeaderAndIsr, controller_epoch: int
    ) -> LeaderAndIsr | int:
        isr = tuple(sorted(proposed.isr))
        state = zk_data.LeaderAndIsr(
            leader=proposed.leader,
            leader_epoch=proposed.leader_epoch,
            isr=list(isr),
            controller_epoch=controller_epoch,
        )
        backoff = self.retry_backoff_s
        uncertain = False  # an earlier attempt may have landed
        while True:
            try:
                if uncertain:
                    landed = self._landed(tp, state)
                    if landed is not None:
                        return self._written(tp, proposed, isr, landed)
                done = self.zk.update_leader_and_isr(
                    tp.topic, tp.partition, state, proposed.partition_epoch
                )
                if done.succeeded:
                    return self._written(tp, proposed, isr, done.version)
                return self._lost_race(tp, proposed, state)
            except ZkError as e:
                if self._closed.is_set():
                    return INVALID_UPDATE_VERSION
                _log.warning("writing the ISR of %s failed, retrying: %s", tp, e)
                uncertain = True
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _landed(self, tp: TopicPartition, state: zk_data.LeaderAndIsr) -> int | None:
        """The znode version when the stored state is ``state`` (an earlier
        attempt's write landed), else None."""
        cur = self.zk.get_partition_state(tp.topic, tp.partition)
        if cur is not None and _same(cur, state):
            return cur.zk_version
        return None

    def _written(
        self, tp: TopicPartition, proposed: LeaderAndIsr, isr: tuple[int, ...], version: int
    ) -> LeaderAndIsr:
        _log.info("ISR of %s is now %s (partition epoch %d)", tp, list(isr), version)
        self._notify(tp)
        return LeaderAndIsr(proposed.leader, proposed.leader_epoch, isr, version)

    def _notify(self, tp: TopicPartition) -> None:
        """Tell the controller; a failure is logged (the ISR is written either way,
        and the controller's next LeaderAndIsr or election re-reads it)."""
        backoff = self.retry_backoff_s
        for _ in range(5):
            try:
                self.notifications.append(
                    self.zk.create_isr_change_notification([(tp.topic, tp.partition)])
                )
                return
            except ZkError as e:
                if self._closed.is_set():
                    break
                _log.warning("ISR change notification for %s failed, retrying: %s", tp, e)
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        _log.error("no ISR change notification for %s: the controller learns of it later", tp)

    def _lost_race(
        self, tp: TopicPartition, proposed: LeaderAndIsr, state: zk_data.LeaderAndIsr
    ) -> LeaderAndIsr | int:
        cur = self.zk.get_partition_state(tp.topic, tp.partition)
        if cur is None:
            _log.info("ISR change of %s refused: its state znode is gone", tp)
            return INVALID_UPDATE_VERSION
        if _same(cur, state) and cur.zk_version == proposed.partition_epoch + 1:
            # The write is what is there (a retried request that had landed).
            return self._written(tp, proposed, tuple(state.isr), cur.zk_version)
        if cur.leader_epoch != proposed.leader_epoch:
            _log.info("ISR change of %s fenced: leader epoch %d is now %d",
                      tp, proposed.leader_epoch, cur.leader_epoch)  # fmt: skip
            return ErrorCode.FENCED_LEADER_EPOCH
        _log.info("ISR change of %s refused: partition epoch %d is now %d",
                  tp, proposed.partition_epoch, cur.zk_version)  # fmt: skip
        return INVALID_UPDATE_VERSION


def _same(a: zk_data.LeaderAndIsr, b: zk_data.LeaderAndIsr) -> bool:
    return (
        a.leader == b.leader
        and a.leader_epoch == b.leader_epoch
        and sorted(a.isr) == sorted(b.isr)
        and a.controller_epoch == b.controller_epoch
    )
