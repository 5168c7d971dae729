"""LogManager: every partition log of a broker, across its ``log.dirs``.

At start-up, for each log directory:

* the directory is created if missing and locked: ``.lock`` is ``flock``-ed for
  the LogManager's lifetime, so a second broker (or LogManager) on the same
  directory fails with LogDirLockedError, while a lock file left by a dead
  process does not block (the kernel released its lock);
* ``.kafka_cleanshutdown`` tells whether the last shutdown was clean; when it
  was not, every log is recovered from its recovery point on;
* ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint``
  give each partition's recovery point and log start offset;
* every ``<topic>-<partition>`` directory is loaded by a pool of
  ``num.recovery.threads.per.data.dir`` threads; directories renamed
  ``<topic>-<partition>.<id>-delete`` by an interrupted deletion are removed;
  ``<topic>-<partition>.<id>-future`` ones, moves between directories the
  stop cut short, are loaded as the partitions' future logs, and the moves go
  on (``_resolve_future_logs``);
* the clean-shutdown marker is removed, so a crash from here on is seen.

A directory that cannot be created, locked or loaded for an I/O error is
offline from the start; the broker starts on the others (Kafka's
``createAndValidateLogDirs`` and ``loadLogs``), and fails only when none is
left. While running, an I/O error on any file of a directory takes the whole
directory offline through the :class:`LogDirFailureChannel` (Kafka's
``maybeHandleIOException``): its logs are dropped and their handles released,
new partitions go to the live directories only, and no checkpoint or clean
shutdown marker is written there any more. A full disk (ENOSPC) counts as
such an error when the broker has other directories; a broker with one
directory keeps refusing the writes that need space and recovers when space
is freed (its one directory going offline would stop it).

While running, background tasks apply retention
(``log.retention.check.interval.ms``), flush logs whose ``flush.ms`` has passed
(``log.flush.scheduler.interval.ms``) and write the two checkpoints
(``log.flush.offset.checkpoint.interval.ms``,
``log.flush.start.offset.checkpoint.interval.ms``). ``shutdown`` flushes and
closes every log, writes the checkpoints and the clean-shutdown marker, and
releases the locks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno as errno_mod
import fcntl
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pylog.common.topic_partition import TopicPartition
from pylog.common.utils.time import Clock, now_ms
from pylog.errors import KafkaStorageError, LogDirLockedError
from pylog.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
)
from pylog.log.cleaner import LogCleaner
from pylog.log.config import BrokerLogConfig, LogConfig
from pylog.log.files import DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX
from pylog.log.log import Log
from pylog.log.log_dir_failure_channel import LogDirFailureChannel, is_disk_error
from pylog.log.partition_metadata import PartitionMetadataFile, new_topic_id
from pylog.log.producer_state import ProducerStateManager
from pylog.log.scheduler import Scheduler

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LOCK_FILE",
    "LogManager",
    "parse_topic_partition_name",
]

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_NO_SPACE = (errno_mod.ENOSPC, errno_mod.EDQUOT)
# Kafka caps a directory name at 255 bytes; the topic part of a "-delete" name
# is cut to leave room for ".<32 hex>-delete".
_MAX_DIR_NAME = 255

_log = logging.getLogger("pylog.log")


def parse_topic_partition_name(name: str) -> TopicPartition:
    """``<topic>-<partition>`` (optionally ``.<id>-delete`` / ``-future`` / ``-stray``).

    Raises ValueError for a name that is not a partition directory.
    """
    base = name
    if base.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        dot = base.rfind(".")
        if dot < 0:
            raise ValueError(f"{name!r} is not a partition directory name")
        base = base[:dot]
    dash = base.rfind("-")
    if dash <= 0 or dash == len(base) - 1:
        raise ValueError(f"{name!r} is not a partition directory name")
    topic, partition = base[:dash], base[dash + 1 :]
    if not partition.isdigit():
        raise ValueError(f"{name!r} is not a partition directory name")
    return TopicPartition(topic, int(partition))


def _topic_id_in(partition_dir: str) -> str | None:
    """The topic id in a partition directory's ``partition.metadata``, if readable."""
    try:
        return PartitionMetadataFile(partition_dir).read()
    except Exception:
        return None


def delete_dir_name(tp: TopicPartition) -> str:
    """Kafka's name for a partition directory awaiting deletion."""
    suffix = f".{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    prefix = f"{tp.topic}-{tp.partition}"
    room = _MAX_DIR_NAME - len(suffix.encode()) - len(f"-{tp.partition}".encode())
    if len(prefix.encode()) + len(suffix.encode()) > _MAX_DIR_NAME:
        prefix = tp.topic.encode()[:room].decode("utf-8", "ignore") + f"-{tp.partition}"
    return prefix + suffix


@dataclass
class _LogDir:
    path: str
    lock_fd: int
    recovery_checkpoint: OffsetCheckpointFile
    log_start_checkpoint: OffsetCheckpointFile
    offline: bool = False


