"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's AclApis).

Describe needs DESCRIBE on the cluster, Create and Delete ALTER
(CLUSTER_AUTHORIZATION_FAILED otherwise, nothing changed). Without an
authorizer each answers SECURITY_DISABLED, as Kafka does. The ACLs
themselves are the authorizer's (:class:`~pylog.security.AclAuthorizer`),
stored by the metadata store; a change is made in a thread, since on a
cluster it waits on ZooKeeper.
"""

from __future__ import annotations

import asyncio
from itertools import groupby

from pylog.broker.auth_helper import AuthHelper
from pylog.errors import ErrorCode
from pylog.network import Request
from pylog.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from pylog.protocol.messages.create_acls_response import AclCreationResult
from pylog.protocol.messages.delete_acls_request import DeleteAclsFilter
from pylog.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
)
from pylog.protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource
from pylog.security.access_control_entry import AccessControlEntry, AccessControlEntryFilter
from pylog.security.acl_binding import AclBinding, AclBindingFilter
from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern, ResourcePatternFilter
from pylog.security.resource_type import ResourceType

__all__ = ["AclApis"]

_NO_AUTHORIZER = "No Authorizer is configured on the broker"
_CLUSTER_REFUSED = "Cluster authorization failed."


def _filter(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission_type: int,
) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            ResourceType.of_code(resource_type), name, PatternType.of_code(pattern_type)
        ),
        AccessControlEntryFilter(
            principal,
            host,
            AclOperation.of_code(operation),
            AclPermissionType.of_code(permission_type),
        ),
    )


class AclApis:
    def __init__(self, auth: AuthHelper) -> None:
        self.auth = auth

    async def handle_describe_acls_request(
        self, request: Request, body: DescribeAclsRequest
    ) -> DescribeAclsResponse:
        if not self.auth.authorize_cluster(request, AclOperation.DESCRIBE):
            return DescribeAclsResponse(
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_REFUSED
            )
        authz = self.auth.authorizer
        if authz is None:
            return DescribeAclsResponse(
                error_code=ErrorCode.SECURITY_DISABLED, error_message=_NO_AUTHORIZER
            )
        acl_filter = _filter(
            body.resource_type_filter,
            body.resource_name_filter,
            body.pattern_type_filter,
            body.principal_filter,
            body.host_filter,
            body.operation,
            body.permission_type,
        )
        if acl_filter.is_unknown:
            return DescribeAclsResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message="The filter contains unknown elements",
            )
        resources = [
            DescribeAclsResource(
                resource_type=pattern.resource_type,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type,
                acls=[
                    AclDescription(
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission_type,
                    )
                    for b in bindings
                ],
            )
            for pattern, bindings in groupby(authz.acls(acl_filter), key=lambda b: b.pattern)
        ]
        return DescribeAclsResponse(error_code=0, error_message=None, resources=resources)

    async def handle_create_acls_request(
        self, request: Request, body: CreateAclsRequest
    ) -> CreateAclsResponse:
        def all_failed(code: int, message: str) -> CreateAclsResponse:
            return CreateAclsResponse(
                results=[
                    AclCreationResult(error_code=code, error_message=message)
                    for _ in body.creations
                ]
            )

        if not self.auth.authorize_cluster(request, AclOperation.ALTER):
            return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
        authz = self.auth.authorizer
        if authz is None:
            return all_failed(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
        bindings = [
            AclBinding(
                ResourcePattern(
                    ResourceType.of_code(c.resource_type),
                    c.resource_name,
                    PatternType.of_code(c.resource_pattern_type),
                ),
                AccessControlEntry(
                    c.principal,
                    c.host,
                    AclOperation.of_code(c.operation),
                    AclPermissionType.of_code(c.permission_type),
                ),
            )
            for c in body.creations
        ]
        results = await asyncio.to_thread(authz.create_acls, bindings)
        return CreateAclsResponse(
            results=[AclCreationResult(error_code=c, error_message=m) for c, m in results]
        )

    async def handle_delete_acls_request(
        self, request: Request, body: DeleteAclsRequest
    ) -> DeleteAclsResponse:
        def all_failed(code: int, message: str) -> DeleteAclsResponse:
            return DeleteAclsResponse(
                filter_results=[
                    DeleteAclsFilterResult(error_code=code, error_message=message)
                    for _ in body.filters
                ]
            )

        if not self.auth.authorize_cluster(request, AclOperation.ALTER):
            return all_failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
        authz = self.auth.authorizer
        if authz is None:
            return all_failed(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)

        def to_filter(f: DeleteAclsFilter) -> AclBindingFilter:
            return _filter(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )

        filters = [to_filter(f) for f in body.filters]
        valid = [f for f in filters if not f.is_unknown]
        deleted = iter(await asyncio.to_thread(authz.delete_acls, valid))
        results = []
        for f in filters:
            if f.is_unknown:
                results.append(
                    DeleteAclsFilterResult(
                        error_code=ErrorCode.INVALID_REQUEST,
                        error_message="The filter contains unknown elements",
                    )
                )
                continue
            matching = [
                DeleteAclsMatchingAcl(
                    error_code=code,
                    error_message=message,
                    resource_type=b.pattern.resource_type,
                    resource_name=b.pattern.name,
                    pattern_type=b.pattern.pattern_type,
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=b.entry.operation,
                    permission_type=b.entry.permission_type,
                )
                for b, code, message in next(deleted)
            ]
            results.append(
                DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=matching)
            )
        return DeleteAclsResponse(filter_results=results)
