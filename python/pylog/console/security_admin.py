"""The console's security pages' questions and changes: ACLs (DescribeAcls,
CreateAcls, DeleteAcls), SCRAM users (DescribeUserScramCredentials,
AlterUserScramCredentials — KIP-554) and client quotas
(DescribeClientQuotas, AlterClientQuotas — KIP-546), over the Kafka
protocol with the console's client, as Kafka's ``kafka-acls`` and
``kafka-configs`` ask them: they work against pylog and Apache Kafka alike.

Each change returns None when made, else the cluster's error as text; each
question returns its rows and, when the cluster refused it (no authorizer:
SECURITY_DISABLED; no right: CLUSTER_AUTHORIZATION_FAILED), the error to
show in their place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pylog.cli.client import ClusterClient, describe, error_for
from pylog.errors import KafkaError
from pylog.protocol import ApiKey
from pylog.security.acl_operation import AclOperation
from pylog.security.acl_permission_type import AclPermissionType
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import CLUSTER_NAME
from pylog.security.resource_type import ResourceType
from pylog.security.scram_credential import salted_password
from pylog.security.scram_mechanism import MAX_ITERATIONS, MIN_ITERATIONS, ScramMechanism

__all__ = [
    "ACL_OPERATIONS",
    "ACL_RESOURCE_TYPES",
    "QUOTA_KEYS",
    "SCRAM_MECHANISMS",
    "AclSpec",
    "AclsView",
    "QuotaRow",
    "QuotasView",
    "ScramUserRow",
    "ScramUsersView",
    "alter_quota",
    "create_acl",
    "delete_acl",
    "delete_scram_user",
    "describe_acls",
    "describe_quotas",
    "describe_scram_users",
    "upsert_scram_user",
]

ACL_RESOURCE_TYPES = [
    t.acl_name
    for t in (
        ResourceType.TOPIC,
        ResourceType.GROUP,
        ResourceType.CLUSTER,
        ResourceType.TRANSACTIONAL_ID,
        ResourceType.DELEGATION_TOKEN,
    )
]
ACL_OPERATIONS = [
    op.acl_name for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
]
SCRAM_MECHANISMS = ScramMechanism.names()
# The client quota keys Kafka knows (QuotaConfig): byte rates per second,
# request_percentage of one handler thread, controller mutations per second.
QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",  # of an ip entity only (KIP-612)
)
QUOTA_ENTITY_TYPES = ("user", "client-id", "ip")


def _error(code: int, message: str | None = None) -> str:
    return describe(code, message or None)


# ---------------------------------------------------------------- ACLs


@dataclass(frozen=True)
class AclSpec:
    """One ACL binding, as a form names it (and DeleteAcls' exact filter)."""

    resource_type: str  # "Topic", "Group", ...
    pattern_type: str  # "LITERAL" or "PREFIXED"
    resource_name: str
    principal: str
    host: str
    operation: str  # "Read", "Write", ...
    permission: str  # "ALLOW" or "DENY"

    def check(self) -> str | None:
        """Why the cluster would refuse it before asking (a form's typo)."""
        try:
            ResourceType.parse(self.resource_type)
            AclOperation.parse(self.operation)
            AclPermissionType.parse(self.permission)
            pattern = PatternType.parse(self.pattern_type)
        except ValueError as e:
            return str(e)
        if not pattern.is_specific:
            return "the pattern type is LITERAL or PREFIXED"
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            return f"{self.principal!r}: a principal is TYPE:NAME (User:alice)"
        if not self.resource_name:
            return "the resource needs a name"
        return None

    def body(self) -> dict[str, object]:
        resource_type = ResourceType.parse(self.resource_type)
        return {
            "resource_type": resource_type,
            "resource_name": CLUSTER_NAME
            if resource_type is ResourceType.CLUSTER
            else self.resource_name,
            "resource_pattern_type": PatternType.parse(self.pattern_type),
            "principal": self.principal,
            "host": self.host or "*",
            "operation": AclOperation.parse(self.operation),
            "permission_type": AclPermissionType.parse(self.permission),
        }

    def __str__(self) -> str:
        return (
            f"{self.resource_type}:{self.pattern_type}:{self.resource_name} {self.principal} "
            f"{self.permission} {self.operation} from {self.host}"
        )


@dataclass
class AclsView:
    acls: list[AclSpec] = field(default_factory=list)
    error: str | None = None


def describe_acls(client: ClusterClient) -> AclsView:
    """Every ACL of the cluster (DescribeAcls with a filter matching any)."""
    r = client.request(
        ApiKey.DESCRIBE_ACLS,
        {
            "resource_type_filter": ResourceType.ANY,
            "resource_name_filter": None,
            "pattern_type_filter": PatternType.ANY,
            "principal_filter": None,
            "host_filter": None,
            "operation": AclOperation.ANY,
            "permission_type": AclPermissionType.ANY,
        },
    )
    if r.error_code:
        return AclsView([], _error(r.error_code, r.error_message))
    rows = [
        AclSpec(
            ResourceType.of_code(res.resource_type).acl_name,
            PatternType.of_code(res.pattern_type).name,
            res.resource_name,
            a.principal,
            a.host,
            AclOperation.of_code(a.operation).acl_name,
            AclPermissionType.of_code(a.permission_type).name,
        )
        for res in r.resources
        for a in res.acls
    ]
    rows.sort(key=lambda a: (a.resource_type, a.resource_name, a.principal, a.operation))
    return AclsView(rows)


def create_acl(client: ClusterClient, acl: AclSpec) -> str | None:
    refused = acl.check()
    if refused is not None:
        return refused
    r = client.request(ApiKey.CREATE_ACLS, {"creations": [acl.body()]})
    (result,) = r.results
    return _error(result.error_code, result.error_message) if result.error_code else None


def delete_acl(client: ClusterClient, acl: AclSpec) -> str | None:
    """DeleteAcls with the ACL itself as the filter: that one binding."""
    refused = acl.check()
    if refused is not None:
        return refused
    b = acl.body()
    f = {
        "resource_type_filter": b["resource_type"],
        "resource_name_filter": b["resource_name"],
        "pattern_type_filter": b["resource_pattern_type"],
        "principal_filter": b["principal"],
        "host_filter": b["host"],
        "operation": b["operation"],
        "permission_type": b["permission_type"],
    }
    r = client.request(ApiKey.DELETE_ACLS, {"filters": [f]})
    (result,) = r.filter_results
    if result.error_code:
        return _error(result.error_code, result.error_message)
    for m in result.matching_acls:
        if m.error_code:
            return _error(m.error_code, m.error_message)
    return None if result.matching_acls else "no such ACL"


# ---------------------------------------------------------------- SCRAM users


@dataclass(frozen=True)
class ScramUserRow:
    user: str
    credentials: list[tuple[str, int]]  # (mechanism, iterations)


@dataclass
class ScramUsersView:
    users: list[ScramUserRow] = field(default_factory=list)
    error: str | None = None


def describe_scram_users(client: ClusterClient) -> ScramUsersView:
    """Every user with SCRAM credentials: mechanisms and iterations (never a
    salt or a key: the API does not give them)."""
    r = client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
    if r.error_code:
        return ScramUsersView([], _error(r.error_code, r.error_message))
    users = []
    for result in r.results:
        if result.error_code:
            continue
        creds = []
        for info in result.credential_infos:
            m = ScramMechanism.by_type(info.mechanism)
            creds.append((m.mechanism_name if m else f"type {info.mechanism}", info.iterations))
        users.append(ScramUserRow(result.user, sorted(creds)))
    return ScramUsersView(sorted(users, key=lambda u: u.user))


def _alter_scram(client: ClusterClient, body: dict[str, object]) -> str | None:
    def attempt() -> str | None:
        r = client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, client.controller())
        for result in r.results:
            if result.error_code:
                # NOT_CONTROLLER: raised, so retrying asks the new controller
                if result.error_code == 41:
                    raise error_for(result.error_code, result.error_message)
                return _error(result.error_code, result.error_message)
        return None

    try:
        return client.retrying(attempt)  # type: ignore[no-any-return]
    except KafkaError as e:
        return str(e)


