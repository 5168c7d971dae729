"""``pylog acls add|list|remove``: a cluster's ACLs, as Kafka's ``kafka-acls``
manages them, over the Kafka protocol (CreateAcls, DescribeAcls, DeleteAcls),
so they work against any Kafka cluster as well as pylog::

    pylog acls add --allow-principal User:alice --operation Write --topic orders
    pylog acls add --allow-principal User:alice --operation Read --group billing
    pylog acls add --deny-principal User:bob --operation All --topic team- \\
        --resource-pattern-type prefixed
    pylog acls list --topic orders
    pylog acls remove --allow-principal User:alice --operation Write --topic orders

A resource is ``--topic``, ``--group``, ``--cluster``, ``--transactional-id``
or ``--delegation-token`` (each repeatable). ``list`` and ``remove`` select
with Kafka's filters: ``--resource-pattern-type`` any, match (every pattern
that applies to the name: the literal one, ``*``, each prefix), literal or
prefixed; a principal, host or operation left out matches any. The broker
needs an authorizer (``authorizer.class.name``) and the caller DESCRIBE
(list) or ALTER (add, remove) on the cluster; ``--command-config`` names a
Kafka client properties file for a secured listener.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from pylog.cli.client import ClusterClient, error_for
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
    timeout_option,
)
from pylog.protocol import ApiKey
from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import CLUSTER_NAME
from pylog.security.resource_type import ResourceType

_OPERATIONS = [
    op.acl_name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
]
_PATTERNS = ["literal", "prefixed", "match", "any"]


@click.group("acls")
def acls() -> None:
    """Add, list and remove ACLs (the broker needs authorizer.class.name)."""


def _resource_options(f: Any) -> Any:
    for decl, help_text in reversed(
        [
            ("--topic", "A topic (repeatable)."),
            ("--group", "A consumer group (repeatable)."),
            ("--transactional-id", "A transactional id (repeatable)."),
            ("--delegation-token", "A delegation token (repeatable)."),
        ]
    ):
        f = click.option(decl, multiple=True, help=help_text)(f)
    f = click.option("--cluster", is_flag=True, help="The cluster (kafka-cluster).")(f)
    f = click.option(
        "--resource-pattern-type",
        type=click.Choice(_PATTERNS, case_sensitive=False),
        default=None,
        help="literal (default for add), prefixed; list/remove also match and any (their default).",
    )(f)
    f = click.option(
        "--allow-principal",
        "allow",
        multiple=True,
        metavar="TYPE:NAME",
        help="Principal the ACL allows (User:alice; User:* for all).",
    )(f)
    f = click.option(
        "--deny-principal",
        "deny",
        multiple=True,
        metavar="TYPE:NAME",
        help="Principal the ACL denies.",
    )(f)
    f = click.option(
        "--operation",
        "operations",
        multiple=True,
        type=click.Choice(_OPERATIONS, case_sensitive=False),
        help="Operation (repeatable).",
    )(f)
    f = click.option(
        "--host",
        "hosts",
        multiple=True,
        help="Client address the ACL applies to (default: *, any).",
    )(f)
    return f


def _resources(
    topic: Iterable[str],
    group: Iterable[str],
    transactional_id: Iterable[str],
    delegation_token: Iterable[str],
    cluster: bool,
) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, n) for n in topic]
    out += [(ResourceType.GROUP, n) for n in group]
    out += [(ResourceType.TRANSACTIONAL_ID, n) for n in transactional_id]
    out += [(ResourceType.DELEGATION_TOKEN, n) for n in delegation_token]
    if cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _kw_resources(kw: dict[str, Any]) -> list[tuple[ResourceType, str]]:
    return _resources(
        kw["topic"], kw["group"], kw["transactional_id"], kw["delegation_token"], kw["cluster"]
    )


def _principals(allow: Iterable[str], deny: Iterable[str]) -> list[tuple[AclPermissionType, str]]:
    out = [(AclPermissionType.ALLOW, p) for p in allow] + [
        (AclPermissionType.DENY, p) for p in deny
    ]
    for _, p in out:
        kind, sep, _ = p.partition(":")
        if not sep or not kind:
            raise click.BadParameter(f"{p!r}: a principal is TYPE:NAME (User:alice)")
    return out


@acls.command("add")
@bootstrap_option
@command_config_option
@timeout_option
@_resource_options
def add(
    bootstrap_server: str,
    command_config: str | None,
    request_timeout_ms: int,
    **kw: Any,
) -> None:
    """Add ACLs: each principal x each operation x each host x each resource."""
    resources = _kw_resources(kw)
    principals = _principals(kw["allow"], kw["deny"])
    if not resources or not principals or not kw["operations"]:
        raise CommandError(
            "add needs a resource, --allow-principal/--deny-principal and --operation"
        )
    pattern = PatternType.parse(kw["resource_pattern_type"] or "literal")
    if not pattern.is_specific:
        raise CommandError("add takes --resource-pattern-type literal or prefixed")
    creations = [
        {
            "resource_type": rtype,
            "resource_name": name,
            "resource_pattern_type": pattern,
            "principal": principal,
            "host": host,
            "operation": AclOperation.parse(op),
            "permission_type": perm,
        }
        for rtype, name in resources
        for perm, principal in principals
        for op in kw["operations"]
        for host in kw["hosts"] or ("*",)
    ]
    with (
        client_errors(),
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
    ):
        r = c.request(ApiKey.CREATE_ACLS, {"creations": creations})
    failed = [(cr, res) for cr, res in zip(creations, r.results, strict=True) if res.error_code]
    for cr, res in failed:
        click.echo(f"{_line(cr)}: {error_for_code(res.error_code, res.error_message)}", err=True)
    if failed:
        raise CommandError(f"{len(failed)} of {len(creations)} ACLs were not added")
    for cr in creations:
        click.echo(f"Added {_line(cr)}")


def _filters(kw: dict[str, Any]) -> list[dict[str, Any]]:
    resources: list[tuple[ResourceType, str | None]] = list(_kw_resources(kw)) or [
        (ResourceType.ANY, None)
    ]
    principals: list[tuple[AclPermissionType, str | None]] = list(
        _principals(kw["allow"], kw["deny"])
    ) or [(AclPermissionType.ANY, None)]
    pattern = PatternType.parse(kw["resource_pattern_type"] or "any")
    ops = [AclOperation.parse(o) for o in kw["operations"]] or [AclOperation.ANY]
    hosts: list[str | None] = list(kw["hosts"]) or [None]
    return [
        {
            "resource_type_filter": rtype,
            "resource_name_filter": name,
            "pattern_type_filter": pattern,
            "principal_filter": principal,
            "host_filter": host,
            "operation": op,
            "permission_type": perm,
        }
        for rtype, name in resources
        for perm, principal in principals
        for op in ops
        for host in hosts
    ]


@acls.command("list")
@bootstrap_option
@command_config_option
@timeout_option
@_resource_options
def list_acls(
    bootstrap_server: str, command_config: str | None, request_timeout_ms: int, **kw: Any
) -> None:
    """List the ACLs the filters select (all of them by default)."""
    seen: dict[tuple[Any, ...], None] = {}
    with (
        client_errors(),
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
    ):
        for f in _filters(kw):
            r = c.request(ApiKey.DESCRIBE_ACLS, f)
            if r.error_code:
                raise error_for(r.error_code, r.error_message)
            for res in r.resources:
                for a in res.acls:
                    seen[
                        (
                            res.resource_type,
                            res.pattern_type,
                            res.resource_name,
                            a.principal,
                            a.permission_type,
                            a.operation,
                            a.host,
                        )
                    ] = None
    for rt, pt, name, principal, perm, op, host in sorted(seen):
        click.echo(
            _line(
                {
                    "resource_type": rt,
                    "resource_pattern_type": pt,
                    "resource_name": name,
                    "principal": principal,
                    "permission_type": perm,
                    "operation": op,
                    "host": host,
                }
            )
        )


@acls.command("remove")
@bootstrap_option
@command_config_option
@timeout_option
@_resource_options
def remove(
    bootstrap_server: str, command_config: str | None, request_timeout_ms: int, **kw: Any
) -> None:
    """Remove the ACLs the filters select (a resource or a principal is required)."""
    if not (_kw_resources(kw) or kw["allow"] or kw["deny"]):
        raise CommandError("remove needs a resource or a principal (it would remove every ACL)")
    with (
        client_errors(),
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as c,
    ):
        removed = _delete(c, _filters(kw))
    for line in removed:
        click.echo(f"Removed {line}")
    if not removed:
        click.echo("No ACL matched")


def _delete(c: ClusterClient, filters: list[dict[str, Any]]) -> list[str]:
    r = c.request(ApiKey.DELETE_ACLS, {"filters": filters})
    out = []
    for fr in r.filter_results:
        if fr.error_code:
            raise error_for(fr.error_code, fr.error_message)
        for m in fr.matching_acls:
            if m.error_code:
                raise error_for(m.error_code, m.error_message)
            out.append(
                _line(
                    {
                        "resource_type": m.resource_type,
                        "resource_pattern_type": m.pattern_type,
                        "resource_name": m.resource_name,
                        "principal": m.principal,
                        "permission_type": m.permission_type,
                        "operation": m.operation,
                        "host": m.host,
                    }
                )
            )
    return out


def _line(acl: dict[str, Any]) -> str:
    """One ACL as a line: ``Topic:LITERAL:orders User:alice ALLOW Write from *``."""
    return (
        f"{ResourceType.of_code(acl['resource_type']).acl_name}:"
        f"{PatternType.of_code(acl['resource_pattern_type']).name}:{acl['resource_name']} "
        f"{acl['principal']} {AclPermissionType.of_code(acl['permission_type']).name} "
        f"{AclOperation.of_code(acl['operation']).acl_name} from {acl['host']}"
    )
