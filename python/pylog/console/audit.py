"""The console's audit log: every change it makes or refuses, with who asked
(the principal the cluster knows the console as, and the browser's address),
written to the ``pylog.console.audit`` logger and kept, the last
``AUDIT_KEPT``, for the console's own page."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from pylog.logsafe import quoted

__all__ = ["AuditEntry", "AuditLog"]

AUDIT_KEPT = 500
log = logging.getLogger("pylog.console.audit")


@dataclass(frozen=True)
class AuditEntry:
    when: float
    principal: str
    address: str
    action: str
    target: str
    outcome: str  # "ok", "refused: ...", "failed: ..."


class AuditLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: deque[AuditEntry] = deque(maxlen=AUDIT_KEPT)

    def record(self, principal: str, address: str, action: str, target: str, outcome: str) -> None:
        entry = AuditEntry(time.time(), principal, address, action, target, outcome)
        with self._lock:
            self._entries.append(entry)
        # Names come from the browser: quoted, so a line cannot be forged.
        log.info(
            "console change by %s from %s: %s %s: %s",
            # a signed-in user's name is theirs to choose: quoted unless plain
            principal if principal.isprintable() else quoted(principal),
            quoted(address),
            action,
            quoted(target),
            quoted(outcome),
        )

    def entries(self) -> list[AuditEntry]:
        """Newest first."""
        with self._lock:
            return list(reversed(self._entries))
