"""The parts of ``pylog reassign-partitions`` and ``pylog configs`` that need
no cluster: Kafka's reassignment JSON read and written, the --generate
placement, the throttle configs --execute sets, quota values printed as
Kafka's tool prints them."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pylog.cli.common import CommandError
from pylog.cli.configs import java_double
from pylog.cli.reassign_partitions import (
    CONFIG_RESOURCE_BROKER,
    CONFIG_RESOURCE_TOPIC,
    Ongoing,
    assign_replicas,
    check_plan_for_execute,
    format_plan,
    parse_plan,
    parse_topics_to_move,
    proposed_moves,
    throttle_configs,
)


def test_plan_round_trip_with_log_dirs() -> None:
    text = json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["/d2", "any"]},
        {"topic": "t", "partition": 0, "replicas": [1, 2]},
    ]})  # fmt: skip
    plan = parse_plan(text)
    assert plan.partitions == [(("t", 1), [3, 1]), (("t", 0), [1, 2])]
    assert plan.log_dirs == {("t", 1, 3): "/d2"}
    assert json.loads(format_plan(plan.targets, plan.log_dirs)) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["/d2", "any"]},
    ]}  # fmt: skip
    assert parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "The input string is not a valid JSON"),
        ("[]", "not an object"),
        ('{"version":2}', "Not supported version field value 2"),
        ('{"partitions":[{"partition":0,"replicas":[1]}]}', "no such field `topic`"),
        ('{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}', "not a int"),
        ('{"partitions":[{"topic":"t","partition":0,"replicas":["1"]}]}', "must be broker ids"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}',
            "Size of replicas list [1, 2] is different from size of log dirs list [any]",
        ),
    ],
)
def test_bad_plans(text: str, message: str) -> None:
    with pytest.raises(CommandError) as e:
        parse_plan(text)
    assert message in e.value.message


@pytest.mark.parametrize(
    ("partitions", "message"),
    [
        ([], "Partition reassignment list cannot be empty"),
        (
            [{"topic": "t", "partition": 0, "replicas": []}],
            "Partition replica list cannot be empty",
        ),
        (
            [{"topic": "t", "partition": 0, "replicas": [1]}] * 2,
            "Partition reassignment contains duplicate topic partitions: t-0",
        ),
        (
            [{"topic": "t", "partition": 0, "replicas": [1, 2, 1]}],
            "Partition replica lists may not contain duplicate entries: t-0 contains multiple "
            "entries for 1",
        ),
    ],
)
def test_plans_execute_refuses(partitions: list[object], message: str) -> None:
    plan = parse_plan(json.dumps({"version": 1, "partitions": partitions}))
    with pytest.raises(CommandError) as e:
        check_plan_for_execute(plan)
    assert e.value.message == message


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf"), [(4, 8, 3), (3, 6, 3), (5, 10, 2), (1, 3, 1)]
)
def test_generated_assignment_is_balanced(brokers: int, partitions: int, rf: int) -> None:
    ids = [10 + i for i in range(brokers)]
    for _ in range(20):  # a random start each time
        got = assign_replicas(ids, partitions, rf)
        assert sorted(got) == list(range(partitions))
        assert all(len(set(r)) == rf and set(r) <= set(ids) for r in got.values())
        leaders = Counter(r[0] for r in got.values())
        replicas = Counter(b for r in got.values() for b in r)
        assert set(leaders.values()) == {partitions // brokers}
        assert set(replicas.values()) == {partitions * rf // brokers}


def test_generate_needs_enough_brokers() -> None:
    with pytest.raises(CommandError) as e:
        assign_replicas([1, 2], 3, 3)
    assert e.value.message == "Replication factor: 3 larger than available brokers: 2."


def test_throttle_configs_as_kafkas_tool_sets_them() -> None:
    # t-0 moves from 1,2 to 3,4; t-1 is already moving 5 in beside 1 (its
    # sources stay those of the move in flight).
    ongoing = {("t", 1): Ongoing([1, 5], [5], [])}
    moves = proposed_moves(ongoing, {("t", 0): [3, 4]}, {("t", 0): [1, 2]})
    changes = throttle_configs(moves, 5000)
    assert changes[(CONFIG_RESOURCE_TOPIC, "t")] == {
        "leader.replication.throttled.replicas": "0:1,0:2,1:1",
        "follower.replication.throttled.replicas": "0:3,0:4,1:5",
    }
    brokers = {name for kind, name in changes if kind == CONFIG_RESOURCE_BROKER}
    assert brokers == {"1", "2", "3", "4", "5"}
    assert changes[(CONFIG_RESOURCE_BROKER, "3")] == {
        "leader.replication.throttled.rate": "5000",
        "follower.replication.throttled.rate": "5000",
    }


def test_quota_values_print_as_java_doubles() -> None:
    assert [java_double(v) for v in (1024, 0.5, 1e7, 12345678, 2.5e10, 1e-4, 0)] == [
        "1024.0", "0.5", "1.0E7", "1.2345678E7", "2.5E10", "1.0E-4", "0.0",
    ]  # fmt: skip
