"""pylog's own operator tools against a four-broker cluster on a real
ZooKeeper, called in-process through click's CliRunner (the real commands,
speaking the Kafka protocol to the real brokers):

* ``pylog reassign-partitions``: --generate a plan onto two other brokers,
  --execute it with --throttle under an acks=all producer, --verify until
  done; the throttle configs are set as Kafka's tool sets them and removed by
  --verify, the new replicas hold every acknowledged record. --cancel of a
  throttled move in flight; a move between two directories of one broker
  (``log_dirs``); and bad plans, which change nothing;
* ``pylog leader-election`` after a reassignment left the leader off the
  preferred replica; ``pylog log-dirs --describe`` against the files on disk;
* ``pylog configs`` for users, clients, a user and client pair, IPs and the
  brokers' cluster-wide default.

One cluster for the module: its start-up is most of the time this file takes.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from pylog.cli import main
from pylog.testing import LocalCluster, ZooKeeperServer

THROTTLE_KEYS = {"leader.replication.throttled.rate", "follower.replication.throttled.rate"}
DYNAMIC_BROKER_CONFIG = 2


@pytest.fixture(scope="module")
def cluster(
    pylog_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    base = tmp_path_factory.mktemp("ops-cluster")
    # Broker 4 has two directories, for moves between them.
    c = LocalCluster(
        4,
        {"auto.leader.rebalance.enable": "false", "controlled.shutdown.retry.backoff.ms": 200},
        zookeeper=pylog_zookeeper,
        directory=str(base),
        per_broker={4: {"log.dirs": f"{base}/b4-a,{base}/b4-b"}},
    )
    try:
        yield c.start()
    finally:
        c.close()


def pylog(cluster: LocalCluster, *args: str) -> Result:
    return CliRunner().invoke(
        main, [*args, "--bootstrap-server", cluster.bootstrap_servers], catch_exceptions=False
    )


def ok(result: Result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result.stdout


def failed(result: Result) -> str:
    """The error of a command that must fail: exit 1, one ``Error:`` line."""
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    assert result.stderr.startswith("Error: "), result.stderr
    return result.stderr


def new_topic(cluster: LocalCluster, prefix: str, assignment: list[list[int]]) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)])[
        topic
    ].result(30)
    cluster.wait_for_full_isr(topic, len(assignment))
    return topic


def fill(cluster: LocalCluster, topic: str, partition: int, total_bytes: int) -> int:
    """Write about ``total_bytes`` of 10 KiB records; how many."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20,
                  "batch.size": 1 << 20, "acks": "all"})  # fmt: skip
    value = bytes(range(256)) * 40
    count = total_bytes // len(value) + 1
    for i in range(count):
        p.produce(topic, value, key=b"%d" % i, partition=partition)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    return count


def broker_dynamic(cluster: LocalCluster, broker: int) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    res = ConfigResource(ResourceType.BROKER, str(broker))
    entries = admin.describe_configs([res])[res].result(30)
    return {k: e.value for k, e in entries.items() if e.source == DYNAMIC_BROKER_CONFIG}


