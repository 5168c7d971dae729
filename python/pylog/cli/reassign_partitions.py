"""``pylog reassign-partitions``: move partitions between brokers, and
replicas between a broker's log directories, the way Kafka's
``kafka-reassign-partitions`` tool (ReassignPartitionsCommand, KIP-455)
does, with its JSON files and its messages.

* ``--generate`` proposes a plan spreading the topics of
  ``--topics-to-move-json-file`` over ``--broker-list`` (rack-unaware: pylog
  does not place replicas by ``broker.rack`` here);
* ``--execute`` prints the current assignment to keep for a rollback, sets
  the replication throttles (``--throttle``: ``leader/follower.replication.
  throttled.rate`` on every broker a move touches and ``leader/follower.
  replication.throttled.replicas`` on the topics, Kafka's
  ReplicationQuotaManager keys), starts the moves with
  AlterPartitionReassignments, then the ``log_dirs`` moves with
  AlterReplicaLogDirs;
* ``--verify`` says per partition (and per replica move) whether it is done,
  and takes the throttles off once nothing is moving (unless
  ``--preserve-throttles``);
* ``--cancel`` cancels the plan's moves still in flight; ``--list`` lists
  every reassignment in flight.

Unlike Kafka's tool, everything a plan names is checked before anything is
changed: its brokers, its partitions, the directories of ``log_dirs`` (by
DescribeLogDirs at each broker) and the throttle configs (validated by the
brokers first), so a bad plan changes nothing.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import click

from pylog.cli.client import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    ClusterClient,
    check,
    error_for,
)
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
    timeout_option,
)
from pylog.cli.log_dirs import describe_log_dirs, parse_id_list
from pylog.errors import ErrorCode
from pylog.protocol import ApiKey

ANY_LOG_DIR = "any"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
#: What --verify and --cancel clear (Kafka's tool clears all of them).
BROKER_THROTTLES = (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)
TOPIC_THROTTLES = (LEADER_REPLICAS, FOLLOWER_REPLICAS)

EXISTING_REASSIGNMENT = (
    "Cannot execute because there is an existing partition assignment.  Use --additional "
    "to override this and create a new partition assignment in addition to the existing "
    "one. The --additional flag can also be used to change the throttle by resubmitting "
    "the current reassignment."
)
VERIFY_PERIODICALLY = (
    "Warning: You must run --verify periodically, until the reassignment completes, to "
    "ensure the throttle is removed."
)

TopicPartition = tuple[str, int]
#: (topic, partition, broker): one replica, as Kafka's TopicPartitionReplica.
Replica = tuple[str, int, int]


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def replica_name(r: Replica) -> str:
    return f"{r[0]}-{r[1]}-{r[2]}"


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


# ---------------------------------------------------------------- the JSON files


@dataclass
class Plan:
    """A reassignment JSON file: target replicas per partition, in the file's
    order, and the directories named in ``log_dirs`` (``"any"`` left out)."""

    partitions: list[tuple[TopicPartition, list[int]]]
    log_dirs: dict[Replica, str]

    @property
    def targets(self) -> dict[TopicPartition, list[int]]:
        return dict(self.partitions)


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as e:
        raise CommandError(f"The input string is not a valid JSON: {e}") from None


def _field(obj: Any, name: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or name not in obj:
        raise CommandError(f"{where}: no such field `{name}`")
    value = obj[name]
    if kind is list and isinstance(value, list):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is str and isinstance(value, str):
        return value
    raise CommandError(f"{where}: `{name}` is {json.dumps(value)}, not a {kind.__name__}")


def _version(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise CommandError("The input string is not a valid JSON: not an object")
    version = doc.get("version", 1)
    if version != 1:
        raise CommandError(f"Not supported version field value {version}")


def parse_plan(text: str) -> Plan:
    """Kafka's reassignment JSON, version 1:
    ``{"version":1,"partitions":[{"topic","partition","replicas","log_dirs"?}]}``."""
    doc = _load_json(text)
    _version(doc)
    plan = Plan([], {})
    for i, entry in enumerate(doc.get("partitions") or []):
        where = f"partitions[{i}]"
        topic = _field(entry, "topic", str, where)
        partition = _field(entry, "partition", int, where)
        replicas = _field(entry, "replicas", list, where)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
            raise CommandError(f"{where}: `replicas` must be broker ids: {json.dumps(replicas)}")
        dirs = entry.get("log_dirs")
        if dirs is None:
            dirs = [ANY_LOG_DIR] * len(replicas)
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise CommandError(f'{where}: `log_dirs` must be a list of paths or "any"')
        if len(dirs) != len(replicas):
            raise CommandError(
                f"Size of replicas list {_java_list(replicas)} is different from size of log "
                f"dirs list {_java_list(dirs)} for partition {topic}-{partition}"
            )
        plan.partitions.append(((topic, partition), list(replicas)))
        for broker, d in zip(replicas, dirs, strict=True):
            if d != ANY_LOG_DIR:
                plan.log_dirs[(topic, partition, broker)] = d
    return plan


def _java_list(items: Iterable[object]) -> str:
    return "[" + ", ".join(str(x) for x in items) + "]"


def check_plan_for_execute(plan: Plan) -> None:
    """The checks Kafka's tool makes of a plan before anything else."""
    if not plan.partitions:
        raise CommandError("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas in plan.partitions):
        raise CommandError("Partition replica list cannot be empty")
    seen = Counter(tp for tp, _ in plan.partitions)
    dupes = sorted(tp for tp, n in seen.items() if n > 1)
    if dupes:
        raise CommandError(
            "Partition reassignment contains duplicate topic partitions: "
            + ",".join(tp_name(tp) for tp in dupes)
        )
    repeated = [
        f"{tp_name(tp)} contains multiple entries for "
        + ",".join(str(b) for b in sorted(b for b, n in Counter(replicas).items() if n > 1))
        for tp, replicas in plan.partitions
        if len(set(replicas)) != len(replicas)
    ]
    if repeated:
        raise CommandError(
            "Partition replica lists may not contain duplicate entries: " + ". ".join(repeated)
        )


def parse_topics_to_move(text: str) -> list[str]:
    """``{"version":1,"topics":[{"topic":"foo"},...]}``."""
    doc = _load_json(text)
    _version(doc)
    return [
        _field(entry, "topic", str, f"topics[{i}]")
        for i, entry in enumerate(doc.get("topics") or [])
    ]


def format_plan(
    assignment: Mapping[TopicPartition, list[int]], log_dirs: Mapping[Replica, str]
) -> str:
    """A reassignment JSON file, compact and sorted by partition, every
    replica's directory given (``"any"`` when none is named)."""
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "replicas": replicas,
                    "log_dirs": [log_dirs.get((tp[0], tp[1], r), ANY_LOG_DIR) for r in replicas],
                }
                for tp, replicas in sorted(assignment.items())
            ],
        },
        separators=(",", ":"),
    )


