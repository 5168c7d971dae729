"""CredentialCache: the SCRAM credentials a broker checks logins against.

Kafka's ``CredentialCache``: user → mechanism → :class:`ScramCredential`,
in memory, kept current by the metadata store (loaded at start-up, changed by
AlterUserScramCredentials on this broker or, on a cluster, by the
``/config/changes`` notifications of ``/config/users/<user>``). A login looks
its user up here, never in ZooKeeper. Thread-safe: the store updates it from
its threads while the event loop reads.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["CredentialCache"]


class CredentialCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._lock:
            creds = self._users.get(user)
            return None if creds is None else creds.get(mechanism)

    def credentials(self, user: str) -> dict[ScramMechanism, ScramCredential]:
        with self._lock:
            return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        with self._lock:
            return sorted(self._users)

    def set_user(self, user: str, creds: Mapping[ScramMechanism, ScramCredential]) -> None:
        """Replace ``user``'s credentials (none: the user is gone)."""
        with self._lock:
            if creds:
                self._users[user] = dict(creds)
            else:
                self._users.pop(user, None)

    def replace_all(self, users: Mapping[str, Mapping[ScramMechanism, ScramCredential]]) -> None:
        with self._lock:
            self._users = {u: dict(c) for u, c in users.items() if c}