def topic_config(cluster: LocalCluster, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    res = ConfigResource(ResourceType.TOPIC, topic)
    return str(admin.describe_configs([res])[res].result(30)[key].value)


def write_json(tmp_path: Path, doc: object, name: str | None = None) -> str:
    path = tmp_path / (name or f"plan-{uuid.uuid4().hex[:8]}.json")
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


class AckedProducer:
    """An idempotent acks=all producer writing numbered records round the
    partitions of a topic until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 120_000})  # fmt: skip
        self.acked: set[bytes] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _ack(self, err: object, msg: object) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self.producer.produce(self.topic, b"r%08d" % i + b"." * 200,
                                  partition=i % self.partitions, on_delivery=self._ack)  # fmt: skip
            i += 1
            self.producer.poll(0.002)
        self.producer.flush(60)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def consume_all(bootstrap: str, topic: str, partitions: int, expect: int) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})  # fmt: skip
    c.assign([CkTopicPartition(topic, p, 0) for p in range(partitions)])
    got: set[bytes] = set()
    count = 0
    deadline = time.monotonic() + 60
    try:
        while count < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.add(m.value())
                count += 1
    finally:
        c.close()
    return got


def log_bytes(log_dir: str, topic: str, partition: int) -> int:
    d = Path(log_dir) / f"{topic}-{partition}"
    return sum(f.stat().st_size for f in d.glob("*.log"))


def verify_until_done(cluster: LocalCluster, plan: str, done: str = "", timeout: float = 60) -> str:
    """--verify until nothing is in progress, the throttles are cleared and
    the output has ``done``."""
    deadline = time.monotonic() + timeout
    while True:
        out = ok(pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file",
                       plan))  # fmt: skip
        settled = "still in progress" not in out and "Clearing broker-level throttles" in out
        if settled and done in out:
            return out
        assert time.monotonic() < deadline, out
        time.sleep(0.5)


# ---------------------------------------------------------------- reassignment


def test_generate_execute_verify_with_a_throttle_under_load(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster, "mv", [[1, 2], [2, 1]])
    filled = fill(cluster, topic, 0, 1_000_000)

    topics = write_json(tmp_path, {"version": 1, "topics": [{"topic": topic}]}, "topics.json")
    out = ok(pylog(cluster, "reassign-partitions", "--generate", "--topics-to-move-json-file",
                   topics, "--broker-list", "3,4"))  # fmt: skip
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": topic, "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]},
    ]}  # fmt: skip
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])
    assert [sorted(p["replicas"]) for p in proposed["partitions"]] == [[3, 4], [3, 4]]
    plan = write_json(tmp_path, lines[4])

    producer = AckedProducer(cluster.bootstrap_servers, topic, 2).start()
    try:
        deadline = time.monotonic() + 30
        while len(producer.acked) < 300:
            assert time.monotonic() < deadline and not producer.errors, producer.errors
            time.sleep(0.05)
        out = ok(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file",
                       plan, "--throttle", "20000000"))  # fmt: skip
        assert "Current partition replica assignment\n\n" in out
        assert json.loads(out.splitlines()[2])["partitions"][0]["replicas"] == [1, 2]
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert "Warning: You must run --verify periodically" in out
        assert "The inter-broker throttle limit was set to 20000000 B/s" in out
        assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out
        # As Kafka's tool sets them: the rates on every broker that sends or
        # receives, the moving replicas on the topic.
        for b in (1, 2, 3, 4):
            assert broker_dynamic(cluster, b) == dict.fromkeys(THROTTLE_KEYS, "20000000")
        assert topic_config(cluster, topic, "leader.replication.throttled.replicas") == (
            "0:1,0:2,1:1,1:2"
        )
        assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == (
            "0:3,0:4,1:3,1:4"
        )

        out = verify_until_done(cluster, plan)
        assert out.startswith("Status of partition reassignment:\n")
        assert f"Reassignment of partition {topic}-0 is completed." in out
        assert f"Reassignment of partition {topic}-1 is completed." in out
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
        assert f"Clearing topic-level throttles on topic {topic}" in out
        acked_during = len(producer.acked)
        deadline = time.monotonic() + 30
        while len(producer.acked) < acked_during + 200:  # still producing after the move
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        producer.stop()
    assert producer.errors == []
    for b in (1, 2, 3, 4):
        assert THROTTLE_KEYS.isdisjoint(broker_dynamic(cluster, b))
    assert topic_config(cluster, topic, "leader.replication.throttled.replicas") == ""
    assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == ""
    assert [sorted(cluster.replicas(topic, p)) for p in (0, 1)] == [[3, 4], [3, 4]]
    # The new replicas lead and hold everything acknowledged.
    cluster.wait_for_full_isr(topic, 2)
    assert {cluster.leader(topic, p) for p in (0, 1)} <= {3, 4}
    got = consume_all(cluster.bootstrap_servers, topic, 2, filled + len(producer.acked))
    assert producer.acked <= got, len(producer.acked - got)
    for p in (0, 1):
        sizes = {log_bytes(_dir_of(cluster, b, topic, p), topic, p) for b in (3, 4)}
        assert len(sizes) == 1 and sizes.pop() > 0


def _dir_of(cluster: LocalCluster, broker: int, topic: str, partition: int) -> str:
    """The log directory of broker's replica (broker 4 has two)."""
    if broker != 4:
        return cluster.broker(broker).log_dir
    for d in (f"{cluster.dir}/b4-a", f"{cluster.dir}/b4-b"):
        if (Path(d) / f"{topic}-{partition}").is_dir():
            return d
    raise AssertionError(f"{topic}-{partition} is in neither of broker 4's directories")


def test_cancel_a_throttled_reassignment(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = new_topic(cluster, "cancel", [[1]])
    fill(cluster, topic, 0, 3_000_000)
    # 1 KB/s: the copy cannot finish while the test runs.
    plan = write_json(tmp_path, {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 3]}]})  # fmt: skip
    out = ok(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan,
                   "--throttle", "1024"))  # fmt: skip
    assert f"Successfully started partition reassignment for {topic}-0" in out
    out = ok(pylog(cluster, "reassign-partitions", "--list"))
    assert f"{topic}-0: replicas: 1,3. adding: 3." in out
    out = ok(pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan))
    assert f"Reassignment of partition {topic}-0 is still in progress." in out
    assert "Clearing" not in out  # throttles stay while it moves
    assert broker_dynamic(cluster, 3) == dict.fromkeys(THROTTLE_KEYS, "1024")

    # Another plan while this one moves: refused unless --additional.
    other = write_json(tmp_path, {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 2]}]}, "other.json")  # fmt: skip
    err = failed(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file",
                       other))  # fmt: skip
    assert "Cannot execute because there is an existing partition assignment." in err

    # --additional with the plan in flight changes its throttle.
    out = ok(pylog(cluster, "reassign-partitions", "--execute", "--additional",
                   "--reassignment-json-file", plan, "--throttle", "2048"))  # fmt: skip
    assert "The inter-broker throttle limit was set to 2048 B/s" in out
    assert broker_dynamic(cluster, 3) == dict.fromkeys(THROTTLE_KEYS, "2048")
    assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == "0:3"
    assert f"{topic}-0: replicas: 1,3. adding: 3." in ok(
        pylog(cluster, "reassign-partitions", "--list")
    )

    out = ok(pylog(cluster, "reassign-partitions", "--cancel", "--reassignment-json-file", plan,
                   "--preserve-throttles"))  # fmt: skip
    assert f"Successfully cancelled partition reassignment for: {topic}-0" in out
    assert "None of the specified partition moves are active." in out
    assert "Clearing" not in out
    assert "No partition reassignments found." in ok(
        pylog(cluster, "reassign-partitions", "--list")
    )
    assert cluster.replicas(topic) == [1]
    cluster.wait_for(lambda: cluster.isr(topic) == [1], "the ISR back to [1]", 30)
    assert broker_dynamic(cluster, 3) == dict.fromkeys(THROTTLE_KEYS, "2048")
    # --verify of the cancelled plan: not what it asked for, nothing moving,
    # so the throttles come off.
    out = ok(pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", plan))
    assert (
        f"There is no active reassignment of partition {topic}-0, but replica set is 1 rather "
        "than 1,3." in out
    )
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in out
    assert THROTTLE_KEYS.isdisjoint(broker_dynamic(cluster, 3))
    assert topic_config(cluster, topic, "follower.replication.throttled.replicas") == ""


def test_move_a_replica_between_a_brokers_directories(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    topic = new_topic(cluster, "dirs", [[4, 1]])
    fill(cluster, topic, 0, 500_000)
    dir_a, dir_b = f"{cluster.dir}/b4-a", f"{cluster.dir}/b4-b"
    before = _dir_of(cluster, 4, topic, 0)
    target = dir_b if before == dir_a else dir_a
    entry = {"topic": topic, "partition": 0, "replicas": [4, 1], "log_dirs": [target, "any"]}
    plan = write_json(tmp_path, {"version": 1, "partitions": [entry]})
    out = ok(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan))
    assert (
        f"Successfully started moving log directory to {target} for replica {topic}-0 with broker 4"
        in out
    )
    # A --verify that meets the broker swapping the copy in may see the
    # replica in neither state; the next one sees it moved.
    moved = f"Reassignment of replica {topic}-0-4 completed successfully."
    out = verify_until_done(cluster, plan, moved)
    assert _dir_of(cluster, 4, topic, 0) == target
    assert log_bytes(target, topic, 0) == log_bytes(cluster.broker(1).log_dir, topic, 0)

    # log-dirs --describe shows it there, sized as on disk.
    out = ok(pylog(cluster, "log-dirs", "--describe", "--broker-list", "4", "--topic-list", topic))
    assert out.splitlines()[:2] == [
        "Querying brokers for log directories information",
        "Received log directory information from brokers 4",
    ]
    doc = json.loads(out.splitlines()[2])
    (broker,) = doc["brokers"]
    dirs = {d["logDir"]: d for d in broker["logDirs"]}
    assert set(dirs) == {dir_a, dir_b} and all(d["error"] is None for d in dirs.values())
    assert dirs[before]["partitions"] == []
    assert dirs[target]["partitions"] == [
        {"partition": f"{topic}-0", "size": log_bytes(target, topic, 0), "offsetLag": 0,
         "isFuture": False}
    ]  # fmt: skip


def test_bad_plans_change_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = new_topic(cluster, "bad", [[1, 2]])

    def plan(replicas: list[int], **extra: object) -> str:
        entry = {"topic": topic, "partition": 0, "replicas": replicas, **extra}
        return write_json(tmp_path, {"version": 1, "partitions": [entry]})

    cases = [
        (plan([1, 99]), "Unknown broker id 99"),
        (plan([1, 2], log_dirs=["/no/such/dir", "any"]), "the log directory /no/such/dir is not"),
        (plan([1, 2], log_dirs=["any"]), "Size of replicas list [1, 2] is different"),
        (plan([1, 1]), "Partition replica lists may not contain duplicate entries"),
        (write_json(tmp_path, '{"version":1,"partitions":[{"topic":'), "not a valid JSON"),
        (
            write_json(
                tmp_path,
                {"version": 1, "partitions": [{"topic": "ghost", "partition": 0, "replicas": [1]}]},
            ),
            "Unable to find partition: ghost-0",
        ),
        (write_json(tmp_path, {"version": 2, "partitions": []}), "Not supported version"),
    ]
    for path, message in cases:
        text = Path(path).read_text()
        err = failed(pylog(cluster, "reassign-partitions", "--execute",
                           "--reassignment-json-file", path, "--throttle", "5000"))  # fmt: skip
        assert message in err, (text, err)
    # Nothing was started or throttled.
    assert "No partition reassignments found." in ok(
        pylog(cluster, "reassign-partitions", "--list")
    )
    assert cluster.replicas(topic) == [1, 2]
    # --replica-alter-log-dirs-throttle paces the brokers' moves between their
    # directories; --verify takes it off once the moves are done.
    alter_key = "replica.alter.log.dirs.io.max.bytes.per.second"
    here = plan([1, 2], log_dirs=[cluster.broker(1).log_dir, "any"])
    out = ok(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file",
                   here, "--replica-alter-log-dirs-throttle", "5000"))  # fmt: skip
    assert "throttle limit was set to 5000 B/s" in out, out
    assert broker_dynamic(cluster, 1).get(alter_key) == "5000"
    deadline = time.monotonic() + 60
    while alter_key in broker_dynamic(cluster, 1):
        assert time.monotonic() < deadline, out
        out = ok(
            pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file", here)
        )
        time.sleep(0.2)
    assert cluster.replicas(topic) == [1, 2]
    for b in (1, 2):
        assert THROTTLE_KEYS.isdisjoint(broker_dynamic(cluster, b))
    assert topic_config(cluster, topic, "leader.replication.throttled.replicas") == ""

    # Usage: one action, and its options only.
    result = pylog(cluster, "reassign-partitions", "--execute", "--verify",
                   "--reassignment-json-file", plan([1, 2]))  # fmt: skip
    assert result.exit_code == 2 and "exactly one action" in result.stderr
    result = pylog(cluster, "reassign-partitions", "--verify", "--reassignment-json-file",
                   plan([1, 2]), "--throttle", "100")  # fmt: skip
    assert result.exit_code == 2 and "can't be used with action" in result.stderr

    # A throttle for a broker that is not there, with pylog configs.
    err = failed(pylog(cluster, "configs", "alter", "--broker", "99", "--add-config",
                       "leader.replication.throttled.rate=1000"))  # fmt: skip
    assert "broker 99 is not in the cluster" in err
    err = failed(pylog(cluster, "log-dirs", "--describe", "--broker-list", "1,9"))
    assert "The given brokers do not exist from --broker-list: 9." in err


