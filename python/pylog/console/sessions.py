"""Sign-in with the cluster's own SASL credentials (``pylog console
--sign-in``): each person who signs in gets a :class:`ConsoleAdmin` of their
own, connected as them (the ``--command-config``'s protocol and mechanism,
their user name and password), so the cluster's ACLs decide what each one
sees and may change — the console holds no rights of its own.

A session is a random id in an HttpOnly, SameSite=Strict cookie. Its
credentials stay in this process' memory only while it lives (the client
needs them to connect again after a broker moves): it ends when its person
signs out, after ``idle_s`` without a page, or when ``max_sessions`` newer
ones push it out."""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from dataclasses import dataclass

from pylog.console.admin import ConsoleAdmin
from pylog.errors import KafkaError

__all__ = ["COOKIE", "Session", "Sessions"]

COOKIE = "pylog_console_session"


@dataclass
class Session:
    id: str
    admin: ConsoleAdmin
    last_seen: float


class Sessions:
    def __init__(
        self, template: ConsoleAdmin, *, idle_s: float = 1800.0, max_sessions: int = 200
    ) -> None:
        self.template = template  # bootstrap servers, protocol, mechanism, TLS
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}

    def sign_in(self, username: str, password: str) -> Session | str:
        """A new session once the cluster accepted the credentials (a
        blocking round trip: call it on a worker thread), else why not."""
        if not username or not password:
            return "a user name and a password are needed"
        t = self.template
        admin = ConsoleAdmin(
            t.bootstrap_servers,
            security=dataclasses.replace(t.security, username=username, password=password),
            timeout_ms=t.timeout_ms,
            client_id=t.client_id,
        )
        try:
            admin.check()
        except (KafkaError, OSError) as e:
            admin.close()
            return f"the cluster did not accept {username}: {e}"
        session = Session(secrets.token_urlsafe(32), admin, time.monotonic())
        with self._lock:
            self._sessions[session.id] = session
            doomed = self._expired_locked()
            while len(self._sessions) > self.max_sessions:
                oldest = min(self._sessions.values(), key=lambda s: s.last_seen)
                doomed.append(self._sessions.pop(oldest.id))
        self._close(doomed)
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        with self._lock:
            doomed = self._expired_locked()
            session = self._sessions.get(session_id)
            if session is not None:
                session.last_seen = time.monotonic()
        self._close(doomed)
        return session

    def sign_out(self, session_id: str | None) -> Session | None:
        with self._lock:
            session = self._sessions.pop(session_id or "", None)
        if session is not None:
            self._close([session])
        return session

    def admin_of(self, principal: str) -> ConsoleAdmin | None:
        """The admin of a live session of ``principal`` (the lag sampler asks
        as whoever watches the group), or None."""
        with self._lock:
            live = [s for s in self._sessions.values() if s.admin.principal == principal]
        return max(live, key=lambda s: s.last_seen).admin if live else None

    def close(self) -> None:
        with self._lock:
            doomed, self._sessions = list(self._sessions.values()), {}
        self._close(doomed)

    def _expired_locked(self) -> list[Session]:
        now = time.monotonic()
        gone = [s for s in self._sessions.values() if now - s.last_seen > self.idle_s]
        for s in gone:
            del self._sessions[s.id]
        return gone

    @staticmethod
    def _close(sessions: list[Session]) -> None:
        """Their connections closed on a thread of their own: a close waits
        for a page of that session being asked, never the event loop."""

        def close_all() -> None:
            for s in sessions:
                s.admin.close()

        if sessions:
            threading.Thread(
                target=close_all,
                name="pylog-console-session-close",
                daemon=True,
            ).start()
