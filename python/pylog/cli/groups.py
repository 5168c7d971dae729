"""``pylog groups``: consumer groups, as Kafka's kafka-consumer-groups.sh shows them.

* ``list`` — group ids (``--state`` filters by state);
* ``describe --group G`` — committed offset, log end offset and lag per
  partition with the member that owns it; ``--members`` the members and their
  assignments; ``--state`` the group's state, protocol and size;
* ``delete --group G`` — an inactive group and its offsets;
* ``reset-offsets --group G`` — new committed offsets from ``--to-earliest``,
  ``--to-latest``, ``--to-datetime``, ``--to-offset`` or ``--shift-by``; the
  plan is printed (``--dry-run``, the default) or committed (``--execute``,
  only while the group has no members, as Kafka requires).

Kafka-protocol clients only (kafka-python), so they work against any cluster.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_list,
    bootstrap_option,
    kafka_errors,
    timeout_option,
)
from pylog.coordinator.records import assigned_partitions

__all__ = ["groups"]

_INACTIVE = ("Empty", "Dead")


@click.group("groups")
def groups() -> None:
    """List, describe, delete consumer groups and reset their offsets."""


def _table(rows: list[list[str]]) -> None:
    if not rows:
        return
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _partitions_of(assignment: Any) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a member assignment as kafka-python
    hands it back: raw bytes, a decoded object, or its dict form."""
    if not assignment:
        return []
    if isinstance(assignment, (bytes, bytearray, memoryview)):
        decoded = assigned_partitions(bytes(assignment)) or []
        return [(t, p) for t, ps in decoded for p in ps]
    if isinstance(assignment, dict):
        out = []
        for tp in assignment.get("assigned_partitions") or []:
            for p in tp.get("partitions") or []:
                out.append((str(tp.get("topic")), int(p)))
        return out
    parts = getattr(assignment, "partitions", None)
    if callable(parts):
        return [(tp.topic, tp.partition) for tp in parts()]
    return []


def _consumer(bootstrap_server: str, request_timeout_ms: int, group: str | None = None) -> Any:
    from kafka import KafkaConsumer  # type: ignore[import-untyped,unused-ignore]

    with kafka_errors():
        return KafkaConsumer(
            bootstrap_servers=bootstrap_list(bootstrap_server),
            client_id="pylog-cli",
            group_id=group,
            enable_auto_commit=False,
            request_timeout_ms=max(request_timeout_ms, 1000),
        )


def _describe(admin: Any, group: str) -> dict[str, Any]:
    with kafka_errors():
        described = admin.describe_groups([group])
    info = described.get(group)
    if info is None:
        raise CommandError(f"no answer for group {group!r}")
    if info.get("error"):
        raise CommandError(f"describing {group!r}: {info['error']}")
    return dict(info)


def _committed(admin: Any, group: str) -> dict[tuple[str, int], int]:
    with kafka_errors():
        found = admin.list_group_offsets({group: None}).get(group, {})
    return {(tp.topic, tp.partition): o.offset for tp, o in found.items() if o.offset >= 0}


@groups.command("list")
@bootstrap_option
@timeout_option
@click.option("--state", "states", multiple=True, help="Only groups in this state; repeatable.")
def list_groups(bootstrap_server: str, request_timeout_ms: int, states: tuple[str, ...]) -> None:
    """Print the group ids, one per line (with their state when --state is given)."""
    admin = admin_client(bootstrap_server, request_timeout_ms)
    try:
        with kafka_errors():
            found = admin.list_groups()
    finally:
        admin.close()
    wanted = {s.lower() for s in states}
    for g in sorted(found, key=lambda g: str(g["group_id"])):
        state = str(g.get("group_state") or "")
        if wanted and state.lower() not in wanted:
            continue
        click.echo(f"{g['group_id']}  {state}" if states else str(g["group_id"]))


@groups.command("describe")
@bootstrap_option
@timeout_option
@click.option("--group", "names", multiple=True, help="Group id; repeatable.")
@click.option("--all-groups", is_flag=True, help="Every group of the cluster.")
@click.option("--members", "show_members", is_flag=True, help="Members and their assignments.")
@click.option("--state", "show_state", is_flag=True, help="State, protocol, member count.")
def describe(
    bootstrap_server: str,
    request_timeout_ms: int,
    names: tuple[str, ...],
    all_groups: bool,
    show_members: bool,
    show_state: bool,
) -> None:
    """Offsets and lag per partition (default), the members, or the state."""
    if bool(names) == all_groups:
        raise click.UsageError("give --group or --all-groups")
    admin = admin_client(bootstrap_server, request_timeout_ms)
    consumer = None
    try:
        if all_groups:
            with kafka_errors():
                names = tuple(sorted(str(g["group_id"]) for g in admin.list_groups()))
        for name in names:
            info = _describe(admin, name)
            members = info.get("members") or []
            if info.get("group_state") == "Dead" and not _committed(admin, name):
                raise CommandError(f"Consumer group '{name}' does not exist.")
            if show_state:
                _table(
                    [
                        ["GROUP", "STATE", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "#MEMBERS"],
                        [
                            name,
                            str(info.get("group_state", "")),
                            str(info.get("protocol_type", "")),
                            str(info.get("protocol_data", "")),
                            str(len(members)),
                        ],
                    ]
                )
                continue
            if show_members:
                rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
                for m in members:
                    parts = _partitions_of(m.get("member_assignment"))
                    by_topic: dict[str, list[int]] = {}
                    for t, p in parts:
                        by_topic.setdefault(t, []).append(p)
                    text = ",".join(
                        f"{t}({','.join(str(p) for p in sorted(ps))})"
                        for t, ps in sorted(by_topic.items())
                    )
                    rows.append([name, str(m["member_id"]), str(m["client_host"]),
                                 str(m["client_id"]), str(len(parts)), text or "-"])  # fmt: skip
                _table(rows)
                continue
            owners: dict[tuple[str, int], dict[str, Any]] = {}
            for m in members:
                for tp in _partitions_of(m.get("member_assignment")):
                    owners[tp] = m
            committed = _committed(admin, name)
            tps = sorted(set(committed) | set(owners))
            if consumer is None:
                consumer = _consumer(bootstrap_server, request_timeout_ms)
            ends = _end_offsets(consumer, tps)
            rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                     "CONSUMER-ID", "HOST", "CLIENT-ID"]]  # fmt: skip
            for tp in tps:
                cur = committed.get(tp)
                end = ends.get(tp)
                lag = "-" if cur is None or end is None else str(max(end - cur, 0))
                owner = owners.get(tp, {})
                rows.append([name, tp[0], str(tp[1]), "-" if cur is None else str(cur),
                             "-" if end is None else str(end), lag,
                             str(owner.get("member_id", "-")), str(owner.get("client_host", "-")),
                             str(owner.get("client_id", "-"))])  # fmt: skip
            if len(rows) == 1:
                click.echo(f"Consumer group '{name}' has no committed offsets and no members.")
            else:
                _table(rows)
    finally:
        admin.close()
        if consumer is not None:
            consumer.close()


def _end_offsets(consumer: Any, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from kafka import TopicPartition

    if not tps:
        return {}
    with kafka_errors():
        ends = consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
    return {(tp.topic, tp.partition): int(o) for tp, o in ends.items()}


@groups.command("delete")
@bootstrap_option
@timeout_option
@click.option("--group", "names", multiple=True, required=True, help="Group id; repeatable.")
def delete(bootstrap_server: str, request_timeout_ms: int, names: tuple[str, ...]) -> None:
    """Delete inactive groups and their committed offsets."""
    admin = admin_client(bootstrap_server, request_timeout_ms)
    failed = []
    try:
        with kafka_errors():
            results = admin.delete_groups(list(names))
    finally:
        admin.close()
    # kafka-python 3 answers {group: "OK" or the error's class name}.
    items = results.items() if isinstance(results, dict) else results
    for group, err in items:
        name = err if isinstance(err, str) else getattr(err, "__name__", str(err))
        if err is None or name in ("OK", "NoError"):
            click.echo(f"Deleted consumer group '{group}'.")
        else:
            failed.append(f"{group}: {name}")
    if failed:
        raise CommandError("could not delete " + "; ".join(failed))


def _parse_topics(specs: tuple[str, ...], consumer: Any) -> list[tuple[str, int]]:
    out = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        if parts:
            out += [(topic, int(p)) for p in parts.split(",") if p.strip()]
        else:
            with kafka_errors():
                found = consumer.partitions_for_topic(topic)
            if not found:
                raise CommandError(f"topic {topic!r} does not exist")
            out += [(topic, p) for p in sorted(found)]
    return out


@groups.command("reset-offsets")
@bootstrap_option
@timeout_option
@click.option("--group", "name", required=True, help="Group id.")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]",
              help="Topic (optionally with partitions); repeatable.")  # fmt: skip
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("--to-earliest", is_flag=True, help="The log start offset.")
@click.option("--to-latest", is_flag=True, help="The log end offset.")
@click.option("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
              help="The first offset at or after this time (UTC unless zoned).")  # fmt: skip
@click.option("--to-offset", type=int, help="This offset (clamped to the log's range).")
@click.option("--shift-by", type=int, help="The committed offset moved by N (may be negative).")
@click.option("--execute", is_flag=True, help="Commit the new offsets (default: show the plan).")
@click.option("--dry-run", is_flag=True, help="Only show the plan (the default).")
def reset_offsets(
    bootstrap_server: str,
    request_timeout_ms: int,
    name: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_datetime: str | None,
    to_offset: int | None,
    shift_by: int | None,
    execute: bool,
    dry_run: bool,
) -> None:
    """Plan (and with --execute, commit) new offsets for an inactive group."""
    from kafka import OffsetAndMetadata, TopicPartition

    chosen = [to_earliest, to_latest, to_datetime is not None, to_offset is not None,
              shift_by is not None]  # fmt: skip
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by"
        )
    if execute and dry_run:
        raise click.UsageError("--execute and --dry-run don't go together")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic or --all-topics")
    admin = admin_client(bootstrap_server, request_timeout_ms)
    consumer = _consumer(bootstrap_server, request_timeout_ms)
    try:
        info = _describe(admin, name)
        state = str(info.get("group_state", ""))
        if execute and state not in _INACTIVE:
            raise CommandError(
                f"assignments can only be reset if the group '{name}' is inactive, but the "
                f"current state is {state}"
            )
        committed = _committed(admin, name)
        tps = sorted(committed) if all_topics else _parse_topics(topics, consumer)
        ktps = [TopicPartition(t, p) for t, p in tps]
        with kafka_errors():
            starts = consumer.beginning_offsets(ktps) if ktps else {}
            ends = consumer.end_offsets(ktps) if ktps else {}
        plan: dict[tuple[str, int], int] = {}
        for ktp in ktps:
            tp = (ktp.topic, ktp.partition)
            lo, hi = int(starts[ktp]), int(ends[ktp])
            if to_earliest:
                new = lo
            elif to_latest:
                new = hi
            elif to_offset is not None:
                new = to_offset
            elif shift_by is not None:
                new = committed.get(tp, lo) + shift_by
            else:
                new = hi  # filled in below from the timestamps
            plan[tp] = min(max(new, lo), hi)
        if to_datetime is not None:
            ts = _parse_datetime(to_datetime)
            with kafka_errors():
                found = consumer.offsets_for_times(dict.fromkeys(ktps, ts)) if ktps else {}
            for ktp, o in found.items():
                tp = (ktp.topic, ktp.partition)
                plan[tp] = int(o.offset) if o is not None else int(ends[ktp])
        if execute:
            with kafka_errors():
                results = admin.alter_group_offsets(
                    name,
                    {
                        TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                        for (t, p), o in plan.items()
                    },
                )
            bad = [f"{tp.topic}-{tp.partition}: {err.__name__}" for tp, err in results.items()
                   if getattr(err, "errno", 0)]  # fmt: skip
            if bad:
                raise CommandError("commit failed for " + ", ".join(bad))
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[name, t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
        _table(rows)
    finally:
        admin.close()
        consumer.close()


def _parse_datetime(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not YYYY-MM-DDTHH:mm:SS[.sss][zone]", param_hint="--to-datetime"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)