# ---------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class Ongoing:
    """A reassignment in flight (ListPartitionReassignments)."""

    replicas: list[int]
    adding: list[int]
    removing: list[int]


def list_reassignments(
    admin: ClusterClient, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, Ongoing]:
    """ListPartitionReassignments at the controller (None: every partition)."""
    wanted: dict[str, list[int]] | None = None
    if partitions is not None:
        wanted = {}
        for t, p in partitions:
            wanted.setdefault(t, []).append(p)
    body = {
        "timeout_ms": int(admin.timeout_s * 1000),
        "topics": None
        if wanted is None
        else [{"name": t, "partition_indexes": sorted(ps)} for t, ps in wanted.items()],
    }

    def attempt() -> dict[TopicPartition, Ongoing]:
        resp = admin.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, body, admin.controller())
        check(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): Ongoing(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in resp.topics
            for p in t.partitions
        }

    found: dict[TopicPartition, Ongoing] = admin.retrying(attempt)
    return found


def alter_reassignments(
    admin: ClusterClient, targets: Mapping[TopicPartition, list[int] | None]
) -> dict[TopicPartition, str]:
    """AlterPartitionReassignments at the controller (None replicas: cancel);
    the partitions that failed, with the error."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), replicas in sorted(targets.items()):
        by_topic.setdefault(t, []).append({"partition_index": p, "replicas": replicas})
    body = {
        "timeout_ms": int(admin.timeout_s * 1000),
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
    }

    def attempt() -> dict[TopicPartition, str]:
        resp = admin.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, admin.controller())
        if resp.error_code == ErrorCode.NOT_CONTROLLER:
            raise error_for(resp.error_code, resp.error_message)
        check(resp.error_code, resp.error_message)
        return {
            (t.name, p.partition_index): error_for_code(p.error_code, p.error_message)
            for t in resp.responses
            for p in t.partitions
            if p.error_code
        }

    failed: dict[TopicPartition, str] = admin.retrying(attempt)
    return failed


def live_brokers(admin: ClusterClient) -> set[int]:
    return set(admin.metadata([]).brokers)


def current_assignment(
    admin: ClusterClient, topics: Iterable[str]
) -> dict[str, dict[int, list[int]] | None]:
    """Each topic's replicas per partition; None for a topic that does not exist."""
    names = sorted(set(topics))
    described = admin.metadata(names).topics
    out: dict[str, dict[int, list[int]] | None] = {}
    for name in names:
        t = described.get(name)
        if t is None or t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            out[name] = None
        else:
            check(t.error_code, f"topic {name}")
            out[name] = {p: list(m.replicas) for p, m in t.partitions.items()}
    return out


