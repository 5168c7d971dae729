"""``pylog cluster describe``: the cluster as its brokers' Metadata describes
it — the brokers (id, host:port, rack), the active controller, the
partitions whose in-sync replicas are fewer than their replicas, and those
without a leader."""

from __future__ import annotations

import click

from pylog.cli.client import ClusterMetadata
from pylog.cli.common import (
    admin_client,
    bootstrap_option,
    client_errors,
    command_config_option,
    timeout_option,
)


@click.group("cluster")
def cluster() -> None:
    """Describe the cluster, or run one on this machine."""


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
@command_config_option
@timeout_option
def describe(bootstrap_server: str, request_timeout_ms: int, command_config: str | None) -> None:
    """Print the brokers (id, host:port, rack), the controller, the
    under-replicated partitions (ISR smaller than the replicas) and the
    unavailable ones (no leader)."""
    with (
        admin_client(bootstrap_server, request_timeout_ms, command_config=command_config) as admin,
        client_errors(),
    ):
        meta = admin.metadata(None)
    click.echo(format_cluster(meta))


@cluster.command("local")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 64))
@click.option(
    "--dir",
    "directory",
    default="./pylog-cluster",
    show_default=True,
    type=click.Path(file_okay=False),
    help="ZooKeeper's data and each broker's log directory (broker-<id>/data) and log "
    "(broker-<id>/broker.log); kept, so a second run finds the same cluster.",
)
@click.option(
    "--base-port",
    default=9092,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Broker i listens on base-port + i - 1 (0: free ports).",
)
@click.option("--zookeeper-port", default=2181, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="A broker key for every broker (repeatable).",
)
def local(
    brokers: int, directory: str, base_port: int, zookeeper_port: int, overrides: tuple[str, ...]
) -> None:
    """Run a cluster on this machine until Ctrl-C: a ZooKeeper server (Debian's
    zookeeper package) and BROKERS `pylog broker start` processes on
    127.0.0.1, for trying replication and failover (kill one, watch
    `pylog cluster describe`)."""
    import signal
    import threading

    from pylog.testing import LocalCluster, ZooKeeperUnavailable

    props: dict[str, object] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--override")
        props[key.strip()] = value.strip()
    c = LocalCluster(
        brokers,
        props,
        directory=directory,
        chroot="/pylog",
        base_port=base_port,
        zookeeper_port=zookeeper_port,
    )
    try:
        c.start()
    except ZooKeeperUnavailable as e:
        raise click.ClickException(str(e)) from e
    except (RuntimeError, TimeoutError, OSError) as e:
        raise click.ClickException(f"the cluster did not start: {e}") from e
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        click.echo(f"zookeeper.connect={c.zookeeper_connect}")
        for b in c.brokers.values():
            click.echo(f"broker {b.broker_id}: {b.bootstrap_servers}  (log: {b.log_file})")
        click.echo(f"bootstrap.servers={c.bootstrap_servers}", nl=True)
        click.echo("Ctrl-C stops the cluster (its data stays in " + directory + ")")
        stop.wait()
    finally:
        c.close()
