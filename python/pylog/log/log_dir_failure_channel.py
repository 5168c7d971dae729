"""LogDirFailureChannel: where an I/O error on any log reports its directory.

Kafka's ``LogDirFailureChannel`` (storage module): whoever meets an
``IOException`` on a file under a log directory calls
``maybeAddOfflineLogDir``; the first report of a directory queues it, later
ones are ignored, and the ReplicaManager's ``LogDirFailureHandler`` takes the
directory offline as a whole (its logs closed, its partitions answering
KAFKA_STORAGE_ERROR, the controller told through
``/log_dir_event_notification``). Here the handler is a listener called on
the reporting thread; it hands the work to the broker's event loop.

Which errors count (:func:`is_disk_error`): an ``OSError``, or a
KafkaStorageError that wraps one (it carries an errno). A KafkaStorageError
without an errno (the LogManager shut down, a corrupt snapshot) says nothing
about the disk.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from pylog.errors import KafkaStorageError

__all__ = ["LogDirFailureChannel", "is_disk_error"]

_log = logging.getLogger("pylog.log")


def is_disk_error(error: BaseException) -> bool:
    """True for an error the disk under a log directory gave."""
    if isinstance(error, KafkaStorageError):
        return error.errno is not None
    return isinstance(error, OSError)


class LogDirFailureChannel:
    """The set of offline log directories, and who to tell when one joins it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offline: set[str] = set()
        self._listeners: list[Callable[[str], None]] = []

    def add_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(log_dir)`` runs once per directory, on the thread that
        reported it; it must not block."""
        with self._lock:
            self._listeners.append(listener)

    def has_offline_log_dir(self, log_dir: str) -> bool:
        with self._lock:
            return os.path.abspath(log_dir) in self._offline

    @property
    def offline_log_dirs(self) -> set[str]:
        with self._lock:
            return set(self._offline)

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, error: BaseException) -> bool:
        """Report ``log_dir`` failed; True the first time (its listeners ran)."""
        path = os.path.abspath(log_dir)
        with self._lock:
            if path in self._offline:
                return False
            self._offline.add(path)
            listeners = list(self._listeners)
        _log.error("log directory %s failed: %s: %s", path, message, error)
        for listener in listeners:
            try:
                listener(path)
            except Exception:
                _log.exception("handling the failure of log directory %s failed", path)
        return True