def alter_configs(
    admin: ClusterClient,
    changes: Mapping[tuple[int, str], Mapping[str, str | None]],
    *,
    validate_only: bool = False,
) -> None:
    """IncrementalAlterConfigs of several resources ((type, name) -> key ->
    value, None: delete), a broker's at that broker; the first refusal is
    raised."""
    for (rtype, name), keys in sorted(changes.items()):
        if not keys:
            continue
        code, message = admin.alter_configs(rtype, name, keys, validate_only=validate_only)
        if code:
            label = "topic" if rtype == CONFIG_RESOURCE_TOPIC else "broker"
            raise CommandError(f"{label} {name}: {error_for_code(code, message)}")


def replica_dirs(
    admin: ClusterClient, replicas: Iterable[Replica]
) -> dict[Replica, tuple[str | None, str | None]]:
    """Where each replica is on its broker: (current directory, directory of a
    move's future log); a replica the broker does not hold is left out (Kafka's
    describeReplicaLogDirs, over DescribeLogDirs)."""
    by_broker: dict[int, dict[str, list[int]]] = {}
    for t, p, b in replicas:
        by_broker.setdefault(b, {}).setdefault(t, []).append(p)
    found: dict[Replica, tuple[str | None, str | None]] = {}
    for broker, parts in by_broker.items():
        asked = {(t, p) for t, ps in parts.items() for p in ps}
        for path, d in describe_log_dirs(admin, broker, parts).items():
            for t, p, future in d.replicas:
                if (t, p) not in asked:
                    continue
                key = (t, p, broker)
                current, fut = found.get(key, (None, None))
                found[key] = (current, path) if future else (path, fut)
    return found


