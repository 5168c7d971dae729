"""AclAuthorizer: who may do what, by Kafka's ACL rules.

Switched on by ``authorizer.class.name`` naming Kafka's ZooKeeper-era
``kafka.security.authorizer.AclAuthorizer`` or KRaft's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (both behave
alike here; an existing server.properties works unchanged); empty: no
authorization, every request allowed, as before.

A request for OPERATION on a resource (always named literally: topic ``a``)
is allowed when

* its principal is one of ``super.users`` (``User:admin;User:broker``), or
* no ACL applies to the resource and ``allow.everyone.if.no.acl.found`` is
  true, or
* no DENY applies and an ALLOW does.

The ACLs that apply to a resource are those of the LITERAL pattern of its
name, the LITERAL wildcard ``*`` of its type, and every PREFIXED pattern its
name starts with. An entry applies to the request when its principal is the
request's or ``User:*``, its host the client's address or ``*``, and its
operation the one asked (a DENY), or one implying it (an ALLOW: READ, WRITE,
DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) or
ALL (both). Refusals are logged at INFO on ``pylog.authorizer`` (Kafka's
``kafka.authorizer.logger``), allowed requests at DEBUG.

ACLs are kept by the metadata store (ZooKeeper's ``/kafka-acl`` on a
cluster, the embedded store on a lone broker) and read from the store's
:class:`~pylog.security.acl_cache.AclCache`; :meth:`AclAuthorizer.create_acls`
and :meth:`AclAuthorizer.delete_acls` change them through the store's
conditional ``update`` (blocking: callers on the event loop use a thread).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence

from pylog.errors import ErrorCode, KafkaError
from pylog.security.access_control_entry import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
)
from pylog.security.acl_binding import AclBinding, AclBindingFilter, invalid_binding
from pylog.security.acl_cache import AclCache
from pylog.security.acl_operation import AclOperation, implied_by
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.kafka_principal import KafkaPrincipal
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import WILDCARD_RESOURCE, ResourcePattern
from pylog.security.resource_type import ResourceType

__all__ = [
    "AUTHORIZER_CLASS_NAMES",
    "AclAuthorizer",
    "AclUpdate",
    "parse_super_users",
]

_log = logging.getLogger("pylog.authorizer")

#: The ``authorizer.class.name`` values that switch authorization on.
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",  # Kafka before 2.4
    }
)

_Entries = frozenset[AccessControlEntry]
#: Durably change one pattern's ACLs: (pattern, old entries → new entries) →
#: the entries stored (the metadata store's ``update_acls``).
AclUpdate = Callable[[ResourcePattern, Callable[[_Entries], _Entries]], _Entries]


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:a;User:b``);
    ValueError for one that is not ``Type:name``."""
    out = set()
    for part in (text or "").split(";"):
        part = part.strip()
        if part:
            out.add(str(KafkaPrincipal.parse(part)))
    return frozenset(out)


