"""ReplicaAlterLogDirsThread: moves replicas between a broker's log
directories online (KIP-113; AlterReplicaLogDirs).

Kafka runs it as a fetcher whose "leader" is the local current log: each
round reads the next batches of the current log (to its end, as a follower
reads) and appends them byte for byte to the future log in the destination
directory; once the future log is level with the current one,
``Partition.maybeReplaceCurrentWithFutureReplica`` swaps them while no append
can run, and the partition serves the moved log from then on.

Here one asyncio task drives every partition being moved, a round of each in
turn, each round's file work on a worker thread (``max_bytes`` per round, so a
move shares the disk with clients). The future log follows what happens to the
current one meanwhile: a follower truncation truncates it too, retention
past its end restarts it at the current log's first segment.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from pylog.common.topic_partition import TopicPartition
from pylog.log.log import FetchIsolation, Log

if TYPE_CHECKING:
    from pylog.server.replica_manager import ReplicaManager

__all__ = ["ReplicaAlterLogDirsThread"]

_log = logging.getLogger("pylog.server.alter_log_dirs")


class ReplicaAlterLogDirsThread:
    def __init__(
        self, replica_manager: ReplicaManager, *, max_bytes: int = 1 << 20, idle_s: float = 0.02
    ) -> None:
        self.replica_manager = replica_manager
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self._partitions: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None

    @property
    def partitions(self) -> set[TopicPartition]:
        return set(self._partitions)

    def add_partitions(self, tps: list[TopicPartition]) -> None:
        """Start moving ``tps`` (their future logs exist); on the loop."""
        self._partitions.update(tps)
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="ReplicaAlterLogDirsThread"
            )

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        self._partitions.difference_update(tps)

    def shutdown(self) -> None:
        """Stop moving (a round on a worker thread finishes on its own)."""
        task, self._task = self._task, None
        self._partitions.clear()
        if task is not None:
            task.cancel()

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            if not self._partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            busy = False
            for tp in sorted(self._partitions):
                try:
                    state = await asyncio.to_thread(self._round, tp)
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    _log.error("moving %s failed: %s; the move is dropped", tp, e)
                    self._partitions.discard(tp)
                    lm = self.replica_manager.log_manager
                    dest = lm.future_log_dir_of(tp)
                    lm.abort_future_log(tp)
                    if dest is not None:
                        lm.maybe_handle_io_error(dest, f"moving {tp}", e)
                    continue
                if state == "done" or state == "gone":
                    self._partitions.discard(tp)
                elif state == "copied":
                    busy = True
            if not busy:
                await asyncio.sleep(self.idle_s)

    def _round(self, tp: TopicPartition) -> str:
        """One round for ``tp`` on a worker thread: "copied" (data moved),
        "level" (nothing to copy yet), "done" (swapped in) or "gone"."""
        rm = self.replica_manager
        lm = rm.log_manager
        partition = rm.partition(tp)
        future = lm.future_log(tp)
        if partition is None or future is None:
            return "gone"
        copied = self._copy(partition.log, future)
        if future.log_end_offset < partition.log.log_end_offset:
            return "copied" if copied else "level"

        def catch_up(current: Log) -> bool:
            while self._copy(current, future):
                pass
            return future.log_end_offset == current.log_end_offset

        if partition.maybe_replace_current_with_future_replica(
            catch_up, lambda: lm.replace_current_with_future_log(tp)
        ):
            return "done"
        return "copied" if copied else "level"

    def _copy(self, current: Log, future: Log) -> bool:
        """Bring ``future`` one read closer to ``current``; True if it moved."""
        leo = future.log_end_offset
        if leo > current.log_end_offset:  # the current log was truncated
            future.truncate_to(current.log_end_offset)
            return True
        if current.log_start_offset > leo:  # retention went past the copy
            segments = current.segments
            future.truncate_fully_and_start_at(segments[0].base_offset if segments else 0)
            return True
        if leo == current.log_end_offset:
            return False
        data = current.read_bytes(leo, self.max_bytes, FetchIsolation.LOG_END)
        if not data:
            return False
        future.append_as_follower(data)
        return future.log_end_offset > leo
