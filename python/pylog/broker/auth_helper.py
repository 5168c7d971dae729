"""AuthHelper: what every request handler asks the authorizer (Kafka's
AuthHelper): may this request's principal, from its host, do this operation
on this resource; which of these names may it; which operations may it on a
resource (the ``*_authorized_operations`` bit fields).

Without an authorizer (``authorizer.class.name`` empty) everything is
allowed, and a resource's authorized operations are all it supports, as in
Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable

from pylog.errors import InvalidConfigurationError
from pylog.metadata.store import MetadataStore
from pylog.network import Request
from pylog.security.acl_authorizer import AclAuthorizer, parse_super_users
from pylog.security.acl_entry import supported_operations
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_pattern import CLUSTER_NAME
from pylog.security.resource_type import ResourceType
from pylog.server.config import KafkaConfig

__all__ = ["CLUSTER_NAME", "AuthHelper", "authorizer_from_config", "ops_bit_field"]


def authorizer_from_config(config: KafkaConfig, store: MetadataStore) -> AclAuthorizer | None:
    """The broker's authorizer, or None when ``authorizer.class.name`` is
    empty; its ACLs are the store's (loaded by ``store.start_acls()``)."""
    if not config.get("authorizer.class.name"):
        return None
    try:
        super_users = parse_super_users(config.get("super.users"))
    except ValueError as e:
        raise InvalidConfigurationError(
            f"Invalid value {config.get('super.users')!r} for configuration super.users: {e}"
        ) from e
    return AclAuthorizer(
        store.acl_cache,
        store.update_acls,
        super_users=super_users,
        allow_everyone_if_no_acl_found=bool(config.get("allow.everyone.if.no.acl.found")),
    )


def ops_bit_field(operations: Iterable[AclOperation]) -> int:
    """Bit ``code`` set per operation (Kafka's Utils.to32BitField)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


class AuthHelper:
    def __init__(self, authorizer: AclAuthorizer | None = None) -> None:
        self.authorizer = authorizer

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def authorize(
        self,
        request: Request,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        authz = self.authorizer
        if authz is None:
            return True
        return authz.authorize(
            str(request.principal),
            request.client_host,
            operation,
            resource_type,
            name,
            log_if_denied=log_if_denied,
        )

    def authorize_cluster(self, request: Request, operation: AclOperation) -> bool:
        return self.authorize(request, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def filter_by_authorized(
        self,
        request: Request,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """The names (each checked once) the request may ``operation``."""
        unique = set(names)
        if self.authorizer is None:
            return unique
        return {
            n
            for n in unique
            if self.authorize(request, operation, resource_type, n, log_if_denied=log_if_denied)
        }

    def authorize_by_resource_type(
        self, request: Request, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        authz = self.authorizer
        if authz is None:
            return True
        return authz.authorize_by_resource_type(
            str(request.principal), request.client_host, operation, resource_type
        )

    def authorized_operations(
        self, request: Request, resource_type: ResourceType, name: str = CLUSTER_NAME
    ) -> int:
        supported = sorted(supported_operations(resource_type))
        authz = self.authorizer
        if authz is None:
            return ops_bit_field(supported)
        return ops_bit_field(
            authz.authorized_operations(
                str(request.principal), request.client_host, resource_type, name, supported
            )
        )
