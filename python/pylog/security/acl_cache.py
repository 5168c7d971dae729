"""The ACLs a broker authorizes against: resource pattern → its entries, in
memory, kept current by the metadata store (Kafka's AclAuthorizer keeps the
same map, its ``aclCache``, fed from ZooKeeper's ``/kafka-acl`` nodes and
their change notifications). Requests read it on the event loop without a
lock: every change installs a new map, never edits one in place.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType

from pylog.security.access_control_entry import AccessControlEntry
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern
from pylog.security.resource_type import ResourceType

__all__ = ["AclCache"]

_Entries = frozenset[AccessControlEntry]


class AclCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acls: Mapping[ResourcePattern, _Entries] = MappingProxyType({})
        #: resource type → its PREFIXED patterns' names (most types have none,
        #: so a check skips the prefix scan).
        self._prefixes: Mapping[ResourceType, tuple[str, ...]] = MappingProxyType({})

    def snapshot(self) -> Mapping[ResourcePattern, _Entries]:
        """Every pattern with ACLs, as of now (never changes afterwards)."""
        return self._acls

    def get(self, pattern: ResourcePattern) -> _Entries:
        return self._acls.get(pattern, frozenset())

    def prefixes(self, resource_type: ResourceType) -> tuple[str, ...]:
        return self._prefixes.get(resource_type, ())

    def set(self, pattern: ResourcePattern, entries: _Entries) -> None:
        """Replace ``pattern``'s entries (none: it has no ACLs any more)."""
        with self._lock:
            acls = dict(self._acls)
            if entries:
                acls[pattern] = frozenset(entries)
            else:
                acls.pop(pattern, None)
            self._install(acls)

    def replace_all(self, acls: Mapping[ResourcePattern, _Entries]) -> None:
        with self._lock:
            self._install({p: frozenset(e) for p, e in acls.items() if e})

    def _install(self, acls: dict[ResourcePattern, _Entries]) -> None:
        prefixes: dict[ResourceType, list[str]] = {}
        for p in acls:
            if p.pattern_type == PatternType.PREFIXED:
                prefixes.setdefault(p.resource_type, []).append(p.name)
        self._prefixes = MappingProxyType({t: tuple(sorted(n)) for t, n in prefixes.items()})
        self._acls = MappingProxyType(acls)