def alter_replica_log_dirs(admin: ClusterClient, moves: Mapping[Replica, str]) -> set[Replica]:
    """AlterReplicaLogDirs at each broker; the replicas whose move started.
    REPLICA_NOT_AVAILABLE (the replica has not reached the broker yet) is
    asked again later, as Kafka's tool does; any other error is raised."""
    by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (t, p, b), path in moves.items():
        by_broker.setdefault(b, {}).setdefault(path, {}).setdefault(t, []).append(p)
    started: set[Replica] = set()
    for broker, dirs in sorted(by_broker.items()):
        body = {
            "dirs": [
                {
                    "path": path,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
                for path, topics in dirs.items()
            ]
        }
        resp = admin.request(ApiKey.ALTER_REPLICA_LOG_DIRS, body, broker)
        for t in resp.results:
            for p in t.partitions:
                replica = (t.topic_name, p.partition_index, broker)
                if p.error_code == 0:
                    started.add(replica)
                elif p.error_code != ErrorCode.REPLICA_NOT_AVAILABLE:
                    raise CommandError(
                        f"Failed to alter dir for {replica_name(replica)}: "
                        f"{error_for_code(p.error_code)}"
                    )
    return started


def execute_moves(admin: ClusterClient, moves: Mapping[Replica, str], timeout_ms: int) -> None:
    """Start the directory moves, asking again every 100 ms for replicas not
    on their broker yet, until ``timeout_ms``."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        started = alter_replica_log_dirs(admin, pending)
        for replica in sorted(started, key=lambda r: (r[2], r[0], r[1])):
            click.echo(
                f"Successfully started moving log directory to {pending[replica]} for replica "
                f"{replica[0]}-{replica[1]} with broker {replica[2]} "
            )
            del pending[replica]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise CommandError(
                f"Timed out before log directory {_plural(len(pending), 'move')} could be "
                "started for: " + ",".join(replica_name(r) for r in sorted(pending))
            )
        time.sleep(0.1)


# ---------------------------------------------------------------- throttles


@dataclass
class PartitionMove:
    sources: set[int]
    destinations: set[int]


def proposed_moves(
    ongoing: Mapping[TopicPartition, Ongoing],
    targets: Mapping[TopicPartition, list[int]],
    current: Mapping[TopicPartition, list[int]],
) -> dict[TopicPartition, PartitionMove]:
    """Which brokers send (the replicas before the move) and which receive
    (the new ones), for moves in flight and the plan's (a plan's partition
    already moving keeps the sources of the move in flight)."""
    moves = {
        tp: PartitionMove(set(o.replicas) - set(o.adding), set(o.adding))
        for tp, o in ongoing.items()
    }
    for tp, replicas in targets.items():
        sources = moves[tp].sources if tp in moves else set(current[tp])
        moves[tp] = PartitionMove(set(sources), set(replicas) - set(sources))
    return moves


def throttle_configs(
    moves: Mapping[TopicPartition, PartitionMove], rate: int
) -> dict[tuple[int, str], dict[str, str | None]]:
    """The configs ``--throttle`` sets: the rates on every broker sending or
    receiving, and per topic the ``partition:broker`` lists of its sending
    (leader) and receiving (follower) replicas."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for (topic, p), move in moves.items():
        leader.setdefault(topic, set()).update((p, b) for b in move.sources)
        follower.setdefault(topic, set()).update(
            (p, b) for b in move.destinations if b not in move.sources
        )
        brokers |= move.sources | move.destinations
    changes: dict[tuple[int, str], dict[str, str | None]] = {}
    for topic in sorted(set(leader) | set(follower)):
        changes[(CONFIG_RESOURCE_TOPIC, topic)] = {
            LEADER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(leader.get(topic, ()))),
            FOLLOWER_REPLICAS: ",".join(f"{p}:{b}" for p, b in sorted(follower.get(topic, ()))),
        }
    for b in sorted(brokers):
        changes[(CONFIG_RESOURCE_BROKER, str(b))] = {
            LEADER_RATE: str(rate),
            FOLLOWER_RATE: str(rate),
        }
    return changes


def clear_throttles(admin: ClusterClient, plan: Plan) -> None:
    """Take every reassignment throttle off the live brokers, the plan's
    brokers and the plan's topics (Kafka's tool cannot know which brokers
    an earlier move throttled, so it clears them all)."""
    live = live_brokers(admin)
    brokers = sorted(live | {b for _, rs in plan.partitions for b in rs if b in live})
    click.echo(
        f"Clearing broker-level throttles on {_plural(len(brokers), 'broker')} "
        + ",".join(str(b) for b in brokers)
    )
    alter_configs(
        admin, {(CONFIG_RESOURCE_BROKER, str(b)): dict.fromkeys(BROKER_THROTTLES) for b in brokers}
    )
    existing = current_assignment(admin, {t for (t, _), _ in plan.partitions})
    topics = sorted(t for t, found in existing.items() if found is not None)
    click.echo(
        f"Clearing topic-level throttles on {_plural(len(topics), 'topic')} " + ",".join(topics)
    )
    alter_configs(
        admin, {(CONFIG_RESOURCE_TOPIC, t): dict.fromkeys(TOPIC_THROTTLES) for t in topics}
    )