def upsert_scram_user(
    client: ClusterClient, user: str, mechanism: str, password: str, iterations: int
) -> str | None:
    """A user's credential for ``mechanism`` made or replaced: the salted
    password is computed here (KIP-554: the password never travels)."""
    m = ScramMechanism.by_name(mechanism)
    if m is None:
        return f"unknown mechanism {mechanism!r}"
    if not user:
        return "the user needs a name"
    if not password:
        return "the password is empty"
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        return f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}"
    salt = os.urandom(32)
    upsertion = {
        "name": user,
        "mechanism": m.type_id,
        "iterations": iterations,
        "salt": salt,
        "salted_password": salted_password(m, password, salt, iterations),
    }
    return _alter_scram(client, {"deletions": [], "upsertions": [upsertion]})


def delete_scram_user(client: ClusterClient, user: str, mechanism: str) -> str | None:
    m = ScramMechanism.by_name(mechanism)
    if m is None:
        return f"unknown mechanism {mechanism!r}"
    return _alter_scram(
        client, {"upsertions": [], "deletions": [{"name": user, "mechanism": m.type_id}]}
    )


# ---------------------------------------------------------------- client quotas


@dataclass(frozen=True)
class QuotaRow:
    #: (entity type, name or None for the default), as the cluster names it
    entity: tuple[tuple[str, str | None], ...]
    values: dict[str, float]

    @property
    def entity_text(self) -> str:
        return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.entity)

    def part(self, entity_type: str) -> tuple[bool, str]:
        """(present, name: '' for the default) of one entity type, for the forms."""
        for t, n in self.entity:
            if t == entity_type:
                return True, n or ""
        return False, ""


@dataclass
class QuotasView:
    quotas: list[QuotaRow] = field(default_factory=list)
    error: str | None = None


def describe_quotas(client: ClusterClient) -> QuotasView:
    """Every quota entity and its values (no filter components, not strict)."""
    r = client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False})
    if r.error_code:
        return QuotasView([], _error(r.error_code, r.error_message))
    rows = [
        QuotaRow(
            tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)),
            {v.key: v.value for v in entry.values},
        )
        for entry in r.entries or []
    ]
    return QuotasView(sorted(rows, key=lambda q: q.entity_text))


def alter_quota(
    client: ClusterClient,
    entity: list[tuple[str, str | None]],
    key: str,
    value: float | None,
) -> str | None:
    """Set (or, ``value`` None, remove) one quota key of one entity."""
    if not entity:
        return "name a user, a client id, an IP, or a default"
    if key not in QUOTA_KEYS:
        return f"unknown quota key {key!r}"
    body = {
        "entries": [
            {
                "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                "ops": [{"key": key, "value": value or 0.0, "remove": value is None}],
            }
        ],
        "validate_only": False,
    }
    r = client.request(ApiKey.ALTER_CLIENT_QUOTAS, body)
    (result,) = r.entries
    return _error(result.error_code, result.error_message) if result.error_code else None
