"""AccessControlEntry and AccessControlEntryFilter (Kafka's names): who
(``User:alice``, or ``User:*`` for everyone) may or may not do which
operation from which host (``*``: any)."""

from __future__ import annotations

from dataclasses import dataclass

from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType

__all__ = [
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AccessControlEntryFilter",
]

WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """None matches any principal / host; ANY any operation / permission."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return (
            self.operation == AclOperation.UNKNOWN
            or self.permission_type == AclPermissionType.UNKNOWN
        )

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )
