"""``meta.properties`` in each log directory (Kafka's BrokerMetadataCheckpoint):
which broker and which cluster the directory belongs to.

A ZooKeeper-mode broker writes it at start-up (``version=0``, ``broker.id``,
``cluster.id``) and checks it on every later start: a directory of another
broker, or of another cluster (a wrong ``zookeeper.connect`` or chroot), stops
the start-up before the broker can serve or replicate into the wrong log. It
is also where a generated broker id (``broker.id.generation.enable``) is
remembered. KRaft's ``version=1`` files (``node.id``, ``directory.id``) are
read too, so a Kafka 4 log directory names its broker and cluster."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from pylog.errors import KafkaError

__all__ = [
    "META_PROPERTIES",
    "BrokerMetadata",
    "InconsistentBrokerMetadataError",
    "read_broker_metadata",
    "resolve_broker_metadata",
    "write_broker_metadata",
]

META_PROPERTIES = "meta.properties"


class InconsistentBrokerMetadataError(KafkaError):
    """The log directories' meta.properties disagree with each other, with the
    configured broker.id, or with the cluster's id."""

    code, error_name = 40, "INVALID_CONFIG"


@dataclass(frozen=True)
class BrokerMetadata:
    broker_id: int | None
    cluster_id: str | None


def _parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def read_broker_metadata(log_dir: str) -> BrokerMetadata | None:
    """The directory's meta.properties, or None when it has none."""
    path = os.path.join(log_dir, META_PROPERTIES)
    try:
        with open(path, encoding="utf-8") as f:
            props = _parse(f.read())
    except FileNotFoundError:
        return None
    raw_id = props.get("broker.id", props.get("node.id"))
    try:
        broker_id = int(raw_id) if raw_id is not None else None
    except ValueError:
        raise InconsistentBrokerMetadataError(
            f"{path}: broker.id {raw_id!r} is not a number"
        ) from None
    return BrokerMetadata(broker_id, props.get("cluster.id") or None)


def resolve_broker_metadata(log_dirs: Sequence[str]) -> BrokerMetadata:
    """What the log directories agree on (None for what none of them says);
    InconsistentBrokerMetadataError when two of them disagree."""
    broker_id: int | None = None
    cluster_id: str | None = None
    seen: list[str] = []
    for d in log_dirs:
        meta = read_broker_metadata(d)
        if meta is None:
            continue
        if meta.broker_id is not None:
            if broker_id is not None and meta.broker_id != broker_id:
                raise InconsistentBrokerMetadataError(
                    f"the log directories name different brokers: broker.id {broker_id} in "
                    f"{', '.join(seen)} but {meta.broker_id} in {d}"
                )
            broker_id = meta.broker_id
        if meta.cluster_id is not None:
            if cluster_id is not None and meta.cluster_id != cluster_id:
                raise InconsistentBrokerMetadataError(
                    f"the log directories belong to different clusters: {cluster_id} in "
                    f"{', '.join(seen)} but {meta.cluster_id} in {d}"
                )
            cluster_id = meta.cluster_id
        seen.append(d)
    return BrokerMetadata(broker_id, cluster_id)


def write_broker_metadata(log_dirs: Sequence[str], broker_id: int, cluster_id: str) -> None:
    """Write meta.properties (version 0, Kafka's ZooKeeper-mode form) to every
    log directory, atomically: a crash leaves the old file or the new one."""
    body = (
        "#\n# written by pylog (Kafka's meta.properties)\n"
        f"version=0\nbroker.id={broker_id}\ncluster.id={cluster_id}\n"
    )
    for d in log_dirs:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, META_PROPERTIES)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
