"""JsonMetadataStore: the embedded single-broker MetadataStore — topics, their
partition counts, topic ids and config overrides, the cluster id and the
producer-id block.

It is one JSON document, ``pylog-metadata.json`` in the first log directory,
rewritten whole on every change: written to a temporary file, fsynced, renamed
over the old one and the directory fsynced, so a crash leaves either the old or
the new document, never a torn one. JSON rather than sqlite because the data is
a few kilobytes that are read once at start-up and changed only by admin
requests (rewriting it whole costs well under a millisecond), a person can read
and repair it with a text editor, and it has the shape Kafka's ZooKeeper nodes
have (one JSON document per topic), which the ZooKeeper store will reuse.

Listeners registered with :meth:`add_listener` hear every change after it is
durable (see :mod:`pylog.metadata.store`).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Mapping
from typing import Any

from pylog.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from pylog.log.checkpoint import fsync_dir
from pylog.metadata.store import (
    Listener,
    MetadataEvent,
    MetadataStore,
    TopicMetadata,
    new_uuid,
    validate_topic_name,
)

__all__ = ["METADATA_FILE", "JsonMetadataStore"]

METADATA_FILE = "pylog-metadata.json"
_FORMAT_VERSION = 1


class JsonMetadataStore(MetadataStore):
    """The embedded store. Thread-safe; every change is durable when it returns."""

    def __init__(self, directory: str, *, cluster_id: str | None = None) -> None:
        self._dir = os.path.abspath(directory)
        self._path = os.path.join(self._dir, METADATA_FILE)
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[str, TopicMetadata] = {}
        self._producer_id_block_end = 0
        try:
            os.makedirs(self._dir, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create {self._dir}: {e}", e.errno) from e
        loaded = self._load()
        if loaded is None:
            self._cluster_id = cluster_id or new_uuid()
            self._save()
        else:
            self._cluster_id = loaded

    # ------------------------------------------------------------------ file

    @property
    def path(self) -> str:
        return self._path

    def _load(self) -> str | None:
        try:
            with open(self._path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self._path}: {e}", e.errno) from e
        try:
            doc = json.loads(raw)
            if doc.get("version") != _FORMAT_VERSION:
                raise ValueError(f"unknown format version {doc.get('version')!r}")
            for name, t in doc.get("topics", {}).items():
                meta = TopicMetadata(
                    name=name,
                    topic_id=str(t["topic_id"]),
                    partitions=int(t["partitions"]),
                    configs={str(k): str(v) for k, v in t.get("configs", {}).items()},
                    replication_factor=int(t.get("replication_factor", 1)),
                )
                self._topics[name] = meta
                self._by_id[meta.topic_id] = meta
            self._producer_id_block_end = int(doc.get("producer_id_block_end", 0))
            return str(doc["cluster_id"])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise KafkaStorageError(f"{self._path} is not a pylog metadata document: {e}") from e

    def _save(self) -> None:
        doc: dict[str, Any] = {
            "version": _FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": {
                name: {
                    "topic_id": t.topic_id,
                    "partitions": t.partitions,
                    "replication_factor": t.replication_factor,
                    "configs": t.configs,
                }
                for name, t in sorted(self._topics.items())
            },
        }
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        tmp = self._path + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._path)
            fsync_dir(self._dir)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise KafkaStorageError(f"cannot write {self._path}: {e}", e.errno) from e

    # ------------------------------------------------------------------ listeners

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, event: MetadataEvent) -> None:
        for listener in list(self._listeners):
            listener(event)

    # ------------------------------------------------------------------ reads

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def topic(self, name: str) -> TopicMetadata | None:
        with self._lock:
            return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        with self._lock:
            return self._by_id.get(topic_id)

    def topics(self) -> list[TopicMetadata]:
        with self._lock:
            return [self._topics[n] for n in sorted(self._topics)]

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._topics

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's overrides (for LogManager's ``topic_configs``)."""
        with self._lock:
            return {n: dict(t.configs) for n, t in self._topics.items() if t.configs}

    # ------------------------------------------------------------------ changes

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: str | None = None,
        validate_only: bool = False,
    ) -> TopicMetadata:
        """Add a topic. TopicAlreadyExistsError, InvalidTopicError,
        InvalidPartitionsError, InvalidReplicationFactorError (this store has one
        broker, so a replication factor above 1 cannot be placed)."""
        validate_topic_name(name)
        if num_partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, not {num_partitions}"
            )
        if replication_factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, not {replication_factor}"
            )
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the 1 available broker"
            )
        with self._lock:
            if name in self._topics:
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            colliding = name.replace(".", "_")
            for other in self._topics:
                if other.replace(".", "_") == colliding:
                    raise InvalidTopicError(
                        f"topic {name!r} collides with existing topic {other!r} "
                        "('.' and '_' are the same in metric names)"
                    )
            meta = TopicMetadata(
                name=name,
                topic_id=topic_id or new_uuid(),
                partitions=num_partitions,
                configs={k: str(v) for k, v in (configs or {}).items() if v is not None},
                replication_factor=replication_factor,
            )
            if validate_only:
                return meta
            self._topics[name] = meta
            self._by_id[meta.topic_id] = meta
            try:
                self._save()
            except KafkaStorageError:
                del self._topics[name]
                del self._by_id[meta.topic_id]
                raise
            self._notify(MetadataEvent("create", meta))
            return meta

    def delete_topic(self, name: str) -> None:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            del self._topics[name]
            del self._by_id[meta.topic_id]
            try:
                self._save()
            except KafkaStorageError:
                self._topics[name] = meta
                self._by_id[meta.topic_id] = meta
                raise
            self._notify(MetadataEvent("delete", meta, meta))

    def add_partitions(
        self, name: str, new_total: int, *, validate_only: bool = False
    ) -> TopicMetadata:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if new_total <= meta.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {meta.partitions} partitions; the new count "
                    f"{new_total} must be larger"
                )
            new = TopicMetadata(
                meta.name, meta.topic_id, new_total, dict(meta.configs), meta.replication_factor
            )
            if validate_only:
                return new
            self._replace(meta, new)
            self._notify(MetadataEvent("partitions", new, meta))
            return new

    def alter_topic_config(self, name: str, configs: Mapping[str, str | None]) -> None:
        """Set overrides; a None value deletes that override."""
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            merged = dict(meta.configs)
            for k, v in configs.items():
                if v is None:
                    merged.pop(k, None)
                else:
                    merged[k] = str(v)
            self.set_topic_config(name, merged)

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace all of a topic's overrides (AlterConfigs' semantics)."""
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            new = TopicMetadata(
                meta.name,
                meta.topic_id,
                meta.partitions,
                {k: str(v) for k, v in configs.items()},
                meta.replication_factor,
            )
            self._replace(meta, new)
            self._notify(MetadataEvent("config", new, meta))

    def _replace(self, old: TopicMetadata, new: TopicMetadata) -> None:
        self._topics[new.name] = new
        self._by_id[new.topic_id] = new
        try:
            self._save()
        except KafkaStorageError:
            self._topics[old.name] = old
            self._by_id[old.topic_id] = old
            raise

    def reserve_producer_id_block(self, size: int) -> int:
        """Persist a new block of ``size`` producer ids; returns its first id.

        The end of the last block handed out is written before any id of the
        new block is used, so ids never repeat across restarts."""
        if size < 1:
            raise ValueError("a producer id block needs at least one id")
        with self._lock:
            start = self._producer_id_block_end
            self._producer_id_block_end = start + size
            try:
                self._save()
            except KafkaStorageError:
                self._producer_id_block_end = start
                raise
            return start

    def __repr__(self) -> str:
        return f"JsonMetadataStore({self._path!r}, topics={len(self._topics)})"
