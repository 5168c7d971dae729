"""``pylog produce`` and ``pylog consume``: a console producer (stdin lines to
records) and a console consumer (records to stdout lines), like Kafka's.

Line format for ``produce`` (each part optional, off by default)::

    [HEADERS<headers.delimiter>][KEY<key.separator>]VALUE

with HEADERS written ``k1:v1,k2:v2``. ``consume`` prints, each when asked for
and in this order, the timestamp, partition, offset, headers, key, then the
value, joined by the key separator. Switches can be given as flags
(``--parse-key --key-separator :``) or as Kafka's properties
(``--property parse.key=true --property key.separator=:``).

Bytes go through unchanged: stdin is read and stdout written in binary.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Any

import click

from pylog.cli.common import (
    DEFAULT_TIMEOUT_MS,
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    client_properties,
    describe_exception,
    parse_properties_option,
    unescape,
)
from pylog.cli.consumer import Consumer, ConsumerSettings, GroupMember, RebalanceNeeded
from pylog.cli.producer import COMPRESSION_CODECS, Producer, ProducerSettings
from pylog.errors import KafkaError

TRUE_WORDS = ("true", "yes", "1")


def _flag(props: dict[str, str], key: str, flag: bool) -> bool:
    return flag or props.get(key, "false").strip().lower() in TRUE_WORDS


def _text(props: dict[str, str], key: str, given: str | None, default: str) -> str:
    if given is not None:
        return unescape(given)
    return unescape(props[key]) if key in props else default


# ---------------------------------------------------------------- produce


@dataclass(frozen=True)
class LineFormat:
    """How ``produce`` splits an input line into headers, key and value."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False


class BadLine(ValueError):
    pass


def parse_line(
    line: bytes, fmt: LineFormat
) -> tuple[list[tuple[str, bytes | None]], bytes | None, bytes | None]:
    """(headers, key, value) from one input line (without its line ending)."""
    rest = line
    headers: list[tuple[str, bytes | None]] = []
    if fmt.parse_headers:
        head, sep, rest = rest.partition(fmt.headers_delimiter)
        if not sep:
            if not fmt.ignore_error:
                raise BadLine("no headers delimiter")
            head, rest = b"", head
        for item in head.split(fmt.headers_separator) if head else []:
            name, ksep, raw_value = item.partition(fmt.headers_key_separator)
            header_value: bytes | None = raw_value if ksep else None
            if header_value is not None and header_value == fmt.null_marker:
                header_value = None
            headers.append((name.decode("utf-8", errors="replace"), header_value))
    key: bytes | None = None
    if fmt.parse_key:
        key_part, sep, value_part = rest.partition(fmt.key_separator)
        if not sep:
            if not fmt.ignore_error:
                raise BadLine("no key separator")
            key_part, value_part = b"", key_part
        key, rest = key_part, value_part
    value: bytes | None = rest
    if fmt.null_marker is not None:
        if key == fmt.null_marker:
            key = None
        if value == fmt.null_marker:
            value = None
    return headers, key, value


def _lines(stream: IO[bytes], producer: Producer | None = None) -> Iterator[bytes]:
    """The lines of ``stream`` without their endings. With a producer, batches
    whose linger time ran out are sent while the input has no next line yet."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if producer is None or fd < 0:
        for raw in stream:
            yield raw.rstrip(b"\n").removesuffix(b"\r")
        return
    pending = b""
    while True:
        newline = pending.find(b"\n")
        if newline >= 0:
            line, pending = pending[:newline], pending[newline + 1 :]
            yield line.removesuffix(b"\r")
            continue
        left = producer.linger_left()
        if left is not None and not select.select([fd], [], [], left)[0]:
            producer.flush()
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if pending:
                yield pending.removesuffix(b"\r")
            return
        pending += chunk


@click.command("produce")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to write to.")
@click.option("--partition", type=click.IntRange(min=0), help="Write every record here.")
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Line-reader settings in Kafka's names: parse.key, key.separator, parse.headers, "
    "headers.delimiter, headers.separator, headers.key.separator, null.marker, ignore.error.",
)
@click.option("--parse-key", is_flag=True, help="Each line starts with a key.")
@click.option("--key-separator", help="Between key and value (default: tab).")
@click.option("--parse-headers", is_flag=True, help="Each line starts with headers k:v,k:v.")
@click.option("--headers-delimiter", help="Between the headers and the rest (default: tab).")
@click.option("--headers-separator", help="Between headers (default: ',').")
@click.option("--headers-key-separator", help="Between a header's key and value (default: ':').")
@click.option("--null-marker", help="A key, value or header value equal to this is sent as null.")
@click.option(
    "--acks",
    type=click.Choice(["all", "-1", "0", "1"]),
    default="all",
    show_default=True,
)
@click.option(
    "--compression-type",
    type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
    default="none",
    show_default=True,
)
@click.option("--linger-ms", type=click.IntRange(min=0), default=5, show_default=True)
@click.option("--sync", is_flag=True, help="Wait for each record to be acknowledged.")
@click.option(
    "--producer-property",
    "producer_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Another producer setting in Kafka's names: batch.size, linger.ms, acks, "
    "compression.type, request.timeout.ms, delivery.timeout.ms, max.block.ms, client.id.",
)
@click.option(
    "--input",
    "input_file",
    type=click.File("rb"),
    default="-",
    help="Read lines from this file instead of stdin.",
)
def produce(
    bootstrap_server: str,
    topic: str,
    partition: int | None,
    properties: tuple[str, ...],
    parse_key: bool,
    key_separator: str | None,
    parse_headers: bool,
    headers_delimiter: str | None,
    headers_separator: str | None,
    headers_key_separator: str | None,
    null_marker: str | None,
    acks: str,
    compression_type: str,
    linger_ms: int,
    sync: bool,
    producer_properties: tuple[str, ...],
    input_file: IO[bytes],
) -> None:
    """Send each line read from stdin to TOPIC as one record."""
    props = parse_properties_option(properties, "--property")
    marker = null_marker if null_marker is not None else props.get("null.marker")
    fmt = LineFormat(
        parse_key=_flag(props, "parse.key", parse_key),
        key_separator=_text(props, "key.separator", key_separator, "\t").encode(),
        parse_headers=_flag(props, "parse.headers", parse_headers),
        headers_delimiter=_text(props, "headers.delimiter", headers_delimiter, "\t").encode(),
        headers_separator=_text(props, "headers.separator", headers_separator, ",").encode(),
        headers_key_separator=_text(
            props, "headers.key.separator", headers_key_separator, ":"
        ).encode(),
        null_marker=None if marker is None else unescape(marker).encode(),
        ignore_error=_flag(props, "ignore.error", False),
    )
    settings = ProducerSettings(
        acks=-1 if acks in ("all", "-1") else int(acks),
        compression=COMPRESSION_CODECS[compression_type],
        linger_ms=linger_ms,
    )
    given = client_properties(
        parse_properties_option(producer_properties, "--producer-property"),
        PRODUCER_PROPERTIES,
        "--producer-property",
    )
    client_id = given.pop("client_id", "pylog-console-producer")
    timeout_ms = given.get("request_timeout_ms", DEFAULT_TIMEOUT_MS)
    if "acks" in given:
        given["acks"] = _acks(given["acks"])
    if "compression" in given:
        given["compression"] = _compression(given["compression"])
    settings = replace(settings, **given)

    with admin_client(bootstrap_server, timeout_ms, client_id) as client, client_errors():
        producer = Producer(client, topic, settings)
        if partition is not None and partition >= producer.partition_count:
            raise CommandError(
                f"topic {topic} has no partition {partition} (it has {producer.partition_count})"
            )
        for line_no, line in enumerate(_lines(input_file, producer), start=1):
            try:
                headers, key, value = parse_line(line, fmt)
            except BadLine as e:
                producer.flush()
                raise CommandError(
                    f"line {line_no}: {e} in {line.decode('utf-8', 'replace')!r}"
                ) from None
            producer.send(key, value, headers, partition=partition, tag=line_no)
            if sync:
                producer.flush()
            else:
                producer.flush_due()
            if producer.failures:
                break
        producer.flush()
    failures = [f"line {n}: {describe_exception(e)}" for n, e in producer.failures]
    if failures:
        raise CommandError(f"{len(failures)} record(s) not sent; first: {failures[0]}")


#: The producer's Kafka settings this client has: key -> (ProducerSettings field, type).
PRODUCER_PROPERTIES: dict[str, tuple[str, type]] = {
    "acks": ("acks", str),
    "compression.type": ("compression", str),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "max.block.ms": ("max_block_ms", int),
    "client.id": ("client_id", str),
}


def _acks(text: str) -> int:
    if text not in ("all", "-1", "0", "1"):
        raise click.BadParameter(
            f"acks={text!r}: all, -1, 0 or 1", param_hint="--producer-property"
        )
    return -1 if text == "all" else int(text)


def _compression(text: str) -> int:
    if text not in COMPRESSION_CODECS:
        raise click.BadParameter(
            f"compression.type={text!r}: one of {', '.join(COMPRESSION_CODECS)}",
            param_hint="--producer-property",
        )
    return COMPRESSION_CODECS[text]


# ---------------------------------------------------------------- consume


@dataclass(frozen=True)
class RecordFormat:
    """What ``consume`` prints for each record."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_literal: bytes = b"null"


TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def format_record(record: Any, fmt: RecordFormat) -> bytes:
    def data(b: bytes | None) -> bytes:
        return fmt.null_literal if b is None else b

    parts: list[bytes] = []
    if fmt.print_timestamp:
        kind = TIMESTAMP_TYPES.get(record.timestamp_type, "NoTimestampType")
        parts.append(f"{kind}:{record.timestamp}".encode())
    if fmt.print_partition:
        parts.append(f"Partition:{record.partition}".encode())
    if fmt.print_offset:
        parts.append(f"Offset:{record.offset}".encode())
    if fmt.print_headers:
        headers = record.headers or []
        parts.append(
            fmt.headers_separator.join(
                k.encode() + fmt.headers_key_separator + data(v) for k, v in headers
            )
            if headers
            else b"NO_HEADERS"
        )
    if fmt.print_key:
        parts.append(data(record.key))
    if fmt.print_value:
        parts.append(data(record.value))
    return fmt.key_separator.join(parts) + fmt.line_separator


def _start_offset(value: str) -> str | int:
    if value in ("earliest", "latest"):
        return value
    try:
        offset = int(value)
    except ValueError:
        raise click.BadParameter(
            "earliest, latest or a non-negative offset", param_hint="--offset"
        ) from None
    if offset < 0:
        raise click.BadParameter("an offset is not negative", param_hint="--offset")
    return offset


@click.command("consume")
@bootstrap_option
@click.option("--topic", required=True, help="The topic to read.")
@click.option("--partition", type=click.IntRange(min=0), help="Read only this partition.")
@click.option(
    "--offset",
    "start",
    default=None,
    help="Where to start in --partition: earliest, latest (default) or an offset.",
)
@click.option("--from-beginning", is_flag=True, help="Start at the earliest record.")
@click.option("--max-messages", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    help="Exit when no record arrives for this long.",
)
@click.option(
    "--group",
    help="Join this consumer group (offsets committed); without it partitions are "
    "assigned directly and nothing is committed.",
)
@click.option(
    "--property",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Formatter settings in Kafka's names: print.key, print.value, print.headers, "
    "print.timestamp, print.partition, print.offset, key.separator, line.separator, "
    "headers.separator, headers.key.separator, null.literal.",
)
@click.option("--print-key", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-partition", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--key-separator", help="Between the printed fields (default: tab).")
@click.option("--line-separator", help="After each record (default: newline).")
@click.option(
    "--consumer-property",
    "consumer_properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="Another consumer setting in Kafka's names (e.g. fetch.max.wait.ms=100): "
    "auto.offset.reset, fetch.min.bytes, fetch.max.bytes, max.partition.fetch.bytes, "
    "isolation.level, enable.auto.commit, auto.commit.interval.ms, session.timeout.ms, "
    "max.poll.interval.ms, heartbeat.interval.ms, request.timeout.ms, client.id.",
)
def consume(
    bootstrap_server: str,
    topic: str,
    partition: int | None,
    start: str | None,
    from_beginning: bool,
    max_messages: int | None,
    timeout_ms: int | None,
    group: str | None,
    properties: tuple[str, ...],
    print_key: bool,
    print_headers: bool,
    print_timestamp: bool,
    print_partition: bool,
    print_offset: bool,
    key_separator: str | None,
    line_separator: str | None,
    consumer_properties: tuple[str, ...],
) -> None:
    """Print the records of TOPIC to stdout, one per line."""
    props = parse_properties_option(properties, "--property")
    fmt = RecordFormat(
        print_timestamp=_flag(props, "print.timestamp", print_timestamp),
        print_partition=_flag(props, "print.partition", print_partition),
        print_offset=_flag(props, "print.offset", print_offset),
        print_headers=_flag(props, "print.headers", print_headers),
        print_key=_flag(props, "print.key", print_key),
        print_value=props.get("print.value", "true").strip().lower() in TRUE_WORDS,
        key_separator=_text(props, "key.separator", key_separator, "\t").encode(),
        line_separator=_text(props, "line.separator", line_separator, "\n").encode(),
        headers_separator=_text(props, "headers.separator", None, ",").encode(),
        headers_key_separator=_text(props, "headers.key.separator", None, ":").encode(),
        null_literal=_text(props, "null.literal", None, "null").encode(),
    )
    offset = _start_offset(start) if start is not None else None
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("give --offset or --from-beginning, not both")
    if group is not None and partition is not None:
        raise click.UsageError("--group and --partition don't go together")
    begin: str | int = (
        "earliest" if from_beginning else (offset if offset is not None else "latest")
    )

    settings = ConsumerSettings(
        auto_offset_reset="earliest" if begin == "earliest" else "latest",
        enable_auto_commit=group is not None,
    )
    given = client_properties(
        parse_properties_option(consumer_properties, "--consumer-property"),
        CONSUMER_PROPERTIES,
        "--consumer-property",
    )
    client_id = given.pop("client_id", "pylog-console-consumer")
    timeout = given.pop("request_timeout_ms", DEFAULT_TIMEOUT_MS)
    if "isolation_level" in given:
        given["isolation_level"] = 1 if given["isolation_level"] == "read_committed" else 0
    settings = replace(settings, **given)
    out = sys.stdout.buffer
    count = 0
    with admin_client(bootstrap_server, timeout, client_id) as client, client_errors():
        partitions = client.partitions(topic)
        if not partitions:
            raise CommandError(f"topic '{topic}' does not exist")
        if partition is not None and partition not in partitions:
            raise CommandError(
                f"topic {topic} has no partition {partition} (it has {len(partitions)})"
            )
        consumer = Consumer(client, settings)
        member = None
        if group is not None:
            member = GroupMember(client, group, [topic], settings)
        else:
            chosen = [partition] if partition is not None else sorted(partitions)
            consumer.assign({(topic, p): begin for p in chosen})
        try:
            count = _consume_loop(consumer, member, out, fmt, max_messages, timeout_ms)
        except KeyboardInterrupt:
            pass
        finally:
            if member is not None:
                try:
                    if settings.enable_auto_commit:
                        member.commit(_uncommitted(consumer))
                except (RebalanceNeeded, KafkaError, OSError):
                    pass  # a rebalance took the partitions: their new owner goes on
                finally:
                    member.leave()
    click.echo(f"Processed a total of {count} messages", err=True)


