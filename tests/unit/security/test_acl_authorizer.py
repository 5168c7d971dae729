"""AclAuthorizer's rules, against Kafka's: which ACLs apply to a resource
(literal, wildcard, prefixed), DENY over ALLOW, implied operations, principal
and host wildcards, super users, allow.everyone.if.no.acl.found, the
by-resource-type check of KIP-679, the filters of Describe/DeleteAcls, and
the stored formats (ZooKeeper's JSON and change notifications)."""

from __future__ import annotations

import json

import pytest

from pylog.errors import ErrorCode
from pylog.metadata.zk_data import ZkAclStore
from pylog.security.access_control_entry import AccessControlEntry, AccessControlEntryFilter
from pylog.security.acl_authorizer import AclAuthorizer, parse_super_users
from pylog.security.acl_binding import AclBinding, AclBindingFilter
from pylog.security.acl_cache import AclCache
from pylog.security.acl_entry import decode_acls, encode_acls, supported_operations
from pylog.security.acl_operation import AclOperation as Op
from pylog.security.acl_permission_type import AclPermissionType as Perm
from pylog.security.pattern_type import PatternType as PT
from pylog.security.resource_pattern import ResourcePattern, ResourcePatternFilter
from pylog.security.resource_type import ResourceType as RT

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def ace(principal: str, op: Op, perm: Perm = Perm.ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def make(**kw: object) -> AclAuthorizer:
    cache = AclCache()

    def update(pattern, change):  # type: ignore[no-untyped-def]
        new = frozenset(change(cache.get(pattern)))
        cache.set(pattern, new)
        return new

    return AclAuthorizer(cache, update, **kw)  # type: ignore[arg-type]


def add(a: AclAuthorizer, rt: RT, name: str, pt: PT, *entries: AccessControlEntry) -> None:
    results = a.create_acls([AclBinding(ResourcePattern(rt, name, pt), e) for e in entries])
    assert all(code == 0 for code, _ in results), results


def test_no_acl_refuses_unless_allow_everyone() -> None:
    assert not make().authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert make(allow_everyone_if_no_acl_found=True).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    # an ACL for someone else on the resource: no longer "no ACL found"
    a = make(allow_everyone_if_no_acl_found=True)
    add(a, RT.TOPIC, "t", PT.LITERAL, ace(BOB, Op.READ))
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    a = make()
    add(a, RT.TOPIC, "orders", PT.LITERAL, ace(ALICE, Op.WRITE))
    add(a, RT.TOPIC, "*", PT.LITERAL, ace(ALICE, Op.READ))
    add(a, RT.TOPIC, "team-", PT.PREFIXED, ace(ALICE, Op.DELETE))
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders2")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "anything")
    assert a.authorize(ALICE, HOST, Op.DELETE, RT.TOPIC, "team-x")
    assert not a.authorize(ALICE, HOST, Op.DELETE, RT.TOPIC, "team")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "anything")  # another type


def test_deny_wins_and_denies_only_its_operation() -> None:
    a = make()
    add(a, RT.TOPIC, "t", PT.PREFIXED, ace(ALICE, Op.ALL))
    add(a, RT.TOPIC, "t-secret", PT.LITERAL, ace(ALICE, Op.WRITE, Perm.DENY))
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t-open")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t-secret")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t-secret")
    # a DENY of DESCRIBE is not implied by denying WRITE, nor the reverse
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t-secret")


def test_implied_operations() -> None:
    a = make()
    add(a, RT.TOPIC, "r", PT.LITERAL, ace(ALICE, Op.READ))
    add(a, RT.TOPIC, "c", PT.LITERAL, ace(ALICE, Op.ALTER_CONFIGS))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "r")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "r")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "c")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "c")


def test_principal_and_host_matching() -> None:
    a = make()
    add(a, RT.GROUP, "g", PT.LITERAL, ace("User:*", Op.READ, host=HOST))
    assert a.authorize(BOB, HOST, Op.READ, RT.GROUP, "g")
    assert not a.authorize(BOB, "10.0.0.2", Op.READ, RT.GROUP, "g")


