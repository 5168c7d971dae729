"""Share sessions (KIP-932; Kafka's ShareSessionCache, ShareSession and
ShareRequestMetadata): what a member's ShareFetch requests have named so far,
so a later request need only name what changed.

A request's ShareSessionEpoch is 0 to open a session (replacing the member's
old one), -1 to close it (its last acknowledgements are applied), or the
epoch the session expects, which then moves on by one (wrapping past
2^31-1 to 1). A session that does not exist is SHARE_SESSION_NOT_FOUND, a
wrong epoch INVALID_SHARE_SESSION_EPOCH. At most
``group.share.max.share.sessions`` are kept; the least recently used goes.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from pylog.common.topic_partition import TopicPartition

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessionCache", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return INITIAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    #: (topic id, partition) -> the TopicPartition, in the order first named
    partitions: dict[tuple[str, int], TopicPartition] = field(default_factory=dict)


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        key = (group_id, member_id)
        s = self._sessions.get(key)
        if s is not None:
            self._sessions.move_to_end(key)
        return s

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession, list[ShareSession]]:
        """A new session for the member; the sessions it pushed out (its old
        one, the least recently used past the limit)."""
        gone = []
        old = self._sessions.pop((group_id, member_id), None)
        if old is not None:
            gone.append(old)
        while len(self._sessions) >= self.max_sessions:
            gone.append(self._sessions.popitem(last=False)[1])
        s = self._sessions[(group_id, member_id)] = ShareSession(group_id, member_id)
        return s, gone

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_group_member(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def has_group(self, group_id: str) -> bool:
        """Whether some member of the group has a session here."""
        return any(g == group_id for g, _ in self._sessions)

    def remove_group(self, group_id: str) -> None:
        for key in [k for k in self._sessions if k[0] == group_id]:
            del self._sessions[key]