class AclAuthorizer:
    def __init__(
        self,
        cache: AclCache,
        update: AclUpdate,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.cache = cache
        self._update = update
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._lock = threading.Lock()  # one ACL change at a time on this broker

    # ------------------------------------------------------------------ checks

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May ``principal`` connecting from ``host`` do ``operation`` on the
        resource ``name`` of ``resource_type``?"""
        if principal in self.super_users:
            return True
        acls = self._matching(resource_type, name)
        if not acls:
            allowed = self.allow_everyone_if_no_acl_found
        else:
            allowed = not _exists(
                acls, principal, host, frozenset({operation}), AclPermissionType.DENY
            ) and _exists(acls, principal, host, implied_by(operation), AclPermissionType.ALLOW)
        if allowed:
            if _log.isEnabledFor(logging.DEBUG):
                _log.debug(_audit(principal, True, operation, host, resource_type, name))
        elif log_if_denied:
            _log.info(_audit(principal, False, operation, host, resource_type, name))
        return allowed

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        cache = self.cache
        found = list(cache.get(ResourcePattern(resource_type, name, PatternType.LITERAL)))
        found += cache.get(ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL))
        for prefix in cache.prefixes(resource_type):
            if name.startswith(prefix):
                found += cache.get(ResourcePattern(resource_type, prefix, PatternType.PREFIXED))
        return found

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May ``principal`` do ``operation`` on at least one resource of the
        type (Kafka's authorizeByResourceType, KIP-679: an idempotent producer
        needs WRITE on some topic)? Only the operation itself or ALL count."""
        if principal in self.super_users:
            return True
        ops = (operation, AclOperation.ALL)
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow_literal: set[str] = set()
        allow_prefix: set[str] = set()
        for pattern, entries in self.cache.snapshot().items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if (
                    e.principal in (principal, WILDCARD_PRINCIPAL)
                    and e.host in (host, WILDCARD_HOST)
                    and e.operation in ops
                ):
                    deny = e.permission_type == AclPermissionType.DENY
                    literal = pattern.pattern_type == PatternType.LITERAL
                    target = (
                        (deny_literal if literal else deny_prefix)
                        if deny
                        else (allow_literal if literal else allow_prefix)
                    )
                    target.add(pattern.name)
        if WILDCARD_RESOURCE in deny_literal:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefix for i in range(1, len(name) + 1))

        if any(not dominated(p) for p in allow_prefix):
            return True
        return any(
            n == WILDCARD_RESOURCE or (n not in deny_literal and not dominated(n))
            for n in allow_literal
        )

    def authorized_operations(
        self,
        principal: str,
        host: str,
        resource_type: ResourceType,
        name: str,
        supported: Iterable[AclOperation],
    ) -> list[AclOperation]:
        return [
            op
            for op in supported
            if self.authorize(principal, host, op, resource_type, name, log_if_denied=False)
        ]

    # ------------------------------------------------------------------ the ACLs

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        out = []
        for pattern, entries in self.cache.snapshot().items():
            for e in entries:
                binding = AclBinding(pattern, e)
                if acl_filter.matches(binding):
                    out.append(binding)
        return sorted(out)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[tuple[int, str | None]]:
        """Per binding, (error code, message): INVALID_REQUEST for a binding
        Kafka refuses; the store's error when writing failed. Bindings of one
        pattern are stored together (one conditional write)."""
        results: list[tuple[int, str | None]] = [(0, None)] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, b in enumerate(bindings):
            why = invalid_binding(b)
            if why is not None:
                results[i] = (ErrorCode.INVALID_REQUEST, why)
            else:
                by_pattern.setdefault(b.pattern, []).append(i)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)
                try:
                    self._update(pattern, lambda old, new=new: old | new)  # type: ignore[misc]
                except KafkaError as e:
                    for i in indexes:
                        results[i] = (int(e.code), str(e))
                    continue
                for i in indexes:
                    _log.info("ACL added: %s", bindings[i])
        return results

    def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[list[tuple[AclBinding, int, str | None]]]:
        """Per filter, the bindings it deleted, each with (error code,
        message) — an error when the store failed to remove it. A binding
        several filters match is reported under the first."""
        deleted: list[list[tuple[AclBinding, int, str | None]]] = [[] for _ in filters]
        with self._lock:
            patterns = set(self.cache.snapshot())
            for f in filters:
                patterns.update(f.pattern_filter.exact_patterns())
            for pattern in sorted(patterns):
                matching = [
                    (i, f) for i, f in enumerate(filters) if f.pattern_filter.matches(pattern)
                ]
                if not matching:
                    continue
                removed: dict[AccessControlEntry, int] = {}

                def drop(
                    old: _Entries,
                    matching: list[tuple[int, AclBindingFilter]] = matching,
                    removed: dict[AccessControlEntry, int] = removed,
                ) -> _Entries:
                    removed.clear()
                    for e in old:
                        for i, f in matching:
                            if f.entry_filter.matches(e):
                                removed.setdefault(e, i)
                                break
                    return old - frozenset(removed)

                try:
                    self._update(pattern, drop)
                    error: tuple[int, str | None] = (0, None)
                except KafkaError as e:
                    error = (int(e.code), str(e))
                for entry, i in sorted(removed.items()):
                    binding = AclBinding(pattern, entry)
                    deleted[i].append((binding, *error))
                    if not error[0]:
                        _log.info("ACL removed: %s", binding)
        return deleted


def _exists(
    acls: list[AccessControlEntry],
    principal: str,
    host: str,
    operations: frozenset[AclOperation],
    permission: AclPermissionType,
) -> bool:
    for e in acls:
        if (
            e.permission_type == permission
            and (e.operation in operations or e.operation == AclOperation.ALL)
            and e.principal in (principal, WILDCARD_PRINCIPAL)
            and e.host in (host, WILDCARD_HOST)
        ):
            return True
    return False


def _audit(
    principal: str,
    allowed: bool,
    operation: AclOperation,
    host: str,
    resource_type: ResourceType,
    name: str,
) -> str:
    return (
        f"Principal = {principal} is {'Allowed' if allowed else 'Denied'} Operation = "
        f"{operation.acl_name} from host = {host} on resource = "
        f"{resource_type.acl_name}:LITERAL:{name!r}"
    )
