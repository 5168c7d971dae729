"""ReplicaAlterLogDirsThread: moves replicas between a broker's log
directories online (KIP-113; AlterReplicaLogDirs).

Kafka runs it as a fetcher whose "leader" is the local current log: each
round reads the next batches of the current log (to its end, as a follower
reads) and appends them byte for byte to the future log in the destination
directory; once the future log is level with the current one,
``Partition.maybeReplaceCurrentWithFutureReplica`` swaps them while no append
can run, and the partition serves the moved log from then on.

Here each thread is an asyncio task (the ReplicaAlterLogDirsManager runs
``num.replica.alter.log.dirs.threads`` of them), each round's file work on a
worker thread (``max_bytes`` per round, so a move shares the disk with
clients). As Kafka's LocalLeaderEndPoint does, a thread copies one partition
at a time, the same one until it is moved or stops progressing, so each move
ends as soon as it can rather than all of them at the end; and before each
round it asks the broker's AlterLogDirsReplication quota
(``replica.alter.log.dirs.io.max.bytes.per.second``), waiting while the
bytes copied run over the bound. The future log follows what happens to the
current one meanwhile: a follower truncation (marked by the manager)
truncates it too, retention past its end restarts it at the current log's
first segment.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import TYPE_CHECKING, NamedTuple

from pylog.common.topic_partition import TopicPartition
from pylog.log.log import FetchIsolation, Log
from pylog.server.replication_quota_manager import UNBOUNDED

if TYPE_CHECKING:
    from pylog.server.replica_alter_log_dirs_manager import ReplicaAlterLogDirsManager
    from pylog.server.replica_manager import ReplicaManager

__all__ = ["ReplicaAlterLogDirsThread", "Truncation"]

_log = logging.getLogger("pylog.server.alter_log_dirs")

# Longest nap while throttled: a raised throttle is seen within it.
_MAX_THROTTLE_WAIT_S = 0.2
# Rounds per second a throttled copy is cut into at least (smoother pacing).
_ROUNDS_PER_BOUND = 10


class _CopyFailed(Exception):
    """A copy's read of the current log or write of the future log failed:
    ``path`` says which, so only that log's directory is suspected."""

    def __init__(self, path: str, error: Exception) -> None:
        super().__init__(str(error))
        self.path = path
        self.error = error


class Truncation(NamedTuple):
    """A cut of the current log the future log must follow: truncated to
    ``offset``, or (``full``) emptied and restarted there."""

    offset: int
    full: bool


