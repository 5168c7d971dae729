"""JsonMetadataStore: the embedded single-broker MetadataStore — topics,
their partition counts, topic ids and config overrides, the cluster id and the
producer-id block.

Two files in the first log directory:

* ``pylog-metadata.json``, the snapshot: one JSON document holding everything
  (the format pylog has always written, so an older store loads unchanged),
  the SCRAM users' credentials too (``scram_users``: user → mechanism →
  Kafka's credential string — salt, stored key, server key, iterations; never
  a password), the ACLs (``acls``: one entry per resource pattern, its
  entries in ZooKeeper's JSON) and the client quotas (``client_quotas``: one
  entry per user, client-id or user and client-id entity). Both files are
  created readable by the broker's user only.
  It is only ever replaced whole: written to a temporary file, fsynced,
  renamed over the old one, the directory fsynced.
* ``pylog-metadata.journal``, the changes since that snapshot: one line per
  change, ``<crc32 in hex> <JSON>``, appended and fsynced before the change is
  acknowledged. A change of several topics (one CreateTopics request, one
  Metadata request's auto-creations) is one line, so it costs one fsync and
  is durable all or nothing.

Loading reads the snapshot, then replays the journal; a torn or corrupt last
line (a crash in the middle of an append, never acknowledged) is cut off.
Once the journal outgrows the snapshot (and at least :data:`COMPACT_BYTES`),
the next change writes a new snapshot and empties the journal. Every journal
entry sets a value (a topic as a whole, a topic gone, the producer-id mark),
so replaying entries the snapshot already holds — a crash between the
snapshot's rename and the journal's truncation — changes nothing.

Before the journal, every change rewrote the whole document: creating 2,000
topics one by one wrote ~260 MB and took 17 s. Now a change writes its own
line, and a request's topics share one fsync.

Reads take no lock: the topic maps are replaced, never changed in place, so a
reader on the event loop never waits for a writer (who may be creating
thousands of partitions in its listeners on a worker thread).

Listeners registered with :meth:`add_listener` hear every change after it is
durable (see :mod:`pylog.metadata.store`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pylog.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from pylog.log.checkpoint import fsync_dir
from pylog.logsafe import quoted
from pylog.metadata.client_quota_entity import ClientQuotaEntity
from pylog.metadata.store import (
    Listener,
    MetadataEvent,
    MetadataStore,
    NewTopic,
    TopicMetadata,
    check_partition_limit,
    new_uuid,
    validate_topic_name,
)
from pylog.metadata.zk_data import FinalizedFeatures
from pylog.security.access_control_entry import AccessControlEntry
from pylog.security.acl_entry import acls_doc, acls_from_doc
from pylog.security.pattern_type import PatternType
from pylog.security.resource_pattern import ResourcePattern
from pylog.security.resource_type import ResourceType
from pylog.security.scram_credential import ScramCredential
from pylog.security.scram_mechanism import ScramMechanism

__all__ = ["COMPACT_BYTES", "JOURNAL_FILE", "METADATA_FILE", "JsonMetadataStore"]

METADATA_FILE = "pylog-metadata.json"
JOURNAL_FILE = "pylog-metadata.journal"
_FORMAT_VERSION = 1
#: The journal is folded into a new snapshot once it is larger than this and
#: than the snapshot.
COMPACT_BYTES = 1 << 20

_log = logging.getLogger("pylog.metadata")

Op = dict[str, Any]


def _topic_doc(t: TopicMetadata) -> dict[str, Any]:
    return {
        "topic_id": t.topic_id,
        "partitions": t.partitions,
        "replication_factor": t.replication_factor,
        "configs": t.configs,
    }


def _quota_doc(entity: ClientQuotaEntity, values: Mapping[str, float]) -> dict[str, Any]:
    if entity.ip is not None:
        return {"ip": entity.ip, "values": dict(values)}
    return {"user": entity.user, "client_id": entity.client_id, "values": dict(values)}


def _topic_of(name: str, t: Mapping[str, Any]) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id=str(t["topic_id"]),
        partitions=int(t["partitions"]),
        configs={str(k): str(v) for k, v in t.get("configs", {}).items()},
        replication_factor=int(t.get("replication_factor", 1)),
    )


def _journal_line(ops: list[Op]) -> bytes:
    body = json.dumps({"ops": ops}, separators=(",", ":"), sort_keys=True).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


class JsonMetadataStore(MetadataStore):
    """The embedded store. Thread-safe; every change is durable when it returns."""

    def __init__(self, directory: str, *, cluster_id: str | None = None) -> None:
        self._dir = os.path.abspath(directory)
        self._path = os.path.join(self._dir, METADATA_FILE)
        self._journal_path = os.path.join(self._dir, JOURNAL_FILE)
        # Writers hold this through the durable write and the listeners, so
        # changes are applied and heard in one order. Readers do not take it.
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[str, TopicMetadata] = {}
        self._total_partitions = 0
        self._producer_id_block_end = 0
        self._journal_fd = -1
        self._journal_bytes = 0
        self._snapshot_bytes = 0
        try:
            os.makedirs(self._dir, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create {self._dir}: {e}", e.errno) from e
        loaded = self._load()
        if loaded is None:
            self._cluster_id = cluster_id or new_uuid()
            self._write_snapshot()
        else:
            self._cluster_id = loaded
        self._replay_journal()
        self._open_journal()

    # ------------------------------------------------------------------ files

    @property
    def path(self) -> str:
        return self._path

    @property
    def journal_path(self) -> str:
        return self._journal_path

    def _load(self) -> str | None:
        try:
            with open(self._path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self._path}: {e}", e.errno) from e
        self._snapshot_bytes = len(raw)
        try:
            doc = json.loads(raw)
            if doc.get("version") != _FORMAT_VERSION:
                raise ValueError(f"unknown format version {doc.get('version')!r}")
            topics = {name: _topic_of(name, t) for name, t in doc.get("topics", {}).items()}
            self._publish(topics)
            self._producer_id_block_end = int(doc.get("producer_id_block_end", 0))
            for user, creds in (doc.get("scram_users") or {}).items():
                self._apply_scram(str(user), creds)
            for item in doc.get("acls") or []:
                self._apply_acls(item)
            for entry in doc.get("client_quotas") or []:
                self._apply_quota(entry)
            for entity, configs in (doc.get("broker_configs") or {}).items():
                self._put_broker_config(str(entity), {str(k): str(v) for k, v in configs.items()})
            for group, configs in (doc.get("group_configs") or {}).items():
                self._put_group_config(str(group), {str(k): str(v) for k, v in configs.items()})
            for name, configs in (doc.get("client_metrics") or {}).items():
                self._put_client_metrics_config(
                    str(name), {str(k): str(v) for k, v in configs.items()}
                )
            features = doc.get("finalized_features")
            if features is not None:
                self._apply_features(features)
            return str(doc["cluster_id"])
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise KafkaStorageError(f"{self._path} is not a pylog metadata document: {e}") from e

    def _replay_journal(self) -> None:
        """Apply the journal's entries; cut off a torn or corrupt tail."""
        try:
            with open(self._journal_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self._journal_path}: {e}", e.errno) from e
        topics = dict(self._topics)
        good = 0
        problem = None
        while good < len(raw):
            end = raw.find(b"\n", good)
            if end < 0:
                problem = "an unfinished last entry"
                break
            line = raw[good:end]
            try:
                crc, body = line.split(b" ", 1)
                if int(crc, 16) != zlib.crc32(body):
                    raise ValueError("checksum mismatch")
                ops = json.loads(body)["ops"]
                for op in ops:
                    self._apply(topics, op)
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                problem = f"a corrupt entry at byte {good} ({e})"
                break
            good = end + 1
        self._publish(topics)
        if problem is not None:
            _log.warning(
                "%s: dropping %d bytes from %s (a write interrupted by a crash)",
                self._journal_path,
                len(raw) - good,
                problem,
            )
            try:
                with open(self._journal_path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
            except OSError as e:
                raise KafkaStorageError(
                    f"cannot truncate {self._journal_path}: {e}", e.errno
                ) from e
        self._journal_bytes = good

    def _apply(self, topics: dict[str, TopicMetadata], op: Op) -> None:
        if "put" in op:
            name = str(op["put"])
            topics[name] = _topic_of(name, op["topic"])
        elif "del" in op:
            topics.pop(str(op["del"]), None)
        elif "pid" in op:
            self._producer_id_block_end = max(self._producer_id_block_end, int(op["pid"]))
        elif "scram" in op:
            self._apply_scram(str(op["scram"]), op["creds"])
        elif "acl" in op:
            self._apply_acls(op["acl"])
        elif "quota" in op:
            self._apply_quota(op["quota"])
        elif "broker_config" in op:
            self._put_broker_config(str(op["broker_config"]), op["configs"])
        elif "group_config" in op:
            self._put_group_config(str(op["group_config"]), op["configs"])
        elif "client_metrics" in op:
            self._put_client_metrics_config(str(op["client_metrics"]), op["configs"])
        elif "features" in op:
            self._apply_features(op["features"])
        else:
            raise ValueError(f"unknown journal entry {op!r}")

    def _apply_features(self, doc: Mapping[str, Any]) -> None:
        """``{"epoch": E, "levels": {name: level}}``: the finalized features
        (KIP-584) as UpdateFeatures left them."""
        self._finalized_features = FinalizedFeatures(
            True, {str(k): int(v) for k, v in doc["levels"].items()}, int(doc["epoch"])
        )

    def _apply_scram(self, user: str, creds: Mapping[str, str]) -> None:
        """A user's credentials as the document holds them (all of them)."""
        parsed = {}
        for name, text in creds.items():
            mechanism = ScramMechanism.by_name(str(name))
            if mechanism is None:
                raise ValueError(f"unknown SCRAM mechanism {name!r}")
            parsed[mechanism] = ScramCredential.from_string(str(text))
        self.scram_credentials.set_user(user, parsed)

    def _apply_acls(self, item: Mapping[str, Any]) -> None:
        """One pattern's ACLs as the document holds them (all of them)."""
        pattern = ResourcePattern(
            ResourceType.parse(str(item["resourceType"])),
            str(item["name"]),
            PatternType.parse(str(item["patternType"])),
        )
        self.acl_cache.set(pattern, acls_from_doc(item["acls"]))

    def _apply_quota(self, entry: Mapping[str, Any]) -> None:
        """One entity's quotas as the document holds them (all of them)."""
        user, client_id, ip = entry.get("user"), entry.get("client_id"), entry.get("ip")
        entity = ClientQuotaEntity(
            None if user is None else str(user),
            None if client_id is None else str(client_id),
            None if ip is None else str(ip),
        )
        entity.path()  # an entity with neither part is not a document of this store
        values = {str(k): float(v) for k, v in (entry.get("values") or {}).items()}
        self._set_entity_quotas(entity, values)

    def _open_journal(self) -> None:
        try:
            self._journal_fd = os.open(
                self._journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
            )
            with contextlib.suppress(OSError):  # one written before it held credentials
                os.fchmod(self._journal_fd, 0o600)
            fsync_dir(self._dir)
        except OSError as e:
            raise KafkaStorageError(f"cannot open {self._journal_path}: {e}", e.errno) from e

    def _write_snapshot(self) -> None:
        doc: dict[str, Any] = {
            "version": _FORMAT_VERSION,
            "cluster_id": self._cluster_id,
            "producer_id_block_end": self._producer_id_block_end,
            "topics": {name: _topic_doc(t) for name, t in sorted(self._topics.items())},
        }
        if self._finalized_features.epoch >= 0:
            doc["finalized_features"] = _features_doc(self._finalized_features)
        cache = self.scram_credentials
        users = {
            user: {m.mechanism_name: c.to_string() for m, c in cache.credentials(user).items()}
            for user in cache.users()
        }
        if users:
            doc["scram_users"] = users
        acls = [_acl_item(p, e) for p, e in sorted(self.acl_cache.snapshot().items())]
        if acls:
            doc["acls"] = acls
        quotas = [_quota_doc(e, v) for e, v in self.client_quotas.items()]
        if quotas:
            doc["client_quotas"] = sorted(
                quotas,
                key=lambda q: (q.get("ip") or "", q.get("user") or "", q.get("client_id") or ""),
            )
        if self._broker_configs:
            doc["broker_configs"] = {e: dict(c) for e, c in self._broker_configs.items()}
        if self._group_configs:
            doc["group_configs"] = {g: dict(c) for g, c in self._group_configs.items()}
        if self._client_metrics_configs:
            doc["client_metrics"] = {n: dict(c) for n, c in self._client_metrics_configs.items()}
        data = json.dumps(doc, indent=1, sort_keys=True).encode()
        tmp = self._path + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
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
        self._snapshot_bytes = len(data)

    def _append(self, ops: list[Op]) -> None:
        """Make ``ops`` durable: one journal line, fsynced; the journal is
        folded into a new snapshot first when it has grown large."""
        if self._journal_fd < 0:
            raise KafkaStorageError(f"the metadata store {self._dir} is closed")
        line = _journal_line(ops)
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._journal_fd, view) :]
            os.fsync(self._journal_fd)
        except OSError as e:
            # Whatever part of the line was written is cut off at the next load.
            raise KafkaStorageError(f"cannot write {self._journal_path}: {e}", e.errno) from e
        self._journal_bytes += len(line)

    def _maybe_compact(self) -> None:
        """Fold the journal into a new snapshot once it outgrows it. Called
        after a change is applied to the maps, so the snapshot holds it."""
        if self._journal_bytes <= max(COMPACT_BYTES, self._snapshot_bytes):
            return
        try:
            self._write_snapshot()
            os.ftruncate(self._journal_fd, 0)
            os.fsync(self._journal_fd)
            self._journal_bytes = 0
        except (OSError, KafkaStorageError) as e:
            # The journal still holds every change: nothing is lost.
            _log.warning("compacting %s failed: %s", self._journal_path, e)

    def _publish(self, topics: dict[str, TopicMetadata]) -> None:
        """Install new maps (never changed afterwards: readers take no lock)."""
        self._topics = topics
        self._by_id = {t.topic_id: t for t in topics.values()}
        self._total_partitions = sum(t.partitions for t in topics.values())

    def _commit(self, ops: list[Op], puts: Sequence[TopicMetadata], dels: Sequence[str]) -> None:
        """Durably apply: journal first, then the maps, then maybe compact."""
        self._append(ops)
        topics = dict(self._topics)
        for name in dels:
            topics.pop(name, None)
        for t in puts:
            topics[t.name] = t
        self._publish(topics)
        self._maybe_compact()

    def close(self) -> None:
        with self._lock:
            if self._journal_fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._journal_fd)
                self._journal_fd = -1

    # ------------------------------------------------------------------ SCRAM users

    def alter_user_scram_credentials(
        self, changes: Mapping[str, Mapping[ScramMechanism, ScramCredential | None]]
    ) -> None:
        with self._lock:
            cache = self.scram_credentials
            ops: list[Op] = []
            updated: dict[str, dict[ScramMechanism, ScramCredential]] = {}
            for user, per_mechanism in changes.items():
                creds = cache.credentials(user)
                for mechanism, cred in per_mechanism.items():
                    if cred is None:
                        creds.pop(mechanism, None)
                    else:
                        creds[mechanism] = cred
                updated[user] = creds
                ops.append(
                    {
                        "scram": user,
                        "creds": {m.mechanism_name: c.to_string() for m, c in creds.items()},
                    }
                )
            if not ops:
                return
            self._append(ops)
            for user, creds in updated.items():
                cache.set_user(user, creds)
            self._maybe_compact()

    # ------------------------------------------------------------------ ACLs

    def update_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        with self._lock:
            old = self.acl_cache.get(pattern)
            new = frozenset(change(old))
            if new != old:
                self._append([{"acl": _acl_item(pattern, new)}])
                self.acl_cache.set(pattern, new)
                self._maybe_compact()
            return new

    # ------------------------------------------------------------------ client quotas

    def alter_client_quotas(
        self, changes: Mapping[ClientQuotaEntity, Mapping[str, float | None]]
    ) -> None:
        with self._lock:
            ops: list[Op] = []
            updated: dict[ClientQuotaEntity, dict[str, float]] = {}
            for entity, per_key in changes.items():
                values = dict(self.client_quotas.get(entity, {}))
                for key, value in per_key.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                updated[entity] = values
                ops.append({"quota": _quota_doc(entity, values)})
            if not ops:
                return
            self._append(ops)
            for entity, values in updated.items():
                self._set_entity_quotas(entity, values)
            self._maybe_compact()

    # ------------------------------------------------------------------ dynamic broker configs

    def set_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock:
            self._append([{"broker_config": entity, "configs": clean}])
            self._put_broker_config(entity, clean)
            self._maybe_compact()

    def set_group_config(self, group_id: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock:
            self._append([{"group_config": group_id, "configs": clean}])
            self._put_group_config(group_id, clean)
            self._maybe_compact()

    def set_client_metrics_config(self, name: str, configs: Mapping[str, str]) -> None:
        clean = {str(k): str(v) for k, v in configs.items()}
        with self._lock:
            self._append([{"client_metrics": name, "configs": clean}])
            self._put_client_metrics_config(name, clean)
            self._maybe_compact()

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
        return self._topics.get(name)

    def topic_by_id(self, topic_id: str) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def topics(self) -> list[TopicMetadata]:
        topics = self._topics
        return [topics[n] for n in sorted(topics)]

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """Every topic's overrides (for LogManager's ``topic_configs``)."""
        return {n: dict(t.configs) for n, t in self._topics.items() if t.configs}

    def total_partitions(self) -> int:
        return self._total_partitions

    # ------------------------------------------------------------------ changes

    def _check_new(self, t: NewTopic, pending: Mapping[str, TopicMetadata]) -> TopicMetadata:
        name = t.name
        validate_topic_name(name)
        if t.num_partitions < 1:
            raise InvalidPartitionsError(
                f"number of partitions must be at least 1, not {t.num_partitions}"
            )
        if t.replication_factor < 1:
            raise InvalidReplicationFactorError(
                f"replication factor must be at least 1, not {t.replication_factor}"
            )
        if t.replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {t.replication_factor} is larger than the 1 available broker"
            )
        if name in self._topics or name in pending:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        colliding = name.replace(".", "_")
        for other in (*self._topics, *pending):
            if other.replace(".", "_") == colliding:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {other!r} "
                    "('.' and '_' are the same in metric names)"
                )
        return TopicMetadata(
            name=name,
            topic_id=t.topic_id or new_uuid(),
            partitions=t.num_partitions,
            configs={k: str(v) for k, v in (t.configs or {}).items() if v is not None},
            replication_factor=t.replication_factor,
        )

    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        *,
        topic_id: str | None = None,
        validate_only: bool = False,
        max_partitions: int | None = None,
        replica_assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata:
        """Add a topic. TopicAlreadyExistsError, InvalidTopicError,
        InvalidPartitionsError, InvalidReplicationFactorError (this store has one
        broker, so a replication factor above 1 cannot be placed),
        PolicyViolationError."""
        (result,) = self.create_topics(
            [NewTopic(name, num_partitions, replication_factor, dict(configs or {}), topic_id)],
            validate_only=validate_only,
            max_partitions=max_partitions,
        )
        if isinstance(result, KafkaError):
            raise result
        return result

    def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
    ) -> list[TopicMetadata | KafkaError]:
        """Create several topics with one journal entry (one fsync). A topic
        whose logs a listener cannot make is removed again and answered with
        that error."""
        with self._lock:
            out: list[TopicMetadata | KafkaError] = []
            accepted: dict[str, TopicMetadata] = {}
            total = self._total_partitions
            for t in topics:
                try:
                    meta = self._check_new(t, accepted)
                    check_partition_limit(total, meta.partitions, max_partitions)
                except KafkaError as e:
                    out.append(e)
                    continue
                total += meta.partitions
                accepted[meta.name] = meta
                out.append(meta)
            if validate_only or not accepted:
                return out
            self._commit(
                [{"put": m.name, "topic": _topic_doc(m)} for m in accepted.values()],
                list(accepted.values()),
                (),
            )
            for i, result in enumerate(out):
                if isinstance(result, TopicMetadata):
                    try:
                        self._notify(MetadataEvent("create", result))
                    except Exception as e:
                        # The rest would most likely fail alike (a full disk,
                        # no file descriptors left, the broker stopping).
                        self._undo_creates(out, i, e)
                        break
            return out

    def _undo_creates(
        self, out: list[TopicMetadata | KafkaError], failed: int, cause: Exception
    ) -> None:
        """A listener failed to make the partitions of ``out[failed]``: remove
        it and the topics after it (not made yet) again, durably and in one
        entry, and its partial logs through the listeners. Their results
        become the error."""
        meta = out[failed]
        assert isinstance(meta, TopicMetadata)
        doomed = [m for m in out[failed:] if isinstance(m, TopicMetadata)]
        _log.error(
            "creating the partitions of topic %s failed; removing it and %d topic(s) after "
            "it in the same request: %s",
            quoted(meta.name),
            len(doomed) - 1,
            cause,
        )
        error = cause if isinstance(cause, KafkaError) else KafkaStorageError(str(cause))
        for i in range(failed, len(out)):
            if isinstance(out[i], TopicMetadata):
                out[i] = error
        try:
            self._commit([{"del": m.name} for m in doomed], (), [m.name for m in doomed])
        except KafkaError as e:
            _log.error("cannot remove the topics whose creation failed: %s", e)
            return
        try:
            self._notify(MetadataEvent("delete", meta, meta))
        except Exception as e:
            _log.error("cannot remove the partial logs of topic %s: %s", quoted(meta.name), e)

    def delete_topic(self, name: str) -> None:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            self._commit([{"del": name}], (), (name,))
            self._notify(MetadataEvent("delete", meta, meta))

    def add_partitions(
        self,
        name: str,
        new_total: int,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        replica_assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicMetadata:
        # One broker: every replica of an assignment is this one (the
        # handlers check it), so the assignment adds nothing to keep.
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            if new_total <= meta.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {meta.partitions} partitions; the new count "
                    f"{new_total} must be larger"
                )
            check_partition_limit(
                self._total_partitions, new_total - meta.partitions, max_partitions
            )
            new = TopicMetadata(
                meta.name, meta.topic_id, new_total, dict(meta.configs), meta.replication_factor
            )
            if validate_only:
                return new
            self._replace(new)
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
            self._replace(new)
            self._notify(MetadataEvent("config", new, meta))

    def _replace(self, new: TopicMetadata) -> None:
        self._commit([{"put": new.name, "topic": _topic_doc(new)}], (new,), ())

    def update_finalized_features(self, features: Mapping[str, int]) -> FinalizedFeatures:
        with self._lock:
            new = FinalizedFeatures(True, dict(features), self._finalized_features.epoch + 1)
            self._append([{"features": _features_doc(new)}])
            self._finalized_features = new
            self._maybe_compact()
            return new

    def reserve_producer_id_block(self, size: int) -> int:
        """Persist a new block of ``size`` producer ids; returns its first id.

        The end of the last block handed out is written before any id of the
        new block is used, so ids never repeat across restarts."""
        if size < 1:
            raise ValueError("a producer id block needs at least one id")
        with self._lock:
            start = self._producer_id_block_end
            self._append([{"pid": start + size}])
            self._producer_id_block_end = start + size
            self._maybe_compact()
            return start

    def __repr__(self) -> str:
        return f"JsonMetadataStore({self._path!r}, topics={len(self._topics)})"


def _features_doc(features: FinalizedFeatures) -> dict[str, Any]:
    return {"epoch": features.epoch, "levels": dict(sorted(features.features.items()))}


def _acl_item(pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> dict[str, Any]:
    """A pattern's ACLs in the document (the entries in ZooKeeper's format)."""
    return {
        "resourceType": pattern.resource_type.acl_name,
        "patternType": pattern.pattern_type.name,
        "name": pattern.name,
        "acls": acls_doc(entries),
    }
