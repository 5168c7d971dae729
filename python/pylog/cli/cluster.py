"""``pylog cluster describe``: the cluster as its brokers' Metadata describes
it — the brokers (id, host:port, rack), the active controller, the
partitions whose in-sync replicas are fewer than their replicas, and those
without a leader."""

from __future__ import annotations

import click

from pylog.cli.client import ClusterMetadata
from pylog.cli.common import admin_client, bootstrap_option, client_errors, timeout_option


@click.group("cluster")
def cluster() -> None:
    """Describe the cluster."""


def _ids(nodes: list[int]) -> str:
    return ",".join(str(n) for n in nodes)


def format_cluster(meta: ClusterMetadata) -> str:
    controller = meta.controller_id
    lines = [
        f"ClusterId: {meta.cluster_id or 'none'}\t"
        f"Controller: {controller if controller >= 0 else 'none'}",
        f"Brokers: {len(meta.brokers)}",
    ]
    for b in sorted(meta.brokers):
        host, port = meta.brokers[b]
        rack = meta.racks.get(b)
        line = f"\tId: {b}\tEndpoint: {host}:{port}\tRack: {rack or 'none'}"
        if b == controller:
            line += "\t(controller)"
        lines.append(line)
    parts = [
        (t.name, p)
        for t in sorted(meta.topics.values(), key=lambda t: t.name)
        for _, p in sorted(t.partitions.items())
    ]
    under = [(n, p) for n, p in parts if p.leader >= 0 and len(p.isr) < len(p.replicas)]
    unavailable = [(n, p) for n, p in parts if p.leader < 0]
    for title, found in (
        ("UnderReplicatedPartitions", under),
        ("UnavailablePartitions", unavailable),
    ):
        lines.append(f"{title}: {len(found)}")
        for name, p in found:
            line = (
                f"\tTopic: {name}\tPartition: {p.partition}\t"
                f"Leader: {'none' if p.leader < 0 else p.leader}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            )
            if p.offline:
                line += f"\tOffline: {_ids(p.offline)}"
            lines.append(line)
    return "\n".join(lines)


@cluster.command("describe")
@bootstrap_option
@timeout_option
def describe(bootstrap_server: str, request_timeout_ms: int) -> None:
    """Print the brokers (id, host:port, rack), the controller, the
    under-replicated partitions (ISR smaller than the replicas) and the
    unavailable ones (no leader)."""
    with admin_client(bootstrap_server, request_timeout_ms) as admin, client_errors():
        meta = admin.metadata(None)
    click.echo(format_cluster(meta))
