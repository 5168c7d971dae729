"""AclEntry: the ACLs of one resource pattern as Kafka stores them, and what
each resource type supports.

The stored form is ZooKeeper's (the znode ``/kafka-acl/Topic/foo``, or
``/kafka-acl-extended/prefixed/Topic/foo``; the embedded store keeps the same
document)::

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
                          "operation":"Read","host":"*"}]}

:func:`supported_operations` is the operations a resource type has (the bits
of the ``*_authorized_operations`` fields); the cluster has seven, no WRITE.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pylog.errors import ErrorCode
from pylog.security.access_control_entry import AccessControlEntry
from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.resource_type import ResourceType

__all__ = [
    "CURRENT_VERSION",
    "acls_doc",
    "acls_from_doc",
    "authorization_error",
    "decode_acls",
    "encode_acls",
    "supported_operations",
]

CURRENT_VERSION = 1

_O = AclOperation
_SUPPORTED: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _O.READ,
            _O.WRITE,
            _O.CREATE,
            _O.DESCRIBE,
            _O.DELETE,
            _O.ALTER,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
        }
    ),
    # DESCRIBE_CONFIGS and ALTER_CONFIGS since groups have configs (GroupConfig)
    ResourceType.GROUP: frozenset(
        {_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

_ERRORS: dict[ResourceType, int] = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    return _SUPPORTED.get(resource_type, frozenset())


def authorization_error(resource_type: ResourceType) -> int:
    """The error code of a refusal on ``resource_type`` (TOPIC_AUTHORIZATION_FAILED, ...)."""
    return int(_ERRORS[resource_type])


def acls_doc(entries: Iterable[AccessControlEntry]) -> dict[str, Any]:
    """The stored document of ``entries`` (as a JSON object)."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.acl_name,
            "operation": e.operation.acl_name,
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return {"version": CURRENT_VERSION, "acls": acls}


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    return json.dumps(acls_doc(entries), separators=(",", ":")).encode()


def decode_acls(data: bytes | str | None) -> frozenset[AccessControlEntry]:
    """The entries of a stored document; empty for no data. ValueError when
    it is not Kafka's format (a version other than 1, an unknown name)."""
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
    except json.JSONDecodeError as e:
        raise ValueError(f"not an ACL document: {e}") from e
    return acls_from_doc(doc)


def acls_from_doc(doc: Any) -> frozenset[AccessControlEntry]:
    try:
        if doc.get("version") != CURRENT_VERSION:
            raise ValueError(f"unsupported ACL document version {doc.get('version')!r}")
        out = set()
        for item in doc["acls"]:
            principal = str(item["principal"])
            if ":" not in principal:
                raise ValueError(f"principal {principal!r} is not Type:name")
            out.add(
                AccessControlEntry(
                    principal,
                    str(item["host"]),
                    AclOperation.parse(str(item["operation"])),
                    AclPermissionType.parse(str(item["permissionType"])),
                )
            )
        return frozenset(out)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not an ACL document: {e}") from e
