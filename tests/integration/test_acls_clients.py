"""ACLs with real clients (docs/security.md#acls): a broker with
``authorizer.class.name`` set, its admin a super user, and PLAIN users who
get exactly what their ACLs give — every other request answered with the
right *_AUTHORIZATION_FAILED and nothing changed. confluent-kafka's admin
client creates, describes and deletes the ACLs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("confluent_kafka")

from broker_process import BrokerProcess, topic_name
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.errors import ClusterAuthorizationFailedError
from security_support import listener_ports, plain_jaas

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"


def acl_broker(data: Path, log: Path, **extra: object) -> BrokerProcess:
    return BrokerProcess(
        data,
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(USERS),
            "sasl.enabled.mechanisms": "PLAIN",
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin",
            "offsets.topic.num.partitions": 1,
            **extra,
        },
        log_path=log,
    )


class Secured:
    def __init__(self, broker: BrokerProcess) -> None:
        self.broker = broker
        self.ports = listener_ports(broker.start_line)

    def conf(self, user: str | None) -> dict[str, Any]:
        if user is None:  # PLAINTEXT: User:ANONYMOUS
            return {"bootstrap.servers": f"127.0.0.1:{self.ports['PLAINTEXT']}"}
        return {
            "bootstrap.servers": f"127.0.0.1:{self.ports['SASL_PLAINTEXT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
        }

    def admin(self, user: str | None = "admin") -> AdminClient:
        return AdminClient(self.conf(user))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("acls")
    b = acl_broker(base / "data", base / "broker.log").start()
    try:
        yield Secured(b)
    finally:
        b.stop()


def allow(user: str, rtype: ResourceType, name: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          perm: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, perm)


def create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for f in admin.create_acls(bindings).values():
        f.result(timeout=20)


def create_topics(admin: AdminClient, *names: str) -> None:
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(timeout=20)


def produce(conf: dict[str, Any], topic: str, n: int = 3) -> list[Any]:
    """The delivery errors (None: delivered) of ``n`` records."""
    p = Producer({**conf, "linger.ms": 0, "message.timeout.ms": 10000})
    errors: list[Any] = []
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    return errors


def end_offset(admin_conf: dict[str, Any], topic: str) -> int:
    c = Consumer({**admin_conf, "group.id": "offset-reader"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        c.close()


def code_of(e: BaseException) -> int:
    assert isinstance(e, KafkaException), e
    return int(e.args[0].code())


def test_a_user_gets_exactly_what_the_acls_give(secured: Secured) -> None:
    admin = secured.admin()
    a, b, g = topic_name("a"), topic_name("b"), topic_name("g")
    create_topics(admin, a, b)
    create_acls(admin, [
        allow("alice", ResourceType.TOPIC, a, AclOperation.WRITE),
        allow("alice", ResourceType.TOPIC, a, AclOperation.READ),
        allow("alice", ResourceType.GROUP, g, AclOperation.READ),
    ])  # fmt: skip
    alice = secured.conf("alice")
    admin_conf = secured.conf("admin")

    # writes topic a; topic b is refused and gets nothing
    assert produce(alice, a) == [None, None, None]
    errors = produce(alice, b)
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)
    assert end_offset(admin_conf, b) == 0
    assert end_offset(admin_conf, a) == 3

    # reads a in group g, and commits there
    c = Consumer({**alice, "group.id": g, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.subscribe([a])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"v0", b"v1", b"v2"]
        c.commit(asynchronous=False)
    finally:
        c.close()

    # another group is refused, and commits nothing
    other = topic_name("h")
    c = Consumer({**alice, "group.id": other, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([a])
        err = None
        deadline = time.monotonic() + 20
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is not None:
                err = m.error()
        assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    offsets = admin.list_consumer_group_offsets([_group_request(other)])
    listed = offsets[other].result(timeout=20)
    assert all(tp.offset < 0 for tp in listed.topic_partitions)

    # the metadata shows a alone (b is not alice's to see)
    alice_admin = secured.admin("alice")
    visible = set(alice_admin.list_topics(timeout=20).topics)
    assert a in visible and b not in visible

    # admin requests: refused, nothing changed
    new = topic_name("new")
    with pytest.raises(KafkaException) as e:
        alice_admin.create_topics([NewTopic(new, 1, 1)])[new].result(timeout=20)
    assert code_of(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        alice_admin.delete_topics([a])[a].result(timeout=20)
    assert code_of(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    topics = admin.list_topics(timeout=20).topics
    assert a in topics and new not in topics
    res = ConfigResource(ConfigResource.Type.TOPIC, a, set_config={"retention.ms": "1000"})
    with pytest.raises(KafkaException) as e:
        alice_admin.alter_configs([res])[res].result(timeout=20)
    assert code_of(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, a)])
    [cfg] = described.values()
    assert cfg.result(timeout=20)["retention.ms"].value != "1000"
    # (librdkafka drops DescribeAcls' top-level error, a refusal included: kafka-python asks)
    kp = _kafka_python_admin(secured, "alice")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_acls(_kp_any_filter())
    finally:
        kp.close()
    with pytest.raises(KafkaException) as e:
        create_acls(alice_admin, [allow("alice", ResourceType.TOPIC, b, AclOperation.ALL)])
    assert code_of(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    mine = AclBindingFilter(ResourceType.TOPIC, b, ResourcePatternType.ANY, "User:alice",
                            None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert admin.describe_acls(mine).result(timeout=20) == []


def _kafka_python_admin(secured: Secured, user: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=secured.conf(user)["bootstrap.servers"],
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username=user,
        sasl_plain_password=USERS[user],
    )


def _kp_any_filter() -> Any:
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    return ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            KpResourceType.ANY, None, ACLResourcePatternType.ANY
        ),
    )


def _group_request(group: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def _any_filter() -> AclBindingFilter:
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip


def test_prefixed_patterns_deny_over_allow_and_deleting(secured: Secured) -> None:
    admin = secured.admin()
    prefix = topic_name("team") + "-"
    open_topic, secret = prefix + "open", prefix + "secret"
    create_topics(admin, open_topic, secret)
    create_acls(admin, [
        allow("bob", ResourceType.TOPIC, prefix, AclOperation.WRITE, ResourcePatternType.PREFIXED),
        allow("bob", ResourceType.TOPIC, secret, AclOperation.WRITE,
              perm=AclPermissionType.DENY),
    ])  # fmt: skip
    bob = secured.conf("bob")
    assert produce(bob, open_topic, 1) == [None]
    [err] = produce(bob, secret, 1)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # MATCH: every binding that applies to the secret topic
    match = AclBindingFilter(ResourceType.TOPIC, secret, ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    found = admin.describe_acls(match).result(timeout=20)
    assert {(x.name, x.resource_pattern_type, x.permission_type) for x in found} == {
        (prefix, ResourcePatternType.PREFIXED, AclPermissionType.ALLOW),
        (secret, ResourcePatternType.LITERAL, AclPermissionType.DENY),
    }

    # deleting the prefixed ALLOW: nothing is left for bob on the open topic
    drop = AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:bob",
                            None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    [deleted] = [f.result(timeout=20) for f in admin.delete_acls([drop]).values()]
    assert [(x.name, x.operation) for x in deleted] == [(prefix, AclOperation.WRITE)]
    [err] = produce(bob, open_topic, 1)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert end_offset(secured.conf("admin"), open_topic) == 1


def test_an_idempotent_producer_needs_write_on_some_topic(secured: Secured) -> None:
    """KIP-679: InitProducerId without a transactional id needs IDEMPOTENT_WRITE
    on the cluster or WRITE on any topic."""
    admin = secured.admin()
    t = topic_name("idem")
    create_topics(admin, t)
    create_acls(admin, [allow("bob", ResourceType.TOPIC, t, AclOperation.WRITE)])
    assert produce({**secured.conf("bob"), "enable.idempotence": True}, t, 2) == [None, None]
    # User:ANONYMOUS may describe the topic but write none: InitProducerId is
    # refused, a fatal error for librdkafka's idempotent producer
    create_acls(admin, [allow("ANONYMOUS", ResourceType.TOPIC, t, AclOperation.DESCRIBE)])
    fatal: list[KafkaError] = []
    p = Producer({**secured.conf(None), "enable.idempotence": True,
                  "error_cb": fatal.append})  # fmt: skip
    p.produce(t, value=b"x")
    deadline = time.monotonic() + 20
    while not fatal and time.monotonic() < deadline:
        try:
            p.poll(0.2)
        except KafkaException as e:  # confluent-kafka raises a fatal error from poll
            fatal.append(e.args[0])
    assert fatal and fatal[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert fatal[0].fatal()
    assert end_offset(secured.conf("admin"), t) == 2


def test_acls_survive_a_restart(tmp_path: Path) -> None:
    b = acl_broker(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        s = Secured(b)
        create_acls(s.admin(), [allow("alice", ResourceType.GROUP, "g1", AclOperation.READ)])
        b.stop()
        b.start()
        s = Secured(b)
        admin = s.admin()
        found = admin.describe_acls(_any_filter()).result(timeout=20)
        assert [(x.restype, x.name, x.principal, x.operation) for x in found] == [
            (ResourceType.GROUP, "g1", "User:alice", AclOperation.READ)
        ]
    finally:
        if b.proc is not None:
            b.stop()


def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    b = acl_broker(
        tmp_path / "data", tmp_path / "broker.log", **{"allow.everyone.if.no.acl.found": True}
    ).start()
    try:
        s = Secured(b)
        guarded, unguarded = topic_name("guarded"), topic_name("free")
        create_topics(s.admin(), guarded, unguarded)
        create_acls(s.admin(), [allow("alice", ResourceType.TOPIC, guarded, AclOperation.WRITE)])
        anonymous = s.conf(None)
        assert produce(anonymous, unguarded, 1) == [None]
        [err] = produce(anonymous, guarded, 1)
        assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        b.stop()


def test_without_an_authorizer_the_acl_apis_say_security_disabled(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        with pytest.raises(KafkaException) as e:
            create_acls(admin, [allow("alice", ResourceType.TOPIC, "t", AclOperation.READ)])
        assert code_of(e.value) == KafkaError.SECURITY_DISABLED
    finally:
        b.stop()


def test_kafka_acls_tool(secured: Secured, tmp_path: Path) -> None:
    """Kafka's own kafka-acls (org.apache.kafka.tools.AclCommand) adds, lists
    and removes ACLs on pylog, logged in as the super user."""
    from kafka_tools import run_tool

    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n'
    )
    server = secured.conf("admin")["bootstrap.servers"]
    prefix = topic_name("tool") + "-"
    t = prefix + "t"
    create_topics(secured.admin(), t)

    def acls(*args: str) -> str:
        return run_tool(
            "kafka-acls", "--bootstrap-server", server, "--command-config", str(props), *args,
            workdir=tmp_path,
        ).stdout  # fmt: skip

    acls("--add", "--allow-principal", "User:bob", "--operation", "Write", "--operation",
         "Describe", "--topic", prefix, "--resource-pattern-type", "prefixed")  # fmt: skip
    listed = acls("--list", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert f"name={prefix}, patternType=PREFIXED" in listed
    assert "principal=User:bob" in listed and "operation=WRITE" in listed
    assert produce(secured.conf("bob"), t, 1) == [None]

    acls("--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
         "--topic", prefix, "--resource-pattern-type", "prefixed")  # fmt: skip
    listed = acls("--list", "--topic", prefix, "--resource-pattern-type", "prefixed")
    assert "operation=WRITE" not in listed and "operation=DESCRIBE" in listed
    [err] = produce(secured.conf("bob"), t, 1)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_pylog_acls_cli(secured: Secured, tmp_path: Path) -> None:
    """``pylog acls add|list|remove`` over SASL with --command-config."""
    import subprocess

    from broker_process import PYLOG

    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    server = secured.conf("admin")["bootstrap.servers"]

    def pylog(*args: str, user_config: Path = props) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYLOG, "acls", *args, "--bootstrap-server", server,
             "--command-config", str(user_config)],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    t, g = topic_name("cli"), topic_name("cli-group")
    create_topics(secured.admin(), t)
    done = pylog("add", "--allow-principal", "User:bob", "--operation", "write",
                 "--operation", "read", "--topic", t, "--group", g)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"Added Topic:LITERAL:{t} User:bob ALLOW Write from *" in done.stdout
    assert produce(secured.conf("bob"), t, 1) == [None]

    listed = pylog("list", "--topic", t, "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        f"Topic:LITERAL:{t} User:bob ALLOW Read from *",
        f"Topic:LITERAL:{t} User:bob ALLOW Write from *",
    ]
    removed = pylog("remove", "--allow-principal", "User:bob", "--topic", t, "--group", g)
    assert removed.returncode == 0, removed.stderr
    assert len(removed.stdout.splitlines()) == 4  # read and write on each
    [err] = produce(secured.conf("bob"), t, 1)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # bob is no admin: the broker's refusal is the command's error
    bob = tmp_path / "bob.properties"
    bob.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=bob\nsasl.password=bob-secret\n"
    )
    refused = pylog("add", "--allow-principal", "User:bob", "--operation", "All", "--cluster",
                    user_config=bob)  # fmt: skip
    assert refused.returncode == 1
    assert "ClusterAuthorizationFailedError" in refused.stderr


def test_pylog_admin_commands_take_a_command_config(secured: Secured, tmp_path: Path) -> None:
    """``pylog topics|groups|cluster|configs`` reach a SASL listener with
    Kafka's --command-config file, as ``pylog acls`` does; without it the
    listener is out of reach and the command fails."""
    import subprocess

    from broker_process import PYLOG

    props = tmp_path / "admin.properties"
    props.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-secret\n"
    )
    server = secured.conf("admin")["bootstrap.servers"]

    def pylog(*args: str, secure: bool = True) -> subprocess.CompletedProcess[str]:
        security = ["--command-config", str(props)] if secure else []
        return subprocess.run(
            [PYLOG, *args, "--bootstrap-server", server, "--timeout-ms", "5000",
             *security],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip

    t = topic_name("cc")
    made = pylog("topics", "create", "--topic", t, "--partitions", "2")
    assert made.returncode == 0, made.stderr
    listed = pylog("topics", "list")
    assert listed.returncode == 0 and t in listed.stdout.split(), listed.stderr
    described = pylog("topics", "describe", "--topic", t)
    assert described.returncode == 0 and f"Topic: {t}" in described.stdout, described
    assert pylog("topics", "alter", "--topic", t, "--partitions", "3").returncode == 0
    configs = pylog("configs", "describe", "--topic", t, "--all")
    assert configs.returncode == 0 and "cleanup.policy" in configs.stdout, configs.stderr
    cluster = pylog("cluster", "describe")
    assert cluster.returncode == 0 and "Controller" in cluster.stdout, cluster.stderr
    assert pylog("groups", "list").returncode == 0
    assert pylog("topics", "delete", "--topic", t).returncode == 0
    plain = pylog("topics", "list", secure=False)
    assert plain.returncode != 0 and t not in plain.stdout


def test_authorized_operations_come_from_the_acls(secured: Secured) -> None:
    """include_*_authorized_operations in DescribeCluster, Metadata (topics)
    and DescribeGroups: what the principal may do, from its ACLs; the cluster
    has Kafka's seven operations."""
    from confluent_kafka import TopicCollection

    admin = secured.admin()
    t, g = topic_name("ops"), topic_name("ops-group")
    create_topics(admin, t)
    create_acls(admin, [
        allow("bob", ResourceType.TOPIC, t, AclOperation.READ),
        allow("bob", ResourceType.TOPIC, t, AclOperation.ALTER_CONFIGS),
        allow("bob", ResourceType.GROUP, g, AclOperation.READ),
    ])  # fmt: skip
    bob = secured.admin("bob")

    everything = admin.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert set(everything.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }  # fmt: skip
    mine = bob.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert not mine.authorized_operations  # no DESCRIBE on the cluster: none shown

    [topic] = bob.describe_topics(TopicCollection([t]), include_authorized_operations=True).values()
    assert set(topic.result(timeout=20).authorized_operations) == {
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS,
        AclOperation.DESCRIBE_CONFIGS,
    }  # fmt: skip

    # the group exists once bob has joined it
    c = Consumer({**secured.conf("bob"), "group.id": g, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([t])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        [group] = bob.describe_consumer_groups([g], include_authorized_operations=True).values()
        assert set(group.result(timeout=20).authorized_operations) == {
            AclOperation.READ, AclOperation.DESCRIBE
        }  # fmt: skip
    finally:
        c.close()


def test_group_admin_apis(secured: Secured) -> None:
    """DescribeGroups / DeleteGroups need DESCRIBE / DELETE on the group,
    ListGroups lists only what may be described."""
    admin = secured.admin()
    t, mine, theirs = topic_name("grp"), topic_name("mine"), topic_name("theirs")
    create_topics(admin, t)
    assert produce(secured.conf("admin"), t, 1) == [None]
    for group in (mine, theirs):  # a committed offset makes each group exist
        c = Consumer({**secured.conf("admin"), "group.id": group, "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(t, 0, 1)], asynchronous=False)
        finally:
            c.close()
    create_acls(admin, [allow("bob", ResourceType.GROUP, mine, AclOperation.DESCRIBE)])
    bob = secured.admin("bob")

    listed = {g.group_id for g in bob.list_consumer_groups().result(timeout=20).valid}
    assert mine in listed and theirs not in listed
    assert bob.describe_consumer_groups([mine])[mine].result(timeout=20).group_id == mine
    with pytest.raises(KafkaException) as e:
        bob.describe_consumer_groups([theirs])[theirs].result(timeout=20)
    assert code_of(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        bob.delete_consumer_groups([theirs])[theirs].result(timeout=20)
    assert code_of(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    # still there, its offset too
    offsets = admin.list_consumer_group_offsets([_group_request(theirs)])[theirs]
    assert [p.offset for p in offsets.result(timeout=20).topic_partitions] == [1]


def test_a_refused_find_coordinator_creates_no_internal_topic(tmp_path: Path) -> None:
    """FindCoordinator checks DESCRIBE on the group (or transactional id)
    before anything else: a refused requester gets GROUP_AUTHORIZATION_FAILED
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and does not make the broker
    create ``__consumer_offsets``; an allowed one does (Kafka's getCoordinator)."""
    b = acl_broker(tmp_path / "data", tmp_path / "broker.log").start()
    try:
        s = Secured(b)
        admin = s.admin()

        def internal_topics() -> set[str]:
            return {t for t in admin.list_topics(timeout=20).topics if t.startswith("__")}

        group, txn = topic_name("g"), topic_name("tx")
        bob = s.admin("bob")
        with pytest.raises(KafkaException) as e:
            bob.list_consumer_group_offsets([_group_request(group)])[group].result(timeout=20)
        assert code_of(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
        producer = Producer({**s.conf("bob"), "transactional.id": txn})
        with pytest.raises(KafkaException) as e:
            producer.init_transactions(20)
        assert code_of(e.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert internal_topics() == set()

        create_acls(admin, [allow("bob", ResourceType.GROUP, group, AclOperation.DESCRIBE)])
        got = bob.list_consumer_group_offsets([_group_request(group)])[group].result(timeout=20)
        assert got.group_id == group and got.topic_partitions == []
        assert internal_topics() == {"__consumer_offsets"}
    finally:
        b.stop()


def test_create_topics_without_describe_configs_sets_topic_config_error_code(
    secured: Secured,
) -> None:
    """A creator allowed CREATE but not DESCRIBE_CONFIGS on the topic gets
    the topic made and, in a CreateTopics v5+ answer, topic_config_error_code
    TOPIC_AUTHORIZATION_FAILED instead of its configs, partitions and
    replication factor (Kafka's handleCreateTopicsRequest). kafka-python shows
    the fields; the Java AdminClient turns the code into its result's
    TopicAuthorizationException."""
    from java_client import run_java
    from security_support import PLAIN_MODULE

    admin = secured.admin()
    hidden, shown, java = topic_name("hidden"), topic_name("shown"), topic_name("java")
    create_acls(admin, [
        allow("bob", ResourceType.TOPIC, hidden, AclOperation.CREATE),
        allow("bob", ResourceType.TOPIC, java, AclOperation.CREATE),
        allow("bob", ResourceType.TOPIC, shown, AclOperation.CREATE),
        allow("bob", ResourceType.TOPIC, shown, AclOperation.DESCRIBE_CONFIGS),
    ])  # fmt: skip
    kp = _kafka_python_admin(secured, "bob")
    try:
        spec = {"num_partitions": 2, "replication_factor": 1}
        [got] = kp.create_topics({hidden: spec})["topics"]
        assert (got["name"], got["error_code"]) == (hidden, 0)
        assert got["topic_config_error_code"] == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert (got["num_partitions"], got["replication_factor"]) == (-1, -1)
        assert not got.get("configs")
        [got] = kp.create_topics({shown: spec})["topics"]
        assert (got["error_code"], got["topic_config_error_code"]) == (0, 0)
        assert (got["num_partitions"], got["replication_factor"]) == (2, 1)
        assert "retention.ms" in got["configs"]
        # A failed creation carries no config error (Kafka resets it).
        [got] = kp.create_topics({hidden: spec}, raise_errors=False)["topics"]
        assert got["error_code"] == KafkaError.TOPIC_ALREADY_EXISTS
        assert got["topic_config_error_code"] == 0
    finally:
        kp.close()
    # Made all the same: the admin sees both with two partitions.
    described = admin.describe_topics(TopicCollection([hidden, shown]))
    assert [len(f.result(timeout=20).partitions) for f in described.values()] == [2, 2]

    jaas = f'{PLAIN_MODULE} required username="bob" password="{USERS["bob"]}";'
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": jaas}  # fmt: skip
    result = run_java(
        "admin", "create-topic", "--bootstrap", secured.conf("bob")["bootstrap.servers"],
        "--topic", java, "--partitions", "1", "--replication-factor", "1",
        *[arg for k, v in props.items() for arg in ("--property", f"{k}={v}")],
    )  # fmt: skip
    # all() succeeds (the topic is made); its partition count is refused.
    assert result.returncode == 1 and result.last["error"] == "TopicAuthorizationException"
    assert java in admin.list_topics(timeout=20).topics