def test_super_users_pass_whatever_the_acls() -> None:
    supers = parse_super_users(" User:admin ; User:broker")
    assert supers == {"User:admin", "User:broker"}
    a = make(super_users=supers)
    add(a, RT.TOPIC, "t", PT.LITERAL, ace("User:*", Op.ALL, Perm.DENY))
    assert a.authorize("User:admin", HOST, Op.WRITE, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")
    with pytest.raises(ValueError):
        parse_super_users("admin")


def test_authorized_operations_of_the_cluster_are_seven() -> None:
    ops = supported_operations(RT.CLUSTER)
    assert len(ops) == 7 and Op.WRITE not in ops
    a = make()
    add(a, RT.CLUSTER, "kafka-cluster", PT.LITERAL, ace(ALICE, Op.ALTER))
    got = a.authorized_operations(ALICE, HOST, RT.CLUSTER, "kafka-cluster", sorted(ops))
    assert got == [Op.ALTER, Op.DESCRIBE]


def test_authorize_by_resource_type() -> None:
    a = make()
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    add(a, RT.TOPIC, "x-", PT.PREFIXED, ace(ALICE, Op.WRITE))
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    add(a, RT.TOPIC, "x", PT.PREFIXED, ace(ALICE, Op.WRITE, Perm.DENY))  # dominates x-
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    add(a, RT.TOPIC, "*", PT.LITERAL, ace(ALICE, Op.WRITE))
    assert a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    add(a, RT.TOPIC, "*", PT.LITERAL, ace(ALICE, Op.WRITE, Perm.DENY))
    assert not a.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_create_refuses_what_kafka_refuses() -> None:
    a = make()
    bad = [
        AclBinding(ResourcePattern(RT.CLUSTER, "other", PT.LITERAL), ace(ALICE, Op.ALTER)),
        AclBinding(ResourcePattern(RT.TOPIC, "", PT.LITERAL), ace(ALICE, Op.READ)),
        AclBinding(ResourcePattern(RT.TOPIC, "a/b", PT.LITERAL), ace(ALICE, Op.READ)),
        AclBinding(ResourcePattern(RT.TOPIC, "t", PT.MATCH), ace(ALICE, Op.READ)),
        AclBinding(ResourcePattern(RT.TOPIC, "t", PT.LITERAL), ace("alice", Op.READ)),
        AclBinding(ResourcePattern(RT.TOPIC, "t", PT.LITERAL), ace(ALICE, Op.ANY)),
    ]
    results = a.create_acls(bad)
    assert [c for c, _ in results] == [ErrorCode.INVALID_REQUEST] * len(bad)
    assert a.cache.snapshot() == {}


def test_filters_and_delete() -> None:
    a = make()
    add(a, RT.TOPIC, "team-a", PT.LITERAL, ace(ALICE, Op.READ), ace(BOB, Op.READ))
    add(a, RT.TOPIC, "team-", PT.PREFIXED, ace(ALICE, Op.WRITE))
    add(a, RT.TOPIC, "*", PT.LITERAL, ace(BOB, Op.DESCRIBE))
    any_entry = AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY)

    def names(pt: PT, name: str | None) -> set[tuple[str, PT]]:
        f = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, name, pt), any_entry)
        return {(b.pattern.name, b.pattern.pattern_type) for b in a.acls(f)}

    assert names(PT.MATCH, "team-a") == {
        ("team-a", PT.LITERAL),
        ("team-", PT.PREFIXED),
        ("*", PT.LITERAL),
    }
    assert names(PT.ANY, "team-a") == {("team-a", PT.LITERAL)}
    assert names(PT.PREFIXED, None) == {("team-", PT.PREFIXED)}
    only_bob = AclBindingFilter(
        ResourcePatternFilter(RT.ANY, None, PT.ANY),
        AccessControlEntryFilter(BOB, None, Op.ANY, Perm.ANY),
    )
    [deleted] = a.delete_acls([only_bob])
    assert {(b.pattern.name, b.entry.principal, code) for b, code, _ in deleted} == {
        ("team-a", BOB, 0),
        ("*", BOB, 0),
    }
    assert a.acls(only_bob) == []
    assert ResourcePattern(RT.TOPIC, "*", PT.LITERAL) not in a.cache.snapshot()
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-a")


def test_stored_formats_are_kafkas() -> None:
    entries = frozenset({ace(ALICE, Op.IDEMPOTENT_WRITE, host="h1"), ace(BOB, Op.READ, Perm.DENY)})
    doc = json.loads(encode_acls(entries))
    assert doc["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow",
            "operation": "IdempotentWrite", "host": "h1"} in doc["acls"]  # fmt: skip
    assert decode_acls(encode_acls(entries)) == entries
    # Kafka's own znode, as its tools write it
    kafka = b'{"version":1,"acls":[{"principal":"User:x","permissionType":"Deny",' \
        b'"operation":"DescribeConfigs","host":"*"}]}'  # fmt: skip
    assert decode_acls(kafka) == {ace("User:x", Op.DESCRIBE_CONFIGS, Perm.DENY)}
    with pytest.raises(ValueError):
        decode_acls(b'{"version":2,"acls":[]}')
    lit = ResourcePattern(RT.TRANSACTIONAL_ID, "tx", PT.LITERAL)
    pre = ResourcePattern(RT.TOPIC, "team-", PT.PREFIXED)
    assert ZkAclStore.path(lit) == "/kafka-acl/TransactionalId/tx"
    assert ZkAclStore.path(pre) == "/kafka-acl-extended/prefixed/Topic/team-"
    assert ZkAclStore.encode_change(lit) == b"TRANSACTIONAL_ID:tx"
    assert json.loads(ZkAclStore.encode_change(pre)) == {
        "version": 1, "resourceType": "TOPIC", "name": "team-", "patternType": "PREFIXED"
    }  # fmt: skip
    for p in (lit, pre):
        parent = ZkAclStore.change_path(p.pattern_type)
        assert ZkAclStore.decode_change(parent, ZkAclStore.encode_change(p)) == p
