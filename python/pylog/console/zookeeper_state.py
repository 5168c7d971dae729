"""The cluster page's ZooKeeper section: what the ensemble and the cluster's
znodes say, for a cluster kept in ZooKeeper (Kafka's ZooKeeper mode, and
pylog's). A Kafka client cannot see ZooKeeper, so the console reads it only
when given its connect string (``pylog console --zookeeper``, or the
broker's own ``zookeeper.connect`` for the console a broker serves).

Each server of the connect string is asked ``srvr`` (ZooKeeper's four-letter
word allowed by default: its mode, version, latency, znode count); the
cluster's chroot is read with kazoo (the client pylog's brokers use), once
per page load: the controller and its epoch, the registered brokers, the
cluster id, a reassignment waiting in ``/admin/reassign_partitions``, topics
queued for deletion, and the change notifications not yet consumed."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

__all__ = ["ZooKeeperServerView", "ZooKeeperView", "zookeeper_state"]

#: The srvr lines shown, in ZooKeeper's own words.
_SRVR_KEYS = ("Zookeeper version", "Mode", "Latency min/avg/max", "Connections", "Node count")


@dataclass
class ZooKeeperServerView:
    address: str
    error: str | None = None
    stats: dict[str, str] = field(default_factory=dict)  # srvr's "Key: value" lines


@dataclass
class ZooKeeperView:
    connect: str
    servers: list[ZooKeeperServerView] = field(default_factory=list)
    error: str | None = None  # the chroot could not be read
    cluster_id: str | None = None
    controller: int | None = None
    controller_epoch: int | None = None
    brokers: list[int] = field(default_factory=list)
    reassignment_pending: int = 0  # partitions in /admin/reassign_partitions
    deleting: list[str] = field(default_factory=list)  # /admin/delete_topics
    isr_changes: int = 0  # /isr_change_notification children
    config_changes: int = 0  # /config/changes children
    log_dir_events: int = 0  # /log_dir_event_notification children


def _srvr(address: str, timeout: float) -> ZooKeeperServerView:
    view = ZooKeeperServerView(address)
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or address, int(port or 2181)), timeout) as s:
            s.sendall(b"srvr")
            data = b""
            while len(data) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except (OSError, ValueError) as e:
        view.error = f"srvr: {e}"
        return view
    text = data.decode(errors="replace")
    if "not in the whitelist" in text:
        view.error = "srvr is not in the server's 4lw.commands.whitelist"
        return view
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in _SRVR_KEYS:
            view.stats[key.strip()] = value.strip()
    return view


def _children(zk: KazooClient, path: str) -> list[str]:
    try:
        return list(zk.get_children(path))
    except NoNodeError:
        return []


def _json(zk: KazooClient, path: str) -> object:
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    try:
        return json.loads(data.decode()) if data else None
    except (ValueError, UnicodeDecodeError):
        return None


def zookeeper_state(connect: str, timeout: float = 5.0) -> ZooKeeperView:
    """Ask each server ``srvr`` and read the cluster's znodes (``connect``:
    ``host:port[,host:port...][/chroot]``). Errors are shown, not raised."""
    view = ZooKeeperView(connect)
    hosts = connect.split("/", 1)[0]
    view.servers = [_srvr(h.strip(), timeout) for h in hosts.split(",") if h.strip()]
    zk = KazooClient(hosts=connect, timeout=timeout, read_only=True)
    try:
        zk.start(timeout=timeout)
    except (KazooTimeoutError, KazooException, OSError) as e:
        view.error = f"cannot connect: {e or type(e).__name__}"
        return view
    try:
        cluster = _json(zk, "/cluster/id")
        if isinstance(cluster, dict) and isinstance(cluster.get("id"), str):
            view.cluster_id = cluster["id"]
        controller = _json(zk, "/controller")
        if isinstance(controller, dict) and isinstance(controller.get("brokerid"), int):
            view.controller = controller["brokerid"]
        epoch = _json(zk, "/controller_epoch")
        if isinstance(epoch, int):
            view.controller_epoch = epoch
        view.brokers = sorted(int(b) for b in _children(zk, "/brokers/ids") if b.isdigit())
        pending = _json(zk, "/admin/reassign_partitions")
        if isinstance(pending, dict) and isinstance(pending.get("partitions"), list):
            view.reassignment_pending = len(pending["partitions"])
        view.deleting = sorted(_children(zk, "/admin/delete_topics"))
        view.isr_changes = len(_children(zk, "/isr_change_notification"))
        view.config_changes = len(_children(zk, "/config/changes"))
        view.log_dir_events = len(_children(zk, "/log_dir_event_notification"))
    except KazooException as e:
        view.error = f"reading the znodes: {e or type(e).__name__}"
    finally:
        zk.stop()
        zk.close()
    return view
