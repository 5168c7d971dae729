"""``pylog groups``: consumer groups, as Kafka's kafka-consumer-groups.sh shows them.

* ``list`` — group ids (``--state`` filters by state, ``--type`` by type:
  ``classic``, ``consumer`` (KIP-848's) or ``share`` (KIP-932's); either
  shows the column);
* ``describe --group G`` — committed offset, log end offset and lag per
  partition with the member that owns it; ``--members`` the members and their
  assignments (a consumer group's also with their epochs and targets, a
  share group's with their epochs);
  ``--state`` the group's state, protocol (or assignor), size and type;
* ``delete --group G`` — an inactive group and its offsets;
* ``reset-offsets --group G`` — new committed offsets from ``--to-earliest``,
  ``--to-latest``, ``--to-datetime``, ``--to-offset`` or ``--shift-by``; the
  plan is printed (``--dry-run``, the default) or committed (``--execute``,
  only while the group has no members, as Kafka requires).

Kafka-protocol clients only (pylog's own, :mod:`pylog.cli.client`), so they work
against any cluster.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from pylog.cli.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClusterClient, error_name
from pylog.cli.common import (
    CommandError,
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    error_for_code,
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


def _partitions_of(assignment: bytes | None) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of a member's ConsumerProtocolAssignment."""
    if not assignment:
        return []
    decoded = assigned_partitions(bytes(assignment)) or []
    return [(t, p) for t, ps in decoded for p in ps]


def _member_partitions(member: dict[str, Any]) -> list[tuple[str, int]]:
    found = member.get("partitions")
    if found is not None:
        return list(found)
    return _partitions_of(member.get("member_assignment"))


def _describe_consumer(admin: ClusterClient, group: str) -> dict[str, Any] | None:
    """A KIP-848 consumer group as ConsumerGroupDescribe has it; None when the
    group is not one (or the broker does not know the API)."""
    try:
        info = admin.describe_consumer_group(group)
    except Exception:  # an older broker: no such API, or it refused it
        return None
    if info.error_code:
        return None

    def pairs(assignment: Any) -> list[tuple[str, int]]:
        return sorted((t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)

    return {
        "group_type": "consumer",
        "group_state": info.group_state,
        "protocol_type": "consumer",
        "protocol_data": info.assignor_name,
        "group_epoch": info.group_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "partitions": pairs(m.assignment),
                "target": pairs(m.target_assignment),
            }
            for m in info.members
        ],
    }


def _describe_share(admin: ClusterClient, group: str) -> dict[str, Any] | None:
    """A KIP-932 share group as ShareGroupDescribe has it; None when the group
    is not one (or the broker does not know the API)."""
    try:
        info = admin.describe_share_group(group)
    except Exception:  # an older broker: no such API, or it refused it
        return None
    if info.error_code:
        return None
    return {
        "group_type": "share",
        "group_state": info.group_state,
        "protocol_type": "share",
        "protocol_data": info.assignor_name,
        "group_epoch": info.group_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "partitions": sorted(
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ),
                "target": [],
            }
            for m in info.members
        ],
    }


def _describe(admin: ClusterClient, group: str) -> dict[str, Any]:
    with client_errors():
        info = admin.describe_group(group)
    if info.error_code:
        raise CommandError(f"describing {group!r}: {error_for_code(info.error_code)}")
    if info.group_state == "Dead":
        # Kafka's DescribeGroups calls a KIP-848 group Dead: ask the API that knows.
        consumer = _describe_consumer(admin, group) or _describe_share(admin, group)
        if consumer is not None:
            return consumer
    return {
        "group_type": "classic",
        "group_state": info.group_state,
        "protocol_type": info.protocol_type,
        "protocol_data": info.protocol_data,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_assignment": m.member_assignment,
            }
            for m in info.members
        ],
    }


def _committed(admin: ClusterClient, group: str) -> dict[tuple[str, int], int]:
    with client_errors():
        return admin.committed(group)