class LogManager:
    """Owns the logs of every ``log.dirs`` entry. Built loaded; ``startup`` starts
    the background tasks; ``shutdown`` closes cleanly."""

    def __init__(
        self,
        config: BrokerLogConfig | Mapping[str, Any],
        *,
        topic_configs: Mapping[str, Mapping[str, Any]] | None = None,
        scheduler: Scheduler | None = None,
        clock: Clock = now_ms,
        log_dir_failure_channel: LogDirFailureChannel | None = None,
    ) -> None:
        self.log_dir_failure_channel = log_dir_failure_channel or LogDirFailureChannel()
        self.config = (
            config if isinstance(config, BrokerLogConfig) else BrokerLogConfig.from_props(config)
        )
        self.default_config = self.config.default_log_config
        self._topic_overrides: dict[str, dict[str, Any]] = {
            t: dict(p) for t, p in (topic_configs or {}).items()
        }
        self._clock = clock
        self._own_scheduler = scheduler is None
        self.scheduler = scheduler if scheduler is not None else Scheduler(threads=2)
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, str] = {}
        # Replicas being moved to another directory (AlterReplicaLogDirs, KIP-113):
        # the future log and its directory, and where a replica not yet made goes.
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, str] = {}
        self._preferred_dirs: dict[TopicPartition, str] = {}
        self._topic_ids: dict[str, str] = {}
        self._dirs: list[_LogDir] = []
        self._started = False
        self._shut_down = False
        self.had_clean_shutdown: dict[str, bool] = {}
        # First to hear of a failed directory: its logs go before anyone else acts.
        self.log_dir_failure_channel.add_listener(self._on_log_dir_failure)

        try:
            self._create_and_lock_dirs()
            self._load_logs()
            if not self.live_log_dirs:
                raise KafkaStorageError(
                    f"every log directory is offline: {', '.join(self.log_dirs)}"
                )
            self.cleaner = LogCleaner(self.config, self.log_dirs, self._logs_with_dirs, clock)
            for tp in self._future_logs:  # moves resumed: not cleaned until they end
                self.cleaner.abort_and_pause_cleaning(tp)
        except BaseException:
            self._close_all_quietly()
            self._release_locks()
            if self._own_scheduler:
                self.scheduler.shutdown()
            raise

    # ------------------------------------------------------------------ start-up

    @property
    def log_dirs(self) -> list[str]:
        """Every configured directory, offline ones included."""
        return [d.path for d in self._dirs]

    @property
    def live_log_dirs(self) -> list[str]:
        with self._lock:
            return [d.path for d in self._dirs if not d.offline]

    @property
    def offline_log_dirs(self) -> list[str]:
        with self._lock:
            return [d.path for d in self._dirs if d.offline]

    def is_offline(self, log_dir: str) -> bool:
        path = os.path.abspath(log_dir)
        with self._lock:
            return any(d.offline for d in self._dirs if d.path == path)

    def _offline_at_start(self, d: _LogDir, what: str, error: BaseException) -> None:
        d.offline = True
        self.log_dir_failure_channel.maybe_add_offline_log_dir(d.path, what, error)

    def _create_and_lock_dirs(self) -> None:
        seen: set[str] = set()
        for raw in self.config.log_dirs:
            path = os.path.abspath(raw)
            if path in seen:
                raise KafkaStorageError(f"duplicate log directory {path} in log.dirs")
            seen.add(path)
            d = _LogDir(
                path,
                -1,
                OffsetCheckpointFile(os.path.join(path, RECOVERY_POINT_CHECKPOINT)),
                OffsetCheckpointFile(os.path.join(path, LOG_START_OFFSET_CHECKPOINT)),
            )
            self._dirs.append(d)
            try:
                os.makedirs(path, exist_ok=True)
                d.lock_fd = self._lock_dir(path)
            except LogDirLockedError:
                raise  # another broker's directory: never start on it
            except (OSError, KafkaStorageError) as e:
                if not is_disk_error(e):
                    raise
                self._offline_at_start(d, "cannot create or lock the log directory", e)

    @staticmethod
    def _lock_dir(path: str) -> int:
        lock_path = os.path.join(path, LOCK_FILE)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open lock file {lock_path}: {e}", e.errno) from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno_mod.EWOULDBLOCK, errno_mod.EAGAIN, errno_mod.EACCES):
                raise LogDirLockedError(
                    f"log directory {path} is in use by another process or LogManager "
                    f"({lock_path} is locked); is another broker running on it?",
                    e.errno,
                ) from e
            raise KafkaStorageError(f"cannot lock {lock_path}: {e}", e.errno) from e
        return fd

    def _read_checkpoint(self, cp: OffsetCheckpointFile) -> dict[TopicPartition, int]:
        try:
            return cp.read()
        except CorruptCheckpointError as e:
            _log.warning("ignoring %s: %s; its partitions are recovered from scratch", cp.path, e)
            return {}

    def _load_logs(self) -> None:
        # Filled by _load_dir: future logs loaded (tp, log, their log dir) and
        # ``-delete`` directories found (tp or None, path), removed only once
        # the future logs are resolved (one may be the proof of a swap).
        self._pending_futures: list[tuple[TopicPartition, Log, str]] = []
        self._pending_deletes: list[tuple[TopicPartition | None, str]] = []
        self._load_dirs()
        self._resolve_future_logs()
        for _tp, sub in self._pending_deletes:
            _log.warning("deleting %s: a partition deletion interrupted by shutdown", sub)
            shutil.rmtree(sub, ignore_errors=True)
        self._pending_deletes = []

    def _resolve_future_logs(self) -> None:
        """The ``-future`` logs a stop left (Kafka's LogManager loads them as
        future logs): a move not finished, whose current log is there, goes on
        (the ReplicaManager resumes its copy once the partition is made); one
        whose current log was renamed ``-delete`` was caught up and being
        swapped in, so it becomes the partition's log; one whose source
        partition is gone is removed, unless a directory is offline (its
        current log may be there: the copy is kept on disk for the next start)."""
        # The current logs renamed -delete: (partition, topic id). A long topic
        # name is cut short in a -delete name, so the topic id matches too.
        doomed = [(tp, _topic_id_in(sub)) for tp, sub in self._pending_deletes if tp is not None]

        def was_swapped(tp: TopicPartition, topic_id: str | None) -> bool:
            return any(
                (t == tp and (i is None or topic_id is None or i == topic_id))
                or (t.partition == tp.partition and topic_id is not None and i == topic_id)
                for t, i in doomed
            )

        resolved: set[TopicPartition] = set()
        for tp, log, parent in self._pending_futures:
            current_dir = self._log_dir_of.get(tp)
            if tp in resolved or current_dir == parent:
                _log.warning("removing %s: a second copy of %s", log.dir, tp)
                self._discard(log, remove=True)
                continue
            resolved.add(tp)
            if current_dir is not None:
                _log.info("%s: the move of %s from %s resumes at offset %d", log.dir, tp,
                          current_dir, log.log_end_offset)  # fmt: skip
                with self._lock:
                    self._future_logs[tp] = log
                    self._future_dir_of[tp] = parent
                continue
            if was_swapped(tp, _topic_id_in(log.dir)):
                self._complete_swap(tp, log, parent)
            elif self.offline_log_dirs:
                _log.warning("%s: no log of %s to move it from; kept, as it may be on the "
                             "offline directories %s", log.dir, tp,
                             ", ".join(self.offline_log_dirs))  # fmt: skip
                self._discard(log, remove=False)
            else:
                _log.warning("removing %s: the move of %s has no source any more", log.dir, tp)
                self._discard(log, remove=True)
        self._pending_futures = []

    def _complete_swap(self, tp: TopicPartition, future: Log, parent: str) -> None:
        final = os.path.join(parent, str(tp))
        _log.warning("completing the move of %s: %s becomes %s", tp, future.dir, final)
        future.close()
        os.rename(future.dir, final)
        fsync_dir(parent)
        log = self._load_log(tp, final, 0, 0, False)
        with self._lock:
            self._logs[tp] = log
            self._log_dir_of[tp] = parent

    @staticmethod
    def _discard(log: Log, *, remove: bool) -> None:
        with contextlib.suppress(Exception):
            log.close_handlers()
        if remove:
            shutil.rmtree(log.dir, ignore_errors=True)

    def _load_dirs(self) -> None:
        for d in self._dirs:
            if d.offline:
                continue
            try:
                self._load_dir(d)
            except (OSError, KafkaStorageError) as e:
                if not is_disk_error(e):
                    raise
                with self._lock:
                    logs = [self._logs.pop(tp) for tp, p in list(self._log_dir_of.items())
                            if p == d.path and tp in self._logs]  # fmt: skip
                    for tp in [tp for tp, p in self._log_dir_of.items() if p == d.path]:
                        del self._log_dir_of[tp]
                    logs += [f for _tp, f, p in self._pending_futures if p == d.path]
                    self._pending_futures = [e for e in self._pending_futures if e[2] != d.path]
                    self._pending_deletes = [
                        e for e in self._pending_deletes if not e[1].startswith(d.path + os.sep)
                    ]
                for log in logs:
                    with contextlib.suppress(Exception):
                        log.close_handlers()
                self._offline_at_start(d, "loading the logs failed", e)

    def _load_dir(self, d: _LogDir) -> None:
        marker = os.path.join(d.path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[d.path] = clean
        if not clean:
            _log.debug("%s: no clean-shutdown marker; logs past their recovery point "
                       "will be recovered", d.path)  # fmt: skip
        recovery_points = self._read_checkpoint(d.recovery_checkpoint)
        log_starts = self._read_checkpoint(d.log_start_checkpoint)
        jobs: dict[TopicPartition, tuple[str, int, int]] = {}
        # A future log is keyed by its directory: a partition has at most one
        # log per log dir, so the dir's checkpoints hold its offsets.
        future_jobs: dict[str, tuple[TopicPartition, int, int]] = {}
        for name in sorted(os.listdir(d.path)):
            sub = os.path.join(d.path, name)
            if not os.path.isdir(sub) or name.startswith("."):
                continue
            try:
                tp = parse_topic_partition_name(name)
            except ValueError:
                if name.endswith(DELETE_DIR_SUFFIX):
                    self._pending_deletes.append((None, sub))
                else:
                    _log.warning("skipping %s: not a <topic>-<partition> directory", sub)
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self._pending_deletes.append((tp, sub))
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                future_jobs[sub] = (tp, recovery_points.get(tp, 0), log_starts.get(tp, 0))
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                _log.warning("skipping %s: stray replicas are not supported", sub)
                continue
            jobs[tp] = (sub, recovery_points.get(tp, 0), log_starts.get(tp, 0))

        threads = max(1, self.config.num_recovery_threads_per_data_dir)
        with concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix=f"pylog-recovery-{os.path.basename(d.path)}"
        ) as pool:
            futures = {
                pool.submit(self._load_log, tp, sub, rp, ls, clean): tp
                for tp, (sub, rp, ls) in jobs.items()
            }
            moving = {
                pool.submit(self._load_log, tp, sub, rp, ls, clean): tp
                for sub, (tp, rp, ls) in future_jobs.items()
            }
            errors: list[BaseException] = []
            for fut in concurrent.futures.as_completed([*futures, *moving]):
                tp = futures[fut] if fut in futures else moving[fut]
                try:
                    log = fut.result()
                except BaseException as e:
                    errors.append(e)
                    continue
                if fut in moving:
                    with self._lock:
                        self._pending_futures.append((tp, log, d.path))
                    continue
                with self._lock:
                    other = self._log_dir_of.get(tp)
                    if other is not None:
                        log.close()
                        errors.append(
                            KafkaStorageError(
                                f"partition {tp} has directories in both {other} and {d.path}"
                            )
                        )
                        continue
                    self._logs[tp] = log
                    self._log_dir_of[tp] = d.path
            if errors:
                raise errors[0]
        # Every log of this directory loaded: from now on a crash must be noticed.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(marker)
            fsync_dir(d.path)

    def _load_log(
        self, tp: TopicPartition, dir: str, recovery_point: int, log_start: int, clean: bool
    ) -> Log:
        config = self.config_for(tp.topic)
        meta = PartitionMetadataFile(dir)
        topic_id = meta.read()
        log = Log.open(
            dir,
            config,
            log_start_offset=log_start,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
            scheduler=self.scheduler,
            clock=self._clock,
            producer_id_expiration_ms=self.config.producer_id_expiration_ms,
        )
        if topic_id is not None:
            with self._lock:
                known = self._topic_ids.setdefault(tp.topic, topic_id)
            if known != topic_id:
                _log.warning(
                    "%s holds topic id %s but other partitions of %s have %s",
                    meta.path,
                    topic_id,
                    tp.topic,
                    known,
                )
        return log

    def startup(self) -> None:
        """Start the background tasks (retention, flush, checkpoints, producer expiry)."""
        with self._lock:
            if self._started:
                return
            if self._shut_down:
                raise RuntimeError("a LogManager that was shut down cannot start again")
            self._started = True
        if self._own_scheduler:
            self.scheduler.startup()
        c = self.config
        if c.log_cleaner_enable:
            self.cleaner.startup()
        delay = c.log_initial_task_delay_ms
        s = self.scheduler
        s.schedule(
            "kafka-log-retention", self.cleanup_logs, delay, c.log_retention_check_interval_ms
        )
        s.schedule(
            "kafka-log-flusher", self.flush_dirty_logs, delay, c.log_flush_scheduler_interval_ms
        )
        s.schedule(
            "kafka-recovery-point-checkpoint",
            self.checkpoint_recovery_offsets,
            delay,
            c.log_flush_offset_checkpoint_interval_ms,
        )
        s.schedule(
            "kafka-log-start-offset-checkpoint",
            self.checkpoint_log_start_offsets,
            delay,
            c.log_flush_start_offset_checkpoint_interval_ms,
        )
        s.schedule(
            "kafka-producer-expiration",
            self.remove_expired_producers,
            c.producer_id_expiration_check_interval_ms,
            c.producer_id_expiration_check_interval_ms,
        )  # fmt: skip

    # ------------------------------------------------------------------ logs

    def config_for(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides.get(topic)
        return self.default_config.with_overrides(overrides) if overrides else self.default_config

    def update_topic_config(self, topic: str, props: Mapping[str, Any]) -> None:
        """Replace a topic's overrides and apply them to its open logs."""
        config = self.default_config.with_overrides(props)
        with self._lock:
            self._topic_overrides[topic] = dict(props)
            logs = [log for tp, log in self._logs.items() if tp.topic == topic]
        for log in logs:
            log.update_config(config)

    def reconfigure(self, config: BrokerLogConfig) -> None:
        """A dynamic broker config changed (Kafka's DynamicLogConfig and
        LogCleaner reconfigure): each log whose topic does not override a key
        takes the new broker default, and the cleaner restarts with its new
        keys when they changed."""
        old = self.config
        with self._lock:
            self.config = config
            self.default_config = config.default_log_config
            logs = list(self._logs.items())
            overrides = {t: dict(p) for t, p in self._topic_overrides.items()}
        for tp, log in logs:
            ps = log.producer_state_manager
            if isinstance(ps, ProducerStateManager):
                ps.producer_id_expiration_ms = config.producer_id_expiration_ms
            props = overrides.get(tp.topic)
            log.update_config(
                config.default_log_config.with_overrides(props)
                if props
                else config.default_log_config
            )
        if self.cleaner.reconfigure_needed(old, config):
            self.cleaner.reconfigure(config)

    def _logs_with_dirs(self) -> dict[TopicPartition, tuple[Log, str]]:
        with self._lock:
            return {tp: (log, self._log_dir_of[tp]) for tp, log in self._logs.items()}

    def get_log(self, tp: TopicPartition | tuple[str, int]) -> Log | None:
        with self._lock:
            return self._logs.get(TopicPartition(tp[0], tp[1]))

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    def logs_in_dir(self, path: str) -> dict[TopicPartition, Log]:
        path = os.path.abspath(path)
        with self._lock:
            return {tp: log for tp, log in self._logs.items() if self._log_dir_of[tp] == path}

    def _all_logs_in_dir(self, path: str) -> dict[TopicPartition, Log]:
        """The current and the future logs in ``path`` (never both of one
        partition: a move goes to another directory), as Kafka's logsByDir."""
        with self._lock:
            logs = {tp: log for tp, log in self._logs.items() if self._log_dir_of[tp] == path}
            logs.update((tp, log) for tp, log in self._future_logs.items()
                        if self._future_dir_of[tp] == path)  # fmt: skip
            return logs

    def log_dir_of(self, tp: TopicPartition | tuple[str, int]) -> str | None:
        with self._lock:
            return self._log_dir_of.get(TopicPartition(tp[0], tp[1]))

    def topic_id(self, topic: str) -> str | None:
        with self._lock:
            return self._topic_ids.get(topic)

    def __contains__(self, tp: object) -> bool:
        with self._lock:
            return tp in self._logs

    def __len__(self) -> int:
        with self._lock:
            return len(self._logs)

    def _next_log_dir(self) -> _LogDir:
        """Kafka's nextLogDirs: the live directory holding the fewest partitions
        (the first listed on a tie)."""
        live = [d for d in self._dirs if not d.offline]
        if not live:
            raise KafkaStorageError("no log directory is online")
        counts = {d.path: 0 for d in live}
        for path in self._log_dir_of.values():
            if path in counts:
                counts[path] += 1
        return min(live, key=lambda d: counts[d.path])

    def get_or_create_log(
        self,
        tp: TopicPartition | tuple[str, int],
        *,
        topic_id: str | None = None,
        config: LogConfig | None = None,
    ) -> Log:
        """The partition's log, created in the log dir holding the fewest logs if new.

        The topic id is kept in ``partition.metadata``: ``topic_id`` when given
        (InconsistentTopicIdError if the log has another), else the id other
        partitions of the topic have, else a new one.
        """
        tp = TopicPartition(tp[0], tp[1])
        if tp.partition < 0 or not tp.topic or "/" in tp.topic or tp.topic in (".", ".."):
            raise ValueError(f"invalid topic partition {tp!r}")
        with self._lock:
            self._check_running()
            log = self._logs.get(tp)
            if log is None:
                preferred = self._preferred_dirs.pop(tp, None)
                target = (
                    next((d for d in self._dirs if d.path == preferred and not d.offline), None)
                    or self._next_log_dir()
                )
                dir = os.path.join(target.path, str(tp))
                try:
                    log = Log.open(
                        dir,
                        config if config is not None else self.config_for(tp.topic),
                        scheduler=self.scheduler,
                        clock=self._clock,
                        producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                    )
                except KafkaStorageError as e:
                    self.maybe_handle_io_error(dir, f"creating the log of {tp}", e)
                    raise
                self._logs[tp] = log
                self._log_dir_of[tp] = target.path
                _log.info("created log for partition %s in %s", tp, target.path)
            wanted = topic_id or self._topic_ids.get(tp.topic) or new_topic_id()
            stored = PartitionMetadataFile(log.dir).check_or_write(wanted)
            self._topic_ids.setdefault(tp.topic, stored)
            return log

    # ------------------------------------------------------------------ moves between dirs

    def log_dir_path(self, path: str) -> str | None:
        """The configured directory ``path`` names (made absolute), or None."""
        path = os.path.abspath(path)
        return path if any(d.path == path for d in self._dirs) else None

    def maybe_update_preferred_log_dir(self, tp: TopicPartition, log_dir: str) -> None:
        """Where the replica goes when it is made (Kafka's preferredLogDirs):
        AlterReplicaLogDirs for a partition this broker does not hold yet."""
        with self._lock:
            if tp not in self._logs:
                self._preferred_dirs[tp] = os.path.abspath(log_dir)

    def all_future_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._future_logs)

    def future_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._future_logs.get(tp)

    def future_log_dir_of(self, tp: TopicPartition) -> str | None:
        with self._lock:
            return self._future_dir_of.get(tp)

    def future_logs_in_dir(self, path: str) -> dict[TopicPartition, Log]:
        path = os.path.abspath(path)
        with self._lock:
            return {tp: log for tp, log in self._future_logs.items()
                    if self._future_dir_of[tp] == path}  # fmt: skip

    def create_future_log(self, tp: TopicPartition, log_dir: str, topic_id: str | None) -> Log:
        """The empty future log of ``tp`` in ``log_dir``
        (``<topic>-<partition>.<id>-future``, Kafka's name), starting where the
        current log's first segment does; its cleaning pauses until the move ends."""
        path = os.path.abspath(log_dir)
        with self._lock:
            self._check_running()
            current = self._logs.get(tp)
            if current is None:
                raise KafkaStorageError(f"no log of {tp} to move")
            d = self._dir(path)
            if d.offline:
                raise KafkaStorageError(f"log directory {path} is offline")
            existing = self._future_logs.get(tp)
            if existing is not None:
                return existing
            dir = os.path.join(path, f"{tp}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
            try:
                log = Log.open(
                    dir,
                    current.config,
                    scheduler=self.scheduler,
                    clock=self._clock,
                    producer_id_expiration_ms=self.config.producer_id_expiration_ms,
                )
                if topic_id:
                    PartitionMetadataFile(dir).check_or_write(topic_id)
            except KafkaStorageError as e:
                self.maybe_handle_io_error(dir, f"creating the future log of {tp}", e)
                raise
            # From the first segment's base: a read from there returns whole
            # batches, none starting below the future log's end.
            start = current.segments[0].base_offset if current.segments else 0
            if start > 0:
                log.truncate_fully_and_start_at(start)
            self._future_logs[tp] = log
            self._future_dir_of[tp] = path
        self.cleaner.abort_and_pause_cleaning(tp)
        _log.info("moving %s from %s to %s", tp, self._log_dir_of.get(tp), path)
        return log

    def abort_future_log(self, tp: TopicPartition) -> None:
        """Drop a move in flight: the future log is deleted, cleaning resumes."""
        with self._lock:
            log = self._future_logs.pop(tp, None)
            self._future_dir_of.pop(tp, None)
        if log is None:
            return
        with contextlib.suppress(Exception):
            log.close_handlers()
        shutil.rmtree(log.dir, ignore_errors=True)
        self.cleaner.resume_cleaning([tp])

    def replace_current_with_future_log(self, tp: TopicPartition) -> Log:
        """Kafka's replaceCurrentWithFutureLog, with the caller holding off
        every append to ``tp``: the current directory is renamed
        ``<name>.<id>-delete`` (its open files keep serving reads under way)
        and deleted after ``file.delete.delay.ms``; the caught-up future
        directory is renamed to the partition's name in its directory and
        opened there. Returns the partition's new log."""
        with self._lock:
            future = self._future_logs.pop(tp)
            dest = self._future_dir_of.pop(tp)
            current = self._logs[tp]
            parent = self._log_dir_of[tp]
        future.close()
        final = os.path.join(dest, str(tp))
        doomed = os.path.join(parent, delete_dir_name(tp))
        # The current first: a stop between the renames leaves the future
        # directory alone for its partition, and loading completes the move.
        try:
            os.rename(current.dir, doomed)
            fsync_dir(parent)
        except OSError as e:
            self.maybe_handle_io_error(parent, f"renaming {current.dir}", e)
            raise KafkaStorageError(f"cannot rename {current.dir}: {e}", e.errno) from e
        try:
            os.rename(future.dir, final)
            fsync_dir(dest)
            log = Log.open(
                final,
                current.config,
                log_start_offset=current.log_start_offset,
                recovery_point=future.log_end_offset,
                scheduler=self.scheduler,
                clock=self._clock,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
        except (OSError, KafkaStorageError) as e:
            self.maybe_handle_io_error(dest, f"opening the moved log of {tp}", e)
            raise
        log.update_high_watermark(current.high_watermark)
        with self._lock:
            self._logs[tp] = log
            self._log_dir_of[tp] = dest
        for path in (parent, dest):
            with contextlib.suppress(KafkaStorageError):
                self._checkpoint_dir(path)
        self.cleaner.update_checkpoints(parent, remove=tp)
        self.cleaner.resume_cleaning([tp])

        def delete() -> None:
            with contextlib.suppress(Exception):
                current.close_handlers()
            shutil.rmtree(doomed, ignore_errors=True)
            _log.info("deleted %s", doomed)

        self.scheduler.schedule_once(
            f"delete-{os.path.basename(doomed)}", delete, current.config.file_delete_delay_ms
        )
        _log.info("moved %s from %s to %s", tp, parent, dest)
        return log

    def async_delete(self, tp: TopicPartition | tuple[str, int]) -> Log | None:
        """Remove a partition: its directory is renamed ``<name>.<id>-delete`` at
        once (so a restart finishes the job) and removed in the background after
        ``file.delete.delay.ms``."""
        tp = TopicPartition(tp[0], tp[1])
        with self._lock:
            self._check_running()
            log = self._logs.pop(tp, None)
            parent = self._log_dir_of.pop(tp, None)
            if log is None or parent is None:
                return None
            if not any(t.topic == tp.topic for t in self._logs):
                self._topic_ids.pop(tp.topic, None)
        self.abort_future_log(tp)
        # A clean in progress stops first: it must not swap into a closed log.
        self.cleaner.abort_cleaning(tp)
        log.close()
        target = os.path.join(parent, delete_dir_name(tp))
        try:
            os.rename(log.dir, target)
            fsync_dir(parent)
        except OSError as e:
            raise KafkaStorageError(f"cannot rename {log.dir} for deletion: {e}", e.errno) from e
        _log.info("scheduled deletion of partition %s (%s)", tp, target)
        self._checkpoint_dir(parent)
        self.cleaner.update_checkpoints(parent, remove=tp)

        def delete() -> None:
            shutil.rmtree(target, ignore_errors=True)
            _log.info("deleted %s", target)

        self.scheduler.schedule_once(
            f"delete-{os.path.basename(target)}", delete, log.config.file_delete_delay_ms
        )
        return log

    def _check_running(self) -> None:
        if self._shut_down:
            raise KafkaStorageError("the LogManager is shut down")

    # ------------------------------------------------------------------ failed dirs

    def log_dir_for_path(self, path: str) -> str | None:
        """The configured log directory ``path`` lies in (a partition's
        directory, a segment file, the directory itself), or None."""
        path = os.path.abspath(path)
        for d in self._dirs:
            if path == d.path or path.startswith(d.path + os.sep):
                return d.path
        return None

    def maybe_handle_io_error(self, path: str, message: str, error: BaseException) -> bool:
        """An error met on a file under ``path``: when the disk gave it, the
        directory goes offline (Kafka's maybeHandleIOException). True when the
        directory is offline now (this call or an earlier one)."""
        if not is_disk_error(error):
            return False
        log_dir = self.log_dir_for_path(path)
        if log_dir is None:
            return False
        code = getattr(error, "errno", None)
        if code in _NO_SPACE and len(self._dirs) == 1:
            # A lone directory stays: writes needing space fail until freed.
            return False
        self.log_dir_failure_channel.maybe_add_offline_log_dir(log_dir, message, error)
        return True

    def _on_log_dir_failure(self, log_dir: str) -> None:
        self.handle_log_dir_failure(log_dir)

    def handle_log_dir_failure(self, log_dir: str) -> list[TopicPartition]:
        """Take ``log_dir`` offline (Kafka's LogManager.handleLogDirFailure): its
        logs leave the manager and release their files without writing, and
        it gets no new partition. Returns the partitions it held."""
        path = os.path.abspath(log_dir)
        with self._lock:
            d = next((d for d in self._dirs if d.path == path), None)
            if d is None:
                return []
            d.offline = True
            gone = sorted(tp for tp, p in self._log_dir_of.items() if p == path)
            logs = [self._logs.pop(tp) for tp in gone]
            for tp in gone:
                del self._log_dir_of[tp]
            # A move into the failed directory, or out of it, stops.
            moving = [tp for tp, p in self._future_dir_of.items() if p == path or tp in gone]
            for tp in moving:
                logs.append(self._future_logs.pop(tp))
                del self._future_dir_of[tp]
            live = [x.path for x in self._dirs if not x.offline]
        for tp in gone:
            with contextlib.suppress(Exception):
                self.cleaner.abort_cleaning(tp)
        for log in logs:
            with contextlib.suppress(Exception):
                log.close_handlers()
        if d.lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(d.lock_fd)
            d.lock_fd = -1
        _log.error(
            "log directory %s is offline: %d partitions stopped there; live directories: %s",
            path,
            len(gone),
            ", ".join(live) or "none",
        )
        return gone

    # ------------------------------------------------------------------ background work

    def cleanup_logs(self) -> int:
        """Retention: delete old segments of every log. Returns segments deleted."""
        total = 0
        for tp, log in self.all_logs().items():
            if log.closed:
                continue
            try:
                total += log.delete_old_segments()
            except KafkaStorageError as e:
                if not self.maybe_handle_io_error(log.dir, f"retention of {tp}", e):
                    _log.exception("retention of partition %s failed", tp)
        return total

    def flush_dirty_logs(self) -> None:
        """Flush every log whose ``flush.ms`` has passed since its last flush."""
        now = self._clock()
        for tp, log in [*self.all_logs().items(), *self.all_future_logs().items()]:
            if log.closed:
                continue
            try:
                if now - log.last_flush_time >= log.config.flush_ms:
                    log.flush()
            except KafkaStorageError as e:
                if not self.maybe_handle_io_error(log.dir, f"flushing {tp}", e):
                    _log.exception("flush of partition %s failed", tp)

    def remove_expired_producers(self) -> None:
        now = self._clock()
        for log in self.all_logs().values():
            ps = log.producer_state_manager
            if isinstance(ps, ProducerStateManager):
                ps.remove_expired_producers(now)

    def _dir(self, path: str) -> _LogDir:
        for d in self._dirs:
            if d.path == path:
                return d
        raise KeyError(path)

    def _checkpoint_dir(self, path: str) -> None:
        self._checkpoint_recovery_offsets_in(self._dir(path))
        self._checkpoint_log_start_offsets_in(self._dir(path))

    def _checkpoint_recovery_offsets_in(self, d: _LogDir) -> None:
        logs = self._all_logs_in_dir(d.path)
        d.recovery_checkpoint.write({tp: log.recovery_point for tp, log in logs.items()})

    def _checkpoint_log_start_offsets_in(self, d: _LogDir) -> None:
        # Only starts past the first segment's base say something the files do not.
        logs = self._all_logs_in_dir(d.path)
        starts: dict[TopicPartition, int] = {}
        for tp, log in logs.items():
            segments = log.segments
            if segments and log.log_start_offset > segments[0].base_offset:
                starts[tp] = log.log_start_offset
        d.log_start_checkpoint.write(starts)

    def checkpoint_recovery_offsets(self) -> None:
        for d in self._dirs:
            if d.offline:
                continue
            try:
                self._checkpoint_recovery_offsets_in(d)
            except KafkaStorageError as e:
                if not self.maybe_handle_io_error(d.path, "writing the recovery points", e):
                    _log.exception("writing %s failed", d.recovery_checkpoint.path)

    def checkpoint_log_start_offsets(self) -> None:
        for d in self._dirs:
            if d.offline:
                continue
            try:
                self._checkpoint_log_start_offsets_in(d)
            except KafkaStorageError as e:
                if not self.maybe_handle_io_error(d.path, "writing the log start offsets", e):
                    _log.exception("writing %s failed", d.log_start_checkpoint.path)

    def truncate_to(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Truncate logs (a follower matching its leader) and checkpoint their dirs."""
        dirs: set[str] = set()
        for tp, offset in offsets.items():
            log = self.get_log(tp)
            if log is None:
                continue
            tp = TopicPartition(tp[0], tp[1])
            path = self._log_dir_of[tp]
            # Cleaning pauses across the truncation; the clean head cannot
            # then reach past the new end.
            self.cleaner.abort_and_pause_cleaning(tp)
            try:
                if log.truncate_to(offset):
                    dirs.add(path)
                    self.cleaner.maybe_truncate_checkpoint(path, tp, log.active_segment.base_offset)
            finally:
                self.cleaner.resume_cleaning([tp])
        for path in dirs:
            self._checkpoint_recovery_offsets_in(self._dir(path))

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown
        marker of every directory whose logs all closed, release the locks."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        self.cleaner.shutdown()
        if self._own_scheduler:
            self.scheduler.shutdown()
        else:
            for name in (
                "kafka-log-retention",
                "kafka-log-flusher",
                "kafka-recovery-point-checkpoint",
                "kafka-log-start-offset-checkpoint",
                "kafka-producer-expiration",
            ):
                self.scheduler.cancel(name)
        try:
            for d in self._dirs:
                if d.offline:
                    continue  # nothing is written to a failed disk
                # Future logs too, flushed and checkpointed: a move in flight
                # goes on from where it is at the next start.
                logs = self._all_logs_in_dir(d.path)
                ok = self._close_logs(d, logs.values())
                if not ok:
                    _log.error(
                        "not all logs of %s closed cleanly; no clean-shutdown marker", d.path
                    )
                    continue
                try:
                    self._checkpoint_recovery_offsets_in(d)
                    self._checkpoint_log_start_offsets_in(d)
                    marker = os.path.join(d.path, CLEAN_SHUTDOWN_FILE)
                    with open(marker, "wb") as f:
                        os.fsync(f.fileno())
                    fsync_dir(d.path)
                except (KafkaStorageError, OSError):
                    _log.exception("could not finish the clean shutdown of %s", d.path)
        finally:
            self._release_locks()

    def _close_logs(self, d: _LogDir, logs: Iterable[Log]) -> bool:
        threads = max(1, self.config.num_recovery_threads_per_data_dir)

        def close(log: Log) -> None:
            if not log.closed:
                log.flush()
                log.close()

        ok = True
        with concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="pylog-shutdown"
        ) as pool:
            for fut, log in [(pool.submit(close, log), log) for log in logs]:
                try:
                    fut.result()
                except Exception:
                    _log.exception("closing %s failed", log.dir)
                    ok = False
        return ok

    def _close_all_quietly(self) -> None:
        for log in list(self._logs.values()):
            with contextlib.suppress(Exception):
                log.close()
        self._logs.clear()
        self._log_dir_of.clear()

    def _release_locks(self) -> None:
        for d in self._dirs:
            if d.lock_fd >= 0:
                with contextlib.suppress(OSError):
                    fcntl.flock(d.lock_fd, fcntl.LOCK_UN)
                with contextlib.suppress(OSError):
                    os.close(d.lock_fd)
                d.lock_fd = -1

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"LogManager(dirs={self.log_dirs}, logs={len(self)})"
