"""``pylog cluster describe``: the cluster as its brokers' Metadata describes
it — the brokers (id, host:port, rack), the active controller, and the
partitions whose in-sync replicas are fewer than their replicas."""

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
    under = [
        (t.name, p)
        for t in sorted(meta.topics.values(), key=lambda t: t.name)
        for _, p in sorted(t.partitions.items())
        if len(p.isr) < len(p.replicas) or p.leader < 0
    ]
    lines.append(f"UnderReplicatedPartitions: {len(under)}")
    for name, p in under:
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
    """Print the brokers (id, host:port, rack), the controller and the
    under-replicated partitions (ISR smaller than the replicas, or no leader)."""
    with admin_client(bootstrap_server, request_timeout_ms) as admin, client_errors():
        meta = admin.metadata(None)
    click.echo(format_cluster(meta))
