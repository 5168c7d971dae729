"""ZkAlterIsrManager: a partition leader's ISR changes written to ZooKeeper
(Kafka's ``ZkIsrManager``), the :class:`AlterIsrManager` of a broker started
with ``zookeeper.connect``.

``submit`` queues the proposal for one worker thread (ZooKeeper calls block;
the event loop never waits on them), which takes every proposal queued so far
— a broker's return after a fault changes the ISR of every partition it
follows at once, fifty of ``__consumer_offsets`` among them — and

1. writes each ``/brokers/topics/<t>/partitions/<p>/state`` conditionally on
   the znode version the leader based its proposal on (its partition epoch),
   pipelined in one round trip's time rather than one round trip each: a
   leader changing its ISR and the controller electing a new leader cannot
   overwrite each other;
2. calls each proposal's callback exactly once: the state as written (its new
   partition epoch = the znode's new version), FENCED_LEADER_EPOCH when the
   stored leader epoch moved on (a new leader was elected),
   INVALID_UPDATE_VERSION when only the version did (the controller rewrote
   the state; its LeaderAndIsr will follow) — before anything else, so the
   leader counts what the store says as soon as it can;
3. creates one ``/isr_change_notification/isr_change_<seq>`` naming every
   partition written, so the controller re-reads their states and sends
   UpdateMetadata.

A round whose outcome is unknown (the connection dropped) is retried; a
proposal whose state is already stored counts as written (the earlier attempt
landed). The callbacks run on the worker thread; the Partition and
ReplicaManager they reach hand their follow-up work to the event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

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


@dataclass
class _Proposal:
    tp: TopicPartition
    proposed: LeaderAndIsr
    state: zk_data.LeaderAndIsr
    callback: AlterIsrCallback
    uncertain: bool = False  # an earlier round may have written it


class ZkAlterIsrManager:
    """ISR changes as conditional writes of the partition state znodes."""

    def __init__(self, zk: KafkaZkClient, *, retry_backoff_s: float = 0.1) -> None:
        self.zk = zk
        self.retry_backoff_s = retry_backoff_s
        self._pending: list[_Proposal] = []
        # Reentrant: a test holds it to queue several proposals for one round.
        self._wake = threading.Condition(threading.RLock())
        self._closed = threading.Event()
        self._worker = threading.Thread(target=self._run, name="pylog-alter-isr", daemon=True)
        self._worker.start()
        #: names of the isr_change notifications created, in order (for tests and logs)
        self.notifications: list[str] = []
        #: proposals written per round, in order (for tests and logs)
        self.rounds: list[int] = []

    def submit(
        self,
        tp: TopicPartition,
        proposed: LeaderAndIsr,
        controller_epoch: int,
        callback: AlterIsrCallback,
    ) -> None:
        state = zk_data.LeaderAndIsr(
            leader=proposed.leader,
            leader_epoch=proposed.leader_epoch,
            isr=sorted(proposed.isr),
            controller_epoch=controller_epoch,
        )
        with self._wake:
            if self._closed.is_set():
                raise RuntimeError("the AlterIsrManager is shut down")
            self._pending.append(_Proposal(tp, proposed, state, callback))
            self._wake.notify()

    def shutdown(self) -> None:
        """Stop retrying; proposals still queued are answered INVALID_UPDATE_VERSION."""
        with self._wake:
            self._closed.set()
            self._wake.notify()
        self._worker.join(30)

    # ------------------------------------------------------------------ worker

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closed.is_set():
                    self._wake.wait()
                batch, self._pending = self._pending, []
            if not batch:
                return  # closed, nothing left
            if self._closed.is_set():
                for p in batch:
                    _answer(p, INVALID_UPDATE_VERSION)
                continue
            try:
                results = self._write_until_known(batch)
            except Exception:  # never leave a leader waiting for an answer
                _log.exception("ISR changes of %s failed", [p.tp for p in batch])
                results = [INVALID_UPDATE_VERSION] * len(batch)
            # The leaders first: until a leader applies what the store now says,
            # it counts the old ISR (and its maximal ISR for the HW).
            for p, result in zip(batch, results, strict=True):
                _answer(p, result)
            written = [p.tp for p, r in zip(batch, results, strict=True) if not isinstance(r, int)]
            if written:
                self.rounds.append(len(written))
                self._notify(written)

    def _write_until_known(self, batch: list[_Proposal]) -> list[LeaderAndIsr | int]:
        backoff = self.retry_backoff_s
        while True:
            try:
                return self._write(batch)
            except ZkError as e:
                if self._closed.is_set():
                    return [INVALID_UPDATE_VERSION] * len(batch)
                _log.warning("writing the ISR of %s failed, retrying: %s",
                             [p.tp for p in batch], e)  # fmt: skip
                for p in batch:
                    p.uncertain = True
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _write(self, batch: list[_Proposal]) -> list[LeaderAndIsr | int]:
        """One round: the conditional writes pipelined, the refused ones read
        back to tell why (the caller then answers, and notifies the controller
        of what was written)."""
        results: list[LeaderAndIsr | int | None] = [None] * len(batch)
        todo: list[int] = []
        for i, p in enumerate(batch):
            if p.uncertain and (landed := self._landed(p)) is not None:
                results[i] = self._as_written(p, landed)
            else:
                todo.append(i)
        done = self.zk.update_partition_states(
            [(batch[i].tp.topic, batch[i].tp.partition, batch[i].state,
              batch[i].proposed.partition_epoch) for i in todo]
        )  # fmt: skip
        for i, outcome in zip(todo, done, strict=True):
            p = batch[i]
            results[i] = (
                self._as_written(p, outcome.version) if outcome.succeeded else self._lost_race(p)
            )
        return [r for r in results if r is not None]

    def _landed(self, p: _Proposal) -> int | None:
        """The znode version when the stored state is ``p``'s (an earlier
        round's write landed), else None."""
        cur = self.zk.get_partition_state(p.tp.topic, p.tp.partition)
        if cur is not None and _same(cur, p.state):
            return cur.zk_version
        return None

    def _as_written(self, p: _Proposal, version: int) -> LeaderAndIsr:
        isr = tuple(p.state.isr)
        _log.info("ISR of %s is now %s (partition epoch %d)", p.tp, list(isr), version)
        return LeaderAndIsr(p.proposed.leader, p.proposed.leader_epoch, isr, version)

    def _notify(self, tps: list[TopicPartition]) -> None:
        """Tell the controller; a failure is logged (the ISRs are written either
        way, and the controller's next LeaderAndIsr or election re-reads them)."""
        backoff = self.retry_backoff_s
        for _ in range(5):
            try:
                self.notifications.append(
                    self.zk.create_isr_change_notification([(tp.topic, tp.partition) for tp in tps])
                )
                return
            except ZkError as e:
                if self._closed.is_set():
                    break
                _log.warning("ISR change notification for %s failed, retrying: %s", tps, e)
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
        _log.error("no ISR change notification for %s: the controller learns of it later", tps)

    def _lost_race(self, p: _Proposal) -> LeaderAndIsr | int:
        tp, proposed = p.tp, p.proposed
        cur = self.zk.get_partition_state(tp.topic, tp.partition)
        if cur is None:
            _log.info("ISR change of %s refused: its state znode is gone", tp)
            return INVALID_UPDATE_VERSION
        if _same(cur, p.state) and cur.zk_version == proposed.partition_epoch + 1:
            # The write is what is there (a retried round that had landed).
            return self._as_written(p, cur.zk_version)
        if cur.leader_epoch != proposed.leader_epoch:
            _log.info("ISR change of %s fenced: leader epoch %d is now %d",
                      tp, proposed.leader_epoch, cur.leader_epoch)  # fmt: skip
            return ErrorCode.FENCED_LEADER_EPOCH
        _log.info("ISR change of %s refused: partition epoch %d is now %d",
                  tp, proposed.partition_epoch, cur.zk_version)  # fmt: skip
        return INVALID_UPDATE_VERSION


def _answer(p: _Proposal, result: LeaderAndIsr | int) -> None:
    try:
        p.callback(result)
    except Exception:
        _log.exception("ISR change callback of %s failed", p.tp)


def _same(a: zk_data.LeaderAndIsr, b: zk_data.LeaderAndIsr) -> bool:
    return (
        a.leader == b.leader
        and a.leader_epoch == b.leader_epoch
        and sorted(a.isr) == sorted(b.isr)
        and a.controller_epoch == b.controller_epoch
    )