# ---------------------------------------------------------------- --generate


def assign_replicas(
    brokers: list[int], partitions: int, replication_factor: int
) -> dict[int, list[int]]:
    """Spread ``partitions`` partitions of ``replication_factor`` replicas over
    ``brokers`` evenly, ignoring racks: the first replicas go round the
    brokers from a random start, and each later replica sits a shift further
    on, the shift growing each time the first replicas have gone round once,
    so the followers of one broker's leaders are spread too (the scheme of
    Kafka's AdminUtils, rack-unaware)."""
    n = len(brokers)
    if replication_factor > n:
        raise CommandError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}."
        )
    ordered = sorted(brokers)
    start = random.randrange(n)
    shift0 = random.randrange(n)
    out: dict[int, list[int]] = {}
    for p in range(partitions):
        first = (start + p) % n
        shift = (shift0 + p // n) % max(n - 1, 1) + 1 if n > 1 else 0
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            # Followers are placed among the other n-1 brokers, j+shift steps on.
            step = (shift + j) % (n - 1)
            replicas.append(ordered[(first + 1 + step) % n])
        out[p] = replicas
    return out


# ---------------------------------------------------------------- the command

_ACTIONS = ("generate", "execute", "verify", "cancel", "list")
_REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
_PERMITTED = {
    "generate": {"disable_rack_aware"},
    "execute": {"additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"},
    "verify": {"preserve_throttles"},
    "cancel": {"preserve_throttles", "timeout"},
    "list": set(),
}
_OPTION_NAMES = {
    "topics_to_move_json_file": "--topics-to-move-json-file",
    "broker_list": "--broker-list",
    "reassignment_json_file": "--reassignment-json-file",
    "throttle": "--throttle",
    "replica_alter_log_dirs_throttle": "--replica-alter-log-dirs-throttle",
    "preserve_throttles": "--preserve-throttles",
    "additional": "--additional",
    "disable_rack_aware": "--disable-rack-aware",
    "timeout": "--timeout",
}


@click.command("reassign-partitions")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--generate", is_flag=True, help="Propose a plan (printed, not executed).")
@click.option("--execute", is_flag=True, help="Start the plan of --reassignment-json-file.")
@click.option(
    "--verify", is_flag=True, help="Report the plan's progress; clear the throttles when done."
)
@click.option("--cancel", is_flag=True, help="Cancel the plan's moves still in flight.")
@click.option("--list", "list_", is_flag=True, help="List every reassignment in flight.")
@click.option(
    "--topics-to-move-json-file",
    type=click.Path(exists=True, dir_okay=False),
    help='With --generate: {"version":1,"topics":[{"topic":"foo"}]}.',
)
@click.option(
    "--broker-list", metavar="ID[,ID...]", help="With --generate: the brokers to spread over."
)
@click.option(
    "--reassignment-json-file",
    type=click.Path(exists=True, dir_okay=False),
    help='The plan: {"version":1,"partitions":[{"topic":"foo","partition":0,'
    '"replicas":[1,2],"log_dirs":["any","/disk2"]}]} (log_dirs optional; "any": leave '
    "the replica's directory to the broker).",
)
@click.option(
    "--throttle",
    type=int,
    default=-1,
    metavar="BYTES/S",
    help="With --execute: cap the replication traffic of the moves (at least 1 KB/s).",
)
@click.option(
    "--replica-alter-log-dirs-throttle",
    type=int,
    default=-1,
    metavar="BYTES/S",
    help="With --execute: cap the copying of moves between a broker's directories.",
)
@click.option("--preserve-throttles", is_flag=True, help="Leave the throttle configs as they are.")
@click.option(
    "--additional", is_flag=True, help="Execute even though other reassignments are in flight."
)
@click.option(
    "--disable-rack-aware",
    is_flag=True,
    help="Accepted for Kafka's sake: pylog's --generate is rack-unaware anyway.",
)
@click.option(
    "--timeout",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="How long (ms) to wait for the log-directory moves to start.",
)
@click.pass_context
def reassign_partitions(ctx: click.Context, /, **opts: Any) -> None:
    """Move partitions between brokers and replicas between log directories
    (Kafka's kafka-reassign-partitions.sh, with its JSON files)."""
    chosen = [a for a in _ACTIONS if opts[a if a != "list" else "list_"]]
    if len(chosen) != 1:
        raise click.UsageError(
            "Command must include exactly one action: --generate, --execute, --verify, "
            "--cancel, --list"
        )
    action = chosen[0]
    for name in _REQUIRED[action]:
        if opts[name] is None:
            raise click.UsageError(f'Missing required argument "{_OPTION_NAMES[name][2:]}"')
    for name, flag in _OPTION_NAMES.items():
        given = ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        if given and name not in _REQUIRED[action] and name not in _PERMITTED[action]:
            raise click.UsageError(f'Option "{flag}" can\'t be used with action "--{action}"')
    for name in ("throttle", "replica_alter_log_dirs_throttle"):
        if opts[name] != -1 and opts[name] < 1:
            raise click.BadParameter(
                "must be a positive number of bytes/s", param_hint=_OPTION_NAMES[name]
            )

    with (
        admin_client(
            opts["bootstrap_server"],
            opts["request_timeout_ms"],
            client_id="reassign-partitions-tool",
            command_config=opts["command_config"],
        ) as admin,
        client_errors(),
    ):
        if action == "generate":
            _generate(admin, _read(opts["topics_to_move_json_file"]), opts["broker_list"])
        elif action == "list":
            _list(admin)
        else:
            plan = parse_plan(_read(opts["reassignment_json_file"]))
            if action == "execute":
                _execute(admin, plan, opts)
            elif action == "verify":
                _verify(admin, plan, opts["preserve_throttles"])
            else:
                _cancel(admin, plan, opts["preserve_throttles"], opts["timeout"])


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise CommandError(f"cannot read {path}: {e}") from None


def _generate(admin: ClusterClient, topics_json: str, broker_list: str) -> None:
    brokers = parse_id_list(broker_list, "--broker-list")
    dupes = sorted(b for b, n in Counter(brokers).items() if n > 1)
    if dupes:
        raise CommandError(
            f"Broker list contains duplicate entries: {', '.join(str(b) for b in dupes)}"
        )
    topics = parse_topics_to_move(topics_json)
    dupe_topics = sorted(t for t, n in Counter(topics).items() if n > 1)
    if dupe_topics:
        raise CommandError(
            f"List of topics to reassign contains duplicate entries: {', '.join(dupe_topics)}"
        )
    found = current_assignment(admin, topics)
    missing = [t for t, parts in found.items() if parts is None]
    if missing:
        raise CommandError(f"UnknownTopicOrPartitionException: Topic {missing[0]} not found.")
    cluster = admin.metadata([])
    # Brokers not in the cluster are left out, as Kafka's tool leaves them out.
    usable = [b for b in brokers if b in cluster.brokers]
    current: dict[TopicPartition, list[int]] = {}
    proposed: dict[TopicPartition, list[int]] = {}
    for topic, parts in found.items():
        assert parts is not None
        current.update(((topic, p), r) for p, r in parts.items())
        rf = len(parts[min(parts)]) if parts else 0
        for p, replicas in assign_replicas(usable, len(parts), rf).items():
            proposed[(topic, p)] = replicas
    click.echo(f"Current partition replica assignment\n{format_plan(current, {})}\n")
    click.echo(f"Proposed partition reassignment configuration\n{format_plan(proposed, {})}")
    if any(cluster.racks.get(b) for b in usable):
        click.echo(
            "Note: the brokers have racks (broker.rack); pylog's --generate does not place "
            "replicas by rack. Check the proposal, or write the plan by hand.",
            err=True,
        )


def _list(admin: ClusterClient) -> None:
    ongoing = list_reassignments(admin)
    if not ongoing:
        click.echo("No partition reassignments found.")
        return
    click.echo("Current partition reassignments:")
    for tp, o in sorted(ongoing.items()):
        line = f"{tp_name(tp)}: replicas: {','.join(map(str, o.replicas))}."
        if o.adding:
            line += f" adding: {','.join(map(str, o.adding))}."
        if o.removing:
            line += f" removing: {','.join(map(str, o.removing))}."
        click.echo(line)


def _execute(admin: ClusterClient, plan: Plan, opts: Mapping[str, Any]) -> None:
    check_plan_for_execute(plan)
    targets = plan.targets
    ongoing = list_reassignments(admin)
    if ongoing and not opts["additional"]:
        raise CommandError(EXISTING_REASSIGNMENT)
    live = live_brokers(admin)
    named = sorted({b for rs in targets.values() for b in rs})
    unknown = [b for b in named if b not in live]
    if unknown:
        raise CommandError(f"AdminCommandFailedException: Unknown broker id {unknown[0]}")
    existing = current_assignment(admin, {t for t, _ in targets})
    current: dict[TopicPartition, list[int]] = {}
    missing: list[TopicPartition] = []
    for tp in targets:
        parts = existing[tp[0]]
        if parts is None or tp[1] not in parts:
            missing.append(tp)
        else:
            current[tp] = parts[tp[1]]
    if missing:
        raise CommandError(
            "UnknownTopicOrPartitionException: Unable to find partition: "
            + ", ".join(tp_name(tp) for tp in sorted(missing))
        )
    _check_log_dirs(admin, plan.log_dirs)

    throttle, dir_throttle = opts["throttle"], opts["replica_alter_log_dirs_throttle"]
    changes: dict[tuple[int, str], dict[str, str | None]] = {}
    if throttle >= 0:
        changes = throttle_configs(proposed_moves(ongoing, targets, current), throttle)
    if dir_throttle >= 0:
        for b in sorted({r[2] for r in plan.log_dirs}):
            changes.setdefault((CONFIG_RESOURCE_BROKER, str(b)), {})[LOG_DIRS_RATE] = str(
                dir_throttle
            )
    # The brokers check every throttle config before any is set.
    alter_configs(admin, changes, validate_only=True)

    click.echo(
        f"Current partition replica assignment\n\n{format_plan(current, {})}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback"
    )
    if throttle >= 0 or dir_throttle >= 0:
        click.echo(VERIFY_PERIODICALLY)
        alter_configs(admin, changes)
        if throttle >= 0:
            click.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
        if dir_throttle >= 0:
            click.echo(f"The replica-alter-dir throttle limit was set to {dir_throttle} B/s")

    failed = alter_reassignments(admin, targets)
    if failed:
        raise CommandError(
            "Error reassigning partition(s):\n"
            + "\n".join(f"{tp_name(tp)}: {failed[tp]}" for tp in sorted(failed))
        )
    click.echo(
        f"Successfully started partition {_plural(len(targets), 'reassignment')} for "
        + ",".join(tp_name(tp) for tp in sorted(targets))
    )
    if plan.log_dirs:
        execute_moves(admin, plan.log_dirs, opts["timeout"])


def _check_log_dirs(admin: ClusterClient, wanted: Mapping[Replica, str]) -> None:
    """Every directory a plan names must be one of its broker's ``log.dirs``
    and online (the broker would answer LOG_DIR_NOT_FOUND or
    KAFKA_STORAGE_ERROR only after the reassignment had started)."""
    for broker in sorted({r[2] for r in wanted}):
        dirs = describe_log_dirs(admin, broker, {})
        for replica, path in sorted(wanted.items()):
            if replica[2] != broker:
                continue
            if path not in dirs:
                raise CommandError(
                    f"Failed to alter dir for {replica_name(replica)}: LogDirNotFoundException: "
                    f"the log directory {path} is not in broker {broker}'s log.dirs "
                    f"({', '.join(sorted(dirs))})"
                )
            if dirs[path].error_code:
                raise CommandError(
                    f"Failed to alter dir for {replica_name(replica)}: "
                    f"{error_for_code(dirs[path].error_code)} ({path} is offline)"
                )


def _partition_states(
    admin: ClusterClient, plan: Plan
) -> tuple[dict[TopicPartition, tuple[bool, list[int], list[int]]], bool]:
    """Per partition of the plan (done, current replicas, target replicas),
    and whether any reassignment at all is in flight in the cluster."""
    ongoing = list_reassignments(admin)
    existing = current_assignment(admin, {tp[0] for tp, _ in plan.partitions if tp not in ongoing})
    states: dict[TopicPartition, tuple[bool, list[int], list[int]]] = {}
    for tp, target in plan.partitions:
        if tp in ongoing:
            states[tp] = (False, ongoing[tp].replicas, target)
        else:
            parts = existing.get(tp[0])
            states[tp] = (True, list((parts or {}).get(tp[1], [])), target)
    return states, bool(ongoing)


def _move_states(admin: ClusterClient, plan: Plan) -> tuple[list[str], bool]:
    """Kafka's lines for the plan's directory moves, and whether any is still
    copying."""
    where = replica_dirs(admin, plan.log_dirs)
    lines: list[str] = []
    active = False
    for replica in sorted(plan.log_dirs, key=lambda r: (r[2], r[0], r[1])):
        target = plan.log_dirs[replica]
        t, p, b = replica
        if replica not in where:
            lines.append(
                f"Partition {t}-{p} cannot be found in any live log directory on broker {b}."
            )
            active = True
            continue
        current, future = where[replica]
        if current is None:
            lines.append(
                f"Partition {t}-{p} is not found in any live log dir on broker {b}. There is "
                "likely an offline log directory on the broker."
            )
            active = True
        elif future is None:
            if current == target:
                lines.append(
                    f"Reassignment of replica {replica_name(replica)} completed successfully."
                )
            else:
                lines.append(
                    f"Partition {t}-{p} on broker {b} is not being moved from log dir {current} "
                    f"to {target}."
                )
        else:
            active = True
            if future == target:
                lines.append(
                    f"Reassignment of replica {replica_name(replica)} is still in progress."
                )
            else:
                lines.append(
                    f"Partition {t}-{p} on broker {b} is being moved to log dir {future} instead "
                    f"of {target}."
                )
    return lines, active


def _verify(admin: ClusterClient, plan: Plan, preserve_throttles: bool) -> None:
    states, any_ongoing = _partition_states(admin, plan)
    click.echo("Status of partition reassignment:")
    for tp, (done, current, target) in sorted(states.items()):
        if not done:
            click.echo(f"Reassignment of partition {tp_name(tp)} is still in progress.")
        elif current == target:
            click.echo(f"Reassignment of partition {tp_name(tp)} is completed.")
        else:
            click.echo(
                f"There is no active reassignment of partition {tp_name(tp)}, but replica set "
                f"is {','.join(map(str, current))} rather than {','.join(map(str, target))}."
            )
    moves_active = False
    if plan.log_dirs:
        lines, moves_active = _move_states(admin, plan)
        for line in lines:
            click.echo(line)
    if not any_ongoing and not moves_active and not preserve_throttles:
        clear_throttles(admin, plan)


def _cancel(admin: ClusterClient, plan: Plan, preserve_throttles: bool, timeout_ms: int) -> None:
    targets = [tp for tp, _ in plan.partitions]
    in_flight = sorted(list_reassignments(admin, targets))
    if in_flight:
        failed = alter_reassignments(admin, dict.fromkeys(in_flight))
        if failed:
            raise CommandError(
                f"Error cancelling partition {_plural(len(failed), 'reassignment')} for:\n"
                + "\n".join(f"{tp_name(tp)}: {failed[tp]}" for tp in sorted(failed))
            )
        click.echo(
            f"Successfully cancelled partition {_plural(len(in_flight), 'reassignment')} for: "
            + ",".join(tp_name(tp) for tp in in_flight)
        )
    else:
        click.echo("None of the specified partition reassignments are active.")
    # A directory move is cancelled by asking for the directory it is in.
    where = replica_dirs(admin, plan.log_dirs) if plan.log_dirs else {}
    back = {r: cur for r, (cur, fut) in where.items() if cur is not None and fut is not None}
    if back:
        execute_moves(admin, back, timeout_ms)
    else:
        click.echo("None of the specified partition moves are active.")
    if not preserve_throttles:
        clear_throttles(admin, plan)