@groups.command("list")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--state", "states", multiple=True, help="Only groups in this state; repeatable.")
@click.option(
    "--type", "types", multiple=True, help="Only groups of this type (classic, consumer, share)."
)
def list_groups(
    bootstrap_server: str,
    request_timeout_ms: int,
    states: tuple[str, ...],
    types: tuple[str, ...],
    command_config: str | None,
) -> None:
    """Print the group ids, one per line (with their state when --state is
    given, their type when --type is)."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        found = admin.list_groups_typed()
    wanted = {s.lower() for s in states}
    wanted_types = {t.lower() for t in types}
    for group_id, state, group_type in found:
        if wanted and state.lower() not in wanted:
            continue
        if wanted_types and group_type.lower() not in wanted_types:
            continue
        cols = [group_id]
        if types:
            cols.append(group_type)
        if states:
            cols.append(state)
        click.echo("  ".join(cols))


@groups.command("describe")
@bootstrap_option
@command_config_option
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
    command_config: str | None,
) -> None:
    """Offsets and lag per partition (default), the members, or the state."""
    if bool(names) == all_groups:
        raise click.UsageError("give --group or --all-groups")
    admin = admin_client(bootstrap_server, request_timeout_ms, command_config=command_config)
    try:
        if all_groups:
            with client_errors():
                names = tuple(group_id for group_id, _ in admin.list_groups())
        for name in names:
            info = _describe(admin, name)
            members = info.get("members") or []
            if info.get("group_state") == "Dead" and not _committed(admin, name):
                raise CommandError(f"Consumer group '{name}' does not exist.")
            if show_state:
                _table(
                    [
                        [
                            "GROUP",
                            "STATE",
                            "PROTOCOL-TYPE",
                            "ASSIGNMENT-STRATEGY",
                            "#MEMBERS",
                            "TYPE",
                        ],
                        [
                            name,
                            str(info.get("group_state", "")),
                            str(info.get("protocol_type", "")),
                            str(info.get("protocol_data", "")),
                            str(len(members)),
                            str(info.get("group_type", "")),
                        ],
                    ]
                )
                continue
            if show_members:
                consumer = info.get("group_type") in ("consumer", "share")
                rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]]
                if consumer:
                    rows[0] += ["EPOCH", "TARGET-ASSIGNMENT"]
                for m in members:
                    parts = _member_partitions(m)
                    by_topic: dict[str, list[int]] = {}
                    for t, p in parts:
                        by_topic.setdefault(t, []).append(p)
                    text = ",".join(
                        f"{t}({','.join(str(p) for p in sorted(ps))})"
                        for t, ps in sorted(by_topic.items())
                    )
                    rows.append([name, str(m["member_id"]), str(m["client_host"]),
                                 str(m["client_id"]), str(len(parts)), text or "-"])  # fmt: skip
                    if consumer:
                        rows[-1] += [str(m["member_epoch"]), _text(m["target"]) or "-"]
                _table(rows)
                continue
            owners: dict[tuple[str, int], dict[str, Any]] = {}
            for m in members:
                for tp in _member_partitions(m):
                    owners[tp] = m
            committed = _committed(admin, name)
            tps = sorted(set(committed) | set(owners))
            ends = _end_offsets(admin, tps)
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


def _text(parts: list[tuple[str, int]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    return ",".join(
        f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items())
    )


def _end_offsets(admin: ClusterClient, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    with client_errors():
        return admin.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))


@groups.command("delete")
@bootstrap_option
@command_config_option
@timeout_option
@click.option("--group", "names", multiple=True, required=True, help="Group id; repeatable.")
def delete(
    bootstrap_server: str,
    request_timeout_ms: int,
    names: tuple[str, ...],
    command_config: str | None,
) -> None:
    """Delete inactive groups and their committed offsets."""
    failed = []
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        results = [(group, admin.delete_group(group)) for group in names]
    for group, code in results:
        if code == 0:
            click.echo(f"Deleted consumer group '{group}'.")
        else:
            failed.append(f"{group}: {error_name(code)}")
    if failed:
        raise CommandError("could not delete " + "; ".join(failed))


def _parse_topics(specs: tuple[str, ...], admin: ClusterClient) -> list[tuple[str, int]]:
    out = []
    for spec in specs:
        topic, _, parts = spec.partition(":")
        if parts:
            out += [(topic, int(p)) for p in parts.split(",") if p.strip()]
        else:
            with client_errors():
                found = admin.partitions(topic)
            if not found:
                raise CommandError(f"topic {topic!r} does not exist")
            out += [(topic, p) for p in sorted(found)]
    return out


@groups.command("reset-offsets")
@bootstrap_option
@command_config_option
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
    command_config: str | None,
) -> None:
    """Plan (and with --execute, commit) new offsets for an inactive group."""
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
    admin = admin_client(bootstrap_server, request_timeout_ms, command_config=command_config)
    try:
        info = _describe(admin, name)
        state = str(info.get("group_state", ""))
        if execute and state not in _INACTIVE:
            raise CommandError(
                f"assignments can only be reset if the group '{name}' is inactive, but the "
                f"current state is {state}"
            )
        committed = _committed(admin, name)
        tps = sorted(committed) if all_topics else _parse_topics(topics, admin)
        with client_errors():
            starts = admin.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP)) if tps else {}
            ends = admin.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP)) if tps else {}
        plan: dict[tuple[str, int], int] = {}
        for tp in tps:
            lo, hi = starts[tp], ends[tp]
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
            with client_errors():
                found = admin.list_offsets(dict.fromkeys(tps, ts)) if tps else {}
            for tp, o in found.items():
                plan[tp] = o if o >= 0 else ends[tp]
        if execute:
            with client_errors():
                results = admin.commit(name, plan)
            bad = [f"{t}-{p}: {error_name(code)}" for (t, p), code in sorted(results.items())
                   if code]  # fmt: skip
            if bad:
                raise CommandError("commit failed for " + ", ".join(bad))
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[name, t, str(p), str(o)] for (t, p), o in sorted(plan.items())]
        _table(rows)
    finally:
        admin.close()


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
