"""The client commands (`pylog topics`, `produce`, `consume`, `configs
describe|alter`) run as subprocesses against a real broker, speaking the Kafka
protocol as they would to any cluster."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from pylog.cli.common import parse_key_values
from pylog.cli.console import LineFormat, parse_line
from pylog.testing import EmbeddedBroker, broker


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedBroker]:
    with broker(num_partitions=2) as b:
        yield b


def pylog(
    b: EmbeddedBroker, *args: str, input: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "pylog.cli", *args, "--bootstrap-server", b.bootstrap_servers],
        input=input,
        capture_output=True,
        timeout=60,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def failed(result: subprocess.CompletedProcess[bytes]) -> str:
    """The error line of a command that must fail (exit 1, no traceback)."""
    err = result.stderr.decode()
    assert result.returncode == 1, (result.returncode, result.stdout, err)
    assert "Traceback" not in err
    assert err.startswith("Error: ")
    return err


def test_topics_create_list_describe_alter_delete(cluster: EmbeddedBroker) -> None:
    out = ok(
        pylog(
            cluster, "topics", "create", "--topic", "orders", "--partitions", "3",
            "--config", "retention.ms=60000,cleanup.policy=[compact,delete]",
        )
    )  # fmt: skip
    assert out == "Created topic orders.\n"
    ok(pylog(cluster, "topics", "create", "--topic", "plain"))  # the broker's default count
    assert {"orders", "plain"} <= set(ok(pylog(cluster, "topics", "list")).split())

    out = ok(pylog(cluster, "topics", "describe", "--topic", "orders"))
    head, *parts = out.splitlines()
    assert head.startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\t" in head
    assert head.endswith("Configs: cleanup.policy=compact,delete,retention.ms=60000")
    assert parts == [
        f"\tTopic: orders\tPartition: {i}\tLeader: 0\tReplicas: 0\tIsr: 0" for i in range(3)
    ]
    out = ok(pylog(cluster, "topics", "describe", "--topic", "plain"))
    assert "PartitionCount: 2\t" in out and out.rstrip().splitlines()[0].endswith("Configs: ")

    assert "orders now has 5 partitions" in ok(
        pylog(cluster, "topics", "alter", "--topic", "orders", "--partitions", "5")
    )
    assert "PartitionCount: 5" in ok(pylog(cluster, "topics", "describe", "--topic", "orders"))
    err = failed(pylog(cluster, "topics", "alter", "--topic", "orders", "--partitions", "2"))
    assert "InvalidPartitionsError" in err

    err = failed(pylog(cluster, "topics", "create", "--topic", "orders"))
    assert "TopicAlreadyExistsError" in err
    assert "already exists" in ok(
        pylog(cluster, "topics", "create", "--topic", "orders", "--if-not-exists")
    )

    assert ok(pylog(cluster, "topics", "delete", "--topic", "orders", "--topic", "plain")) == (
        "Deleted topic orders.\nDeleted topic plain.\n"
    )
    listed = ok(pylog(cluster, "topics", "list")).split()
    assert "orders" not in listed and "plain" not in listed


def test_unknown_topic_is_a_clear_error(cluster: EmbeddedBroker) -> None:
    for args in (
        ("topics", "describe", "--topic", "ghost"),
        ("topics", "delete", "--topic", "ghost"),
        ("configs", "describe", "--topic", "ghost"),
        ("consume", "--topic", "ghost", "--max-messages", "1"),
    ):
        assert "topic 'ghost' does not exist" in failed(pylog(cluster, *args)), args
    ok(pylog(cluster, "topics", "delete", "--topic", "ghost", "--if-exists"))
    err = failed(pylog(cluster, "topics", "alter", "--topic", "ghost", "--partitions", "3"))
    assert "UnknownTopicOrPartitionError" in err


def test_produce_keys_and_headers_then_consume_from_beginning(cluster: EmbeddedBroker) -> None:
    ok(pylog(cluster, "topics", "create", "--topic", "lines", "--partitions", "2"))
    lines = b"color:red,shape:round\tk1:apple\nsize:big\tk2:melon\n\tk3:no headers\n"
    ok(
        pylog(
            cluster, "produce", "--topic", "lines", "--partition", "1", "--parse-headers",
            "--property", "parse.key=true", "--property", "key.separator=:",
            input=lines,
        )
    )  # fmt: skip
    out = ok(
        pylog(
            cluster, "consume", "--topic", "lines", "--from-beginning", "--max-messages", "3",
            "--property", "print.key=true", "--print-headers", "--print-partition",
            "--print-offset", "--key-separator", "|",
        )
    )  # fmt: skip
    assert out.splitlines() == [
        "Partition:1|Offset:0|color:red,shape:round|k1|apple",
        "Partition:1|Offset:1|size:big|k2|melon",
        "Partition:1|Offset:2|NO_HEADERS|k3|no headers",
    ]

    # values only, default partitioning; read one partition, then from an offset
    ok(pylog(cluster, "produce", "--topic", "lines", "--partition", "0", input=b"a\nb\nc\n"))
    out = ok(
        pylog(cluster, "consume", "--topic", "lines", "--partition", "0", "--from-beginning",
              "--max-messages", "3")
    )  # fmt: skip
    assert out == "a\nb\nc\n"
    out = ok(
        pylog(cluster, "consume", "--topic", "lines", "--partition", "0", "--offset", "2",
              "--max-messages", "1", "--property", "print.timestamp=true")
    )  # fmt: skip
    timestamp, value = out.rstrip("\n").split("\t")
    assert timestamp.startswith("CreateTime:") and value == "c"

    # all partitions; --timeout-ms ends the run when nothing more comes
    result = pylog(
        cluster, "consume", "--topic", "lines", "--from-beginning", "--timeout-ms", "1500"
    )
    assert sorted(ok(result).splitlines()) == sorted(
        ["apple", "melon", "no headers", "a", "b", "c"]
    )
    assert b"Processed a total of 6 messages" in result.stderr


def test_produce_rejects_a_line_without_key_separator(cluster: EmbeddedBroker) -> None:
    ok(pylog(cluster, "topics", "create", "--topic", "strict", "--partitions", "1"))
    err = failed(
        pylog(cluster, "produce", "--topic", "strict", "--parse-key", input=b"k\tv\nnokey\n")
    )
    assert "line 2: no key separator" in err
    err = failed(pylog(cluster, "produce", "--topic", "strict", "--partition", "7", input=b"x\n"))
    assert "no partition 7" in err


def test_configs_describe_alter_round_trip(cluster: EmbeddedBroker) -> None:
    ok(pylog(cluster, "topics", "create", "--topic", "cfg", "--config", "retention.ms=60000"))
    out = ok(pylog(cluster, "configs", "describe", "--topic", "cfg"))
    assert out.splitlines()[0] == "Dynamic configs for topic cfg are:"
    assert (
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000"
        in out
    )

    out = ok(
        pylog(
            cluster, "configs", "alter", "--entity-type", "topics", "--entity-name", "cfg",
            "--add-config", "segment.ms=600000,cleanup.policy=[compact,delete]",
            "--delete-config", "retention.ms",
        )
    )  # fmt: skip
    assert out == "Completed updating config for topic cfg.\n"
    out = ok(pylog(cluster, "configs", "describe", "--topic", "cfg"))
    entries = {line.split()[0] for line in out.splitlines()[1:]}
    assert entries == {"segment.ms=600000", "cleanup.policy=compact,delete"}

    out = ok(pylog(cluster, "configs", "describe", "--topic", "cfg", "--all"))
    assert out.splitlines()[0] == "All configs for topic cfg are:"
    assert "  retention.ms=604800000 " in out  # back to the default
    assert "  segment.bytes=1073741824 " in out

    err = failed(
        pylog(cluster, "configs", "alter", "--topic", "cfg", "--add-config", "segment.ms=soon")
    )
    assert "InvalidConfigurationError" in err and "segment.ms" in err
    out = ok(pylog(cluster, "configs", "describe", "--topic", "cfg"))
    assert "segment.ms=600000 " in out  # unchanged

    out = ok(pylog(cluster, "configs", "describe", "--broker", "0", "--all"))
    assert out.splitlines()[0] == "All configs for broker 0 are:"
    assert "  log.retention.check.interval.ms=" in out


def test_usage_errors_exit_2() -> None:
    for args in (
        ("configs", "alter", "--topic", "x"),  # nothing to change
        ("configs", "describe"),  # no resource
        ("configs", "describe", "--topic", "x", "--broker", "0"),
        ("consume", "--topic", "x", "--offset", "3"),  # --offset needs --partition
    ):
        result = subprocess.run(
            [sys.executable, "-m", "pylog.cli", *args], capture_output=True, timeout=60
        )
        assert result.returncode == 2, (args, result.stderr)


def test_unreachable_cluster() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pylog.cli", "topics", "list",
         "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "1000"],
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert b"bootstrap-server" in result.stderr and b"Traceback" not in result.stderr


def test_line_parsing_and_key_value_lists() -> None:
    fmt = LineFormat(parse_key=True, parse_headers=True, null_marker=b"NULL")
    assert parse_line(b"a:1,b\tNULL\tv\tw", fmt) == ([("a", b"1"), ("b", None)], None, b"v\tw")
    assert parse_line(b"x", LineFormat()) == ([], None, b"x")
    assert parse_key_values(["a=1,b=[x,y]", "c=d=e"], "--config") == {
        "a": "1",
        "b": "x,y",
        "c": "d=e",
    }
