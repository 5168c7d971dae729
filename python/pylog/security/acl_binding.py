"""AclBinding and AclBindingFilter (Kafka's names): an ACL — a resource
pattern with an entry — and what Describe/DeleteAcls select ACLs by."""

from __future__ import annotations

from dataclasses import dataclass

from pylog.security.access_control_entry import AccessControlEntry, AccessControlEntryFilter
from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.resource_pattern import CLUSTER_NAME, ResourcePattern, ResourcePatternFilter
from pylog.security.resource_type import ResourceType

__all__ = ["AclBinding", "AclBindingFilter", "invalid_binding"]


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )


def invalid_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses ``binding`` (INVALID_REQUEST), or None. Kafka's
    checks: every element known and specific, a principal ``Type:name``, a
    non-empty name without ``/`` (it becomes a znode), the cluster named
    ``kafka-cluster``."""
    p, e = binding.pattern, binding.entry
    if (
        not p.resource_type.is_specific
        or not p.pattern_type.is_specific
        or e.operation in (AclOperation.ANY, AclOperation.UNKNOWN)
        or e.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN)
    ):
        return "ACL binding contains unknown elements"
    principal_type, sep, _ = e.principal.partition(":")
    if not sep or not principal_type:
        return f"expected a string in format principalType:principalName but got {e.principal}"
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not p.name:
        return "Invalid empty resource name"
    if "/" in p.name:
        return f"ACL binding contains invalid resource name: {p.name}"
    return None