#: The consumer's Kafka settings this client has: key -> (ConsumerSettings field, type).
CONSUMER_PROPERTIES: dict[str, tuple[str, type]] = {
    "auto.offset.reset": ("auto_offset_reset", str),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", int),
    "fetch.min.bytes": ("fetch_min_bytes", int),
    "fetch.max.bytes": ("fetch_max_bytes", int),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", int),
    "isolation.level": ("isolation_level", str),
    "enable.auto.commit": ("enable_auto_commit", bool),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", int),
    "session.timeout.ms": ("session_timeout_ms", int),
    "max.poll.interval.ms": ("rebalance_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "client.id": ("client_id", str),
}


def _uncommitted(consumer: Consumer) -> dict[tuple[str, int], int]:
    """The consumed positions not committed yet."""
    return {tp: o for tp, o in consumer.consumed.items() if consumer.committed_at.get(tp) != o}


def _join(member: GroupMember, consumer: Consumer) -> None:
    """Join the group and read the assigned partitions from the committed
    offsets (auto.offset.reset where there are none)."""
    assigned = member.join()
    committed = member.client.committed(member.group)
    reset = consumer.settings.auto_offset_reset
    consumer.assign({tp: committed.get(tp, reset) for tp in assigned})
    consumer.committed_at = {tp: committed[tp] for tp in assigned if tp in committed}


def _consume_loop(
    consumer: Consumer,
    member: GroupMember | None,
    out: IO[bytes],
    fmt: RecordFormat,
    max_messages: int | None,
    timeout_ms: int | None,
) -> int:
    count = 0
    last_record = time.monotonic()
    interval = consumer.settings.auto_commit_interval_ms / 1000
    next_commit = time.monotonic() + interval
    if member is not None:
        _join(member, consumer)
    while max_messages is None or count < max_messages:
        if member is not None:
            try:
                member.heartbeat_if_due()
                if consumer.settings.enable_auto_commit and time.monotonic() >= next_commit:
                    member.commit(_uncommitted(consumer))
                    consumer.committed_at.update(consumer.consumed)
                    next_commit = (
                        time.monotonic() + consumer.settings.auto_commit_interval_ms / 1000
                    )
            except RebalanceNeeded:
                if consumer.settings.enable_auto_commit:
                    # what was read so far, before the partitions may move
                    with contextlib.suppress(RebalanceNeeded, KafkaError):
                        member.commit(_uncommitted(consumer))
                _join(member, consumer)
        wait = 1000 if timeout_ms is None else max(1, min(1000, timeout_ms))
        remaining = None if max_messages is None else max_messages - count
        records = consumer.poll(remaining, wait)
        if not consumer.positions:
            time.sleep(wait / 1000)  # nothing assigned (more members than partitions)
        for record in records:
            out.write(format_record(record, fmt))
            count += 1
        if records:
            out.flush()
            last_record = time.monotonic()
        elif timeout_ms is not None and (time.monotonic() - last_record) * 1000 >= timeout_ms:
            break
    return count