# ---------------------------------------------------------------- elections


def test_preferred_leader_election(cluster: LocalCluster, tmp_path: Path) -> None:
    topic = new_topic(cluster, "ple", [[2, 3]])
    assert cluster.leader(topic) == 2
    # Reordering the replicas makes 3 the preferred leader; the leader stays.
    plan = write_json(tmp_path, {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [3, 2]}]})  # fmt: skip
    ok(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file", plan))
    verify_until_done(cluster, plan)
    assert cluster.replicas(topic) == [3, 2] and cluster.leader(topic) == 2

    out = ok(pylog(cluster, "leader-election", "--election-type", "PREFERRED", "--topic", topic,
                   "--partition", "0"))  # fmt: skip
    assert out == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
    cluster.wait_for(lambda: cluster.leader(topic) == 3, "the preferred leader", 30)

    elections = write_json(tmp_path, {"partitions": [{"topic": topic, "partition": 0}]}, "e.json")
    out = ok(pylog(cluster, "leader-election", "--election-type", "preferred",
                   "--path-to-json-file", elections))  # fmt: skip
    assert out == f"Valid replica already elected for partitions {topic}-0\n"

    result = pylog(cluster, "leader-election", "--election-type", "PREFERRED", "--topic",
                   "ghost", "--partition", "0")  # fmt: skip
    err = failed(result)
    assert "Error completing leader election (PREFERRED) for partition: ghost-0:" in result.stdout
    assert "UnknownTopicOrPartition" in result.stdout, result.stdout
    assert "1 replica(s) could not be elected" in err
    # Every partition: the controller answers only those it elected or failed
    # to elect, so there is nothing to print.
    all_out = ok(pylog(cluster, "leader-election", "--election-type", "PREFERRED",
                       "--all-topic-partitions"))  # fmt: skip
    assert all_out == ""
    dupes = write_json(tmp_path, {"partitions": [{"topic": topic, "partition": 0}] * 2}, "d.json")
    err = failed(pylog(cluster, "leader-election", "--election-type", "PREFERRED",
                       "--path-to-json-file", dupes))  # fmt: skip
    assert "Replica election data contains duplicate partitions" in err


# ---------------------------------------------------------------- configs


def test_quota_configs_for_users_clients_and_ips(cluster: LocalCluster) -> None:
    rates = "producer_byte_rate=1024,consumer_byte_rate=2e7"
    out = ok(pylog(cluster, "configs", "alter", "--entity-type", "users", "--entity-name",
                   "alice", "--add-config", rates))  # fmt: skip
    assert out == "Completed updating config for user alice.\n"
    out = ok(pylog(cluster, "configs", "describe", "--entity-type", "users", "--entity-name",
                   "alice"))  # fmt: skip
    assert out == (
        "Quota configs for user-principal 'alice' are consumer_byte_rate=2.0E7, "
        "producer_byte_rate=1024.0\n"
    )
    ok(pylog(cluster, "configs", "alter", "--user", "alice", "--delete-config",
             "consumer_byte_rate"))  # fmt: skip
    out = ok(pylog(cluster, "configs", "describe", "--user", "alice"))
    assert out == "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"

    # The default client, and a user and client pair.
    out = ok(pylog(cluster, "configs", "alter", "--entity-type", "clients", "--entity-default",
                   "--add-config", "request_percentage=50"))  # fmt: skip
    assert out == "Completed updating default config for clients in the cluster.\n"
    out = ok(pylog(cluster, "configs", "alter", "--entity-type", "users", "--entity-name", "bob",
                   "--entity-type", "clients", "--entity-name", "app",
                   "--add-config", "producer_byte_rate=4096"))  # fmt: skip
    assert out == "Completed updating config for user bob.\n"
    out = ok(pylog(cluster, "configs", "describe", "--entity-type", "clients"))
    assert out == "Quota configs for the default client-id are request_percentage=50.0\n"
    out = ok(pylog(cluster, "configs", "describe", "--user", "bob", "--client", "app"))
    assert out == (
        "Quota configs for user-principal 'bob', client-id 'app' are producer_byte_rate=4096.0\n"
    )
    for args in (("--user", "alice"), ("--user", "bob", "--client", "app"),
                 ("--entity-type", "clients", "--entity-default")):  # fmt: skip
        key = {"alice": "producer_byte_rate", "bob": "producer_byte_rate"}.get(
            args[1], "request_percentage"
        )
        ok(pylog(cluster, "configs", "alter", *args, "--delete-config", key))
    assert ok(pylog(cluster, "configs", "describe", "--entity-type", "users")) == ""

    # Bad quota changes: Kafka's tool's messages, nothing changed.
    err = failed(pylog(cluster, "configs", "alter", "--user", "carol", "--add-config",
                       "retention.ms=5"))  # fmt: skip
    assert "Only quota configs can be added for 'users'" in err
    err = failed(pylog(cluster, "configs", "alter", "--user", "carol", "--add-config",
                       "producer_byte_rate=fast"))  # fmt: skip
    assert "Cannot parse quota configuration value for producer_byte_rate: fast" in err
    err = failed(pylog(cluster, "configs", "alter", "--user", "carol", "--delete-config",
                       "producer_byte_rate"))  # fmt: skip
    assert "Invalid config(s): producer_byte_rate" in err
    err = failed(pylog(cluster, "configs", "alter", "--ip", "127.0.0.1", "--add-config",
                       "producer_byte_rate=1"))  # fmt: skip
    assert "Only connection quota configs can be added for 'ips'" in err
    result = pylog(cluster, "configs", "alter", "--ip", "not an ip", "--add-config",
                   "connection_creation_rate=1")  # fmt: skip
    assert result.exit_code == 2
    assert "must be a valid IP or resolvable host, but it is: not an ip" in result.stderr
    assert ok(pylog(cluster, "configs", "describe", "--entity-type", "users")) == ""

    # IPs: the CLI sends Kafka's "ip" entity; a broker with IP quotas keeps
    # them, one without answers its error, which the CLI reports.
    result = pylog(cluster, "configs", "alter", "--entity-type", "ips", "--entity-name",
                   "127.0.0.1", "--add-config", "connection_creation_rate=10")  # fmt: skip
    if result.exit_code == 0:
        assert result.stdout == "Completed updating config for ip 127.0.0.1.\n"
        out = ok(pylog(cluster, "configs", "describe", "--ip", "127.0.0.1"))
        assert out == "Quota configs for ip '127.0.0.1' are connection_creation_rate=10.0\n"
        ok(pylog(cluster, "configs", "alter", "--ip", "127.0.0.1", "--delete-config",
                 "connection_creation_rate"))  # fmt: skip
        assert ok(pylog(cluster, "configs", "describe", "--ip", "127.0.0.1")) == ""
    else:
        err = failed(result)
        assert "InvalidRequestError: IP quotas are not supported" in err, err


def test_broker_default_configs(cluster: LocalCluster) -> None:
    out = ok(pylog(cluster, "configs", "alter", "--entity-type", "brokers", "--entity-default",
                   "--add-config", "log.retention.ms=604800000"))  # fmt: skip
    assert out == "Completed updating default config for brokers in the cluster.\n"
    out = ok(pylog(cluster, "configs", "describe", "--entity-type", "brokers",
                   "--entity-default"))  # fmt: skip
    assert out.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert out.splitlines()[1].startswith("  log.retention.ms=604800000 sensitive=false")
    ok(pylog(cluster, "configs", "alter", "--entity-type", "brokers", "--entity-default",
             "--delete-config", "log.retention.ms"))  # fmt: skip
    out = ok(pylog(cluster, "configs", "describe", "--entity-type", "brokers",
                   "--entity-default"))  # fmt: skip
    assert out == "Default configs for brokers in the cluster are:\n"
    # No name: every broker, then the default, as Kafka's tool lists them.
    out = ok(pylog(cluster, "configs", "describe", "--entity-type", "brokers"))
    headings = [line for line in out.splitlines() if not line.startswith("  ")]
    assert headings == [
        *(f"Dynamic configs for broker {b} are:" for b in (1, 2, 3, 4)),
        "Default configs for brokers in the cluster are:",
    ]


def test_a_plan_naming_a_stopped_broker_changes_nothing(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Last in the module: it stops broker 3 for good."""
    topic = new_topic(cluster, "dead", [[1, 2]])
    cluster.broker(3).stop()

    def gone() -> bool:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        return 3 not in admin.list_topics(timeout=10).brokers

    cluster.wait_for(gone, "broker 3 out of the cluster's metadata", 60)
    plan = write_json(tmp_path, {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1, 3]}]})  # fmt: skip
    err = failed(pylog(cluster, "reassign-partitions", "--execute", "--reassignment-json-file",
                       plan, "--throttle", "5000"))  # fmt: skip
    assert "Unknown broker id 3" in err
    assert cluster.replicas(topic) == [1, 2]
    assert THROTTLE_KEYS.isdisjoint(broker_dynamic(cluster, 1))
    err = failed(pylog(cluster, "log-dirs", "--describe", "--broker-list", "3"))
    assert "do not exist from --broker-list: 3. Current existent brokers: 1,2,4" in err