class ReplicaAlterLogDirsThread:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        manager: ReplicaAlterLogDirsManager | None = None,
        *,
        fetcher_id: int = 0,
        max_bytes: int = 1 << 20,
        idle_s: float = 0.02,
    ) -> None:
        self.replica_manager = replica_manager
        self.manager = manager
        self.name = f"ReplicaAlterLogDirsThread-{fetcher_id}"
        self.max_bytes = max_bytes
        self.idle_s = idle_s
        self._partitions: set[TopicPartition] = set()
        # Kafka's inProgressPartition: copied until moved or stalled.
        self._in_progress: TopicPartition | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        # Held by a round on its worker thread: shutdown waits for it, so no
        # copy or swap runs once the LogManager closes the logs.
        self._round_lock = threading.Lock()
        self._stopped = False

    @property
    def partitions(self) -> set[TopicPartition]:
        return set(self._partitions)

    def add_partitions(self, tps: list[TopicPartition]) -> None:
        """Start moving ``tps`` (their future logs exist); on the loop (off
        it they are only noted, and start with the next call on it)."""
        self._partitions.update(tps)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name=self.name)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        self._partitions.difference_update(tps)

    def shutdown(self) -> None:
        """Stop moving; any thread. Returns once a round under way (on a
        worker thread) has finished; the future logs stay, for the next start."""
        task, self._task = self._task, None
        self._partitions.clear()
        if task is not None:
            loop = task.get_loop()
            try:
                on_loop = asyncio.get_running_loop() is loop
            except RuntimeError:
                on_loop = False
            if on_loop:
                task.cancel()
            else:
                with contextlib.suppress(RuntimeError):  # the loop is closed
                    loop.call_soon_threadsafe(task.cancel)
        with self._round_lock:
            self._stopped = True

    def _order(self) -> list[TopicPartition]:
        """The partition in progress first, then the others by name."""
        rest = sorted(self._partitions)
        current = self._in_progress
        if current in self._partitions:
            assert current is not None
            rest.remove(current)
            return [current, *rest]
        return rest

    def _round_bytes(self) -> int:
        bound = self.replica_manager.alter_log_dirs_quota.bound
        if bound >= UNBOUNDED:
            return self.max_bytes
        return max(1, min(self.max_bytes, bound // _ROUNDS_PER_BOUND))

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            if not self._partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            quota = self.replica_manager.alter_log_dirs_quota
            wait_ms = quota.throttle_time_ms()
            if wait_ms > 0:
                await asyncio.sleep(min(wait_ms / 1000, _MAX_THROTTLE_WAIT_S))
                continue
            progressed = False
            for tp in self._order():
                try:
                    state, copied = await asyncio.to_thread(self._round, tp, self._round_bytes())
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    _log.error("moving %s failed: %s; the move is dropped", tp, e)
                    self._drop(tp)
                    lm = self.replica_manager.log_manager
                    dest = lm.future_log_dir_of(tp)
                    lm.abort_future_log(tp)
                    if isinstance(e, _CopyFailed):
                        lm.maybe_handle_io_error(e.path, f"moving {tp}", e.error)
                    elif dest is not None:
                        lm.maybe_handle_io_error(dest, f"moving {tp}", e)
                    continue
                quota.record(copied)
                if state == "done" or state == "gone":
                    self._drop(tp)
                elif state == "copied":
                    if self._in_progress != tp:
                        self._in_progress = tp
                        _log.info("%s: copying %s (%d partitions to move on this thread)",
                                  self.name, tp, len(self._partitions))  # fmt: skip
                    progressed = True
                    break  # the quota is asked again before the next round
            if not progressed:
                await asyncio.sleep(self.idle_s)

    def _drop(self, tp: TopicPartition) -> None:
        self._partitions.discard(tp)
        if self._in_progress == tp:
            self._in_progress = None

    def _round(self, tp: TopicPartition, max_bytes: int) -> tuple[str, int]:
        """One round for ``tp`` on a worker thread: its state — "copied"
        (data moved), "level" (nothing to copy yet), "done" (swapped in) or
        "gone" — and the bytes copied."""
        with self._round_lock:
            if self._stopped:
                return "level", 0
            return self._round_locked(tp, max_bytes)

    def _round_locked(self, tp: TopicPartition, max_bytes: int) -> tuple[str, int]:
        rm = self.replica_manager
        lm = rm.log_manager
        partition = rm.partition(tp)
        future = lm.future_log(tp)
        if partition is None or future is None:
            return "gone", 0
        cut = self._follow_truncation(tp, future)
        moved, copied = self._copy(partition.log, future, max_bytes)
        moved = moved or cut
        if future.log_end_offset < partition.log.log_end_offset:
            return ("copied" if moved else "level"), copied

        def catch_up(current: Log) -> bool:
            nonlocal copied
            self._follow_truncation(tp, future)
            while True:
                step_moved, step = self._copy(current, future, self.max_bytes)
                copied += step
                if not step_moved:
                    break
            return future.log_end_offset == current.log_end_offset

        if partition.maybe_replace_current_with_future_replica(
            catch_up, lambda: lm.replace_current_with_future_log(tp)
        ):
            return "done", copied
        return ("copied" if moved else "level"), copied

    def _follow_truncation(self, tp: TopicPartition, future: Log) -> bool:
        """Apply a truncation of the current log marked since the last round."""
        cut = self.manager.take_truncation(tp) if self.manager is not None else None
        if cut is None:
            return False
        try:
            if cut.full:
                future.truncate_fully_and_start_at(cut.offset)
                return True
            if future.log_end_offset > cut.offset:
                future.truncate_to(cut.offset)
                return True
        except Exception as e:
            raise _CopyFailed(future.dir, e) from e
        return False

    def _copy(self, current: Log, future: Log, max_bytes: int) -> tuple[bool, int]:
        """Bring ``future`` one read closer to ``current``: whether it changed,
        and the bytes appended."""
        leo = future.log_end_offset
        try:
            if leo > current.log_end_offset:  # the current log was truncated
                future.truncate_to(current.log_end_offset)
                return True, 0
            if current.log_start_offset > leo:  # retention went past the copy
                segments = current.segments
                future.truncate_fully_and_start_at(segments[0].base_offset if segments else 0)
                return True, 0
        except Exception as e:
            raise _CopyFailed(future.dir, e) from e
        if leo == current.log_end_offset:
            return False, 0
        try:
            data = current.read_bytes(leo, max_bytes, FetchIsolation.LOG_END)
        except Exception as e:
            raise _CopyFailed(current.dir, e) from e
        if not data:
            return False, 0
        try:
            future.append_as_follower(data)
        except Exception as e:
            raise _CopyFailed(future.dir, e) from e
        return future.log_end_offset > leo, len(data)
