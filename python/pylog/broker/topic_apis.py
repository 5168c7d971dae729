"""The topic handlers: CreateTopics, DeleteTopics, CreatePartitions and
DeleteRecords, answered as a single Kafka broker that is also its own
controller would, error codes included.

The first three are held to the client's ``controller_mutation_rate`` (KIP-599,
:mod:`pylog.server.controller_mutation_quota_manager`): each topic's
partitions are counted right before it is created, grown or deleted, after
every other check, so a topic refused for another reason costs nothing.

Topic changes go through the MetadataStore; its listeners (the ReplicaManager)
create, grow and delete the partitions' logs, so a handler never touches a log
except to move a log start offset (DeleteRecords, through the ReplicaManager).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pylog.broker.auth_helper import AuthHelper
from pylog.broker.config_apis import ConfigApis
from pylog.broker.request_helpers import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS,
    duplicates,
    error_of,
)
from pylog.broker.response_dicts import (
    CreatableTopicResultDict,
    CreatePartitionsResponseDict,
    CreatePartitionsTopicResultDict,
    CreateTopicsResponseDict,
    DeletableTopicResultDict,
    DeleteRecordsPartitionResultDict,
    DeleteRecordsResponseDict,
    DeleteRecordsTopicResultDict,
    DeleteTopicsResponseDict,
)
from pylog.common.topic_partition import TopicPartition
from pylog.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    KafkaError,
    PolicyViolationError,
    ThrottlingQuotaExceededError,
    UnknownTopicOrPartitionError,
)
from pylog.log.config import LogConfig
from pylog.logsafe import quoted
from pylog.metadata.store import MetadataStore, NewTopic, TopicMetadata, validate_topic_name
from pylog.network import Request
from pylog.protocol import ZERO_UUID
from pylog.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
)
from pylog.protocol.messages.create_partitions_request import CreatePartitionsTopic
from pylog.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
)
from pylog.security.acl_operation import AclOperation
from pylog.security.resource_type import ResourceType
from pylog.server.config import KafkaConfig
from pylog.server.controller_mutation_quota_manager import (
    STRICT_SINCE_VERSION,
    UNBOUNDED,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
)
from pylog.server.quota_factory import now_ms
from pylog.server.replica_manager import ReplicaManager

__all__ = ["TopicApis"]

_log = logging.getLogger("pylog.broker.topic_apis")

# The responses are dicts typed by response_dicts (its docstring says why).


class TopicApis:
    """CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords. A new
    topic's configs are checked and described (CreateTopics v5+) by the
    ConfigApis."""

    #: Who may do what (KafkaApis sets the broker's; none: everything allowed).
    auth: AuthHelper = AuthHelper()
    #: The controller_mutation_rate quotas (KafkaApis sets the broker's; none: unbounded).
    mutation_quotas: ControllerMutationQuotaManager | None = None

    def __init__(
        self,
        config: KafkaConfig,
        replica_manager: ReplicaManager,
        metadata_store: MetadataStore,
        config_apis: ConfigApis,
        on_topic_deleted: Callable[[TopicMetadata], None] | None = None,
    ) -> None:
        self.config = config
        self.on_topic_deleted = on_topic_deleted
        self.replica_manager = replica_manager
        self.metadata_store = metadata_store
        self.config_apis = config_apis
        self.broker_id = config.broker_id
        self.max_partitions = int(config.get("max.broker.partitions"))

    # ------------------------------------------------------------------ KIP-599

    def _mutation_quota(self, request: Request) -> ControllerMutationQuota:
        """The request's controller mutation quota: strict from the version
        whose clients understand THROTTLING_QUOTA_EXCEEDED, else permissive
        (Kafka's newQuotaFor)."""
        manager = self.mutation_quotas
        if manager is None:
            return UNBOUNDED
        header = request.header
        return manager.new_quota_for(
            request.principal,
            header.client_id or "",
            strict=header.api_version >= STRICT_SINCE_VERSION[header.api_key],
            exempt=request.quota_exempt,
        )

    def _throttle(self, request: Request, quota: ControllerMutationQuota) -> int:
        """The answer's throttle time; the connection is then not read for as
        long (the client waits, whatever its version)."""
        throttle = quota.throttle_time()
        if throttle > 0 and self.mutation_quotas is not None:
            request.throttle_ms = max(request.throttle_ms, throttle)
            self.mutation_quotas.record_throttle(
                request.principal, request.header.client_id or "", throttle, now_ms()
            )
        return throttle

    # ------------------------------------------------------------------ CreateTopics

    async def handle_create_topics_request(
        self, request: Request, body: CreateTopicsRequest
    ) -> CreateTopicsResponseDict:
        version = request.header.api_version
        validate_only = bool(body.validate_only)
        dupes = duplicates(t.name for t in body.topics)
        # Checked first: a request may carry millions of assignments, which
        # are not worth checking one by one when the request is refused whole.
        too_many = self._requested_partitions(body.topics) > MAX_PARTITIONS_PER_REQUEST
        results: list[CreatableTopicResultDict] = []
        # (result entry, topic to create, its effective config) of the topics
        # that pass the checks made here; the store makes the rest.
        pending: list[tuple[CreatableTopicResultDict, NewTopic, LogConfig]] = []
        seen: set[str] = set()
        auth = self.auth
        may_create_all = auth.authorize(
            request, AclOperation.CREATE, ResourceType.CLUSTER, log_if_denied=False
        )
        # Who may see a topic's configs (v5+ answers carry them): the others
        # get topic_config_error_code instead, on every entry, as Kafka.
        describable = (
            auth.filter_by_authorized(
                request,
                AclOperation.DESCRIBE_CONFIGS,
                ResourceType.TOPIC,
                (t.name for t in body.topics),
                log_if_denied=False,
            )
            if version >= 5
            else set()
        )
        for t in body.topics:
            if t.name in dupes:
                if t.name in seen:
                    continue  # one answer per name, as Kafka
                seen.add(t.name)
                results.append(
                    self._create_result(
                        t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name.", version
                    )
                )
                continue
            result = self._create_result(t.name, ErrorCode.NONE, None, version)
            results.append(result)
            if version >= 5 and t.name not in describable:
                result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if not may_create_all and not auth.authorize(
                request, AclOperation.CREATE, ResourceType.TOPIC, t.name
            ):
                result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                result["error_message"] = "Authorization failed."
                continue
            if too_many:
                continue
            try:
                new, effective = self._new_topic(t)
            except Exception as e:
                result["error_code"], result["error_message"] = error_of(e)
                result.pop("topic_config_error_code", None)  # a failed creation has no configs
                continue
            pending.append((result, new, effective))
        if too_many:
            # Refused whole, as Kafka's controller does.
            for result in results:
                result["error_code"] = ErrorCode.POLICY_VIOLATION
                result["error_message"] = TOO_MANY_PARTITIONS
                result.pop("topic_config_error_code", None)
            return {"throttle_time_ms": 0, "topics": results}
        quota = self._mutation_quota(request)
        if pending and not validate_only:
            counted = []
            for entry in pending:
                result, new, _ = entry
                # An existing topic is refused by the store: it mutates nothing.
                if self.metadata_store.topic(new.name) is None:
                    try:
                        quota.record(new.num_partitions)
                    except ThrottlingQuotaExceededError as e:
                        result["error_code"], result["error_message"] = error_of(e)
                        result.pop("topic_config_error_code", None)
                        continue
                counted.append(entry)
            pending = counted
        if pending:
            # Making thousands of logs takes seconds: not on the event loop.
            made = await asyncio.to_thread(
                self.metadata_store.create_topics,
                [new for _, new, _ in pending],
                validate_only=validate_only,
                max_partitions=self.max_partitions,
            )
            for (result, _, effective), meta in zip(pending, made, strict=True):
                if isinstance(meta, KafkaError):
                    result["error_code"], result["error_message"] = error_of(meta)
                    result.pop("topic_config_error_code", None)
                    continue
                self._created(result, meta, effective, version, validate_only)
                if "topic_config_error_code" in result:
                    # Not the creator's to see: the configs and the layout
                    # stay out (Kafka leaves them at their defaults).
                    result["configs"] = []
                    result["num_partitions"] = result["replication_factor"] = -1
        return {"throttle_time_ms": self._throttle(request, quota), "topics": results}

    def _requested_partitions(self, topics: list[CreatableTopic]) -> int:
        """The partitions a CreateTopics request asks for in all (Kafka's
        count: the default for -1, the assignments when given)."""
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self.config.num_partitions
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    def _created(
        self,
        result: CreatableTopicResultDict,
        meta: TopicMetadata,
        effective: LogConfig,
        version: int,
        validate_only: bool,
    ) -> None:
        if not validate_only:
            _log.info(
                "created topic %s (%d partitions, configs %s)",
                quoted(meta.name),
                meta.partitions,
                meta.configs,
            )
        result["topic_id"] = meta.topic_id
        if version >= 5:
            result["num_partitions"] = meta.partitions
            result["replication_factor"] = meta.replication_factor
            result["configs"] = [
                {
                    "name": e["name"],
                    "value": e["value"],
                    "read_only": e["read_only"],
                    "config_source": e["config_source"],
                    "is_sensitive": e["is_sensitive"],
                }
                for e in self.config_apis.topic_config_entries(
                    meta.configs, effective, None, synonyms=False, documentation=False
                )
            ]

    @staticmethod
    def _create_result(
        name: str, code: int, message: str | None, version: int
    ) -> CreatableTopicResultDict:
        return {
            "name": name,
            "topic_id": ZERO_UUID,
            "error_code": code,
            "error_message": message,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],  # Kafka sends an empty list on error, not null
        }

    def _new_topic(self, t: CreatableTopic) -> tuple[NewTopic, LogConfig]:
        """The checks of one CreateTopics entry that need no store: name,
        partitions, replication factor, assignment, configs."""
        name: str = t.name
        validate_topic_name(name)
        num_partitions: int = t.num_partitions
        replication_factor: int = t.replication_factor
        assignments = list(t.assignments or [])
        placed: dict[int, list[int]] | None = None
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time."
                )
            placed = self._check_assignments(assignments)
            num_partitions, replication_factor = len(placed), len(placed[0])
        else:
            if num_partitions == -1:
                num_partitions = self.config.num_partitions
            elif num_partitions <= 0:
                raise InvalidPartitionsError(
                    "Number of partitions was set to an invalid non-positive value."
                )
            if replication_factor == -1:
                replication_factor = self.config.default_replication_factor
            elif replication_factor <= 0:
                raise InvalidReplicationFactorError(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                )
            # On ZooKeeper with a controller the store assigns replicas over
            # the registered brokers (and refuses a factor above their count).
            if replication_factor > 1 and not getattr(
                self.metadata_store, "controller_managed", False
            ):
                raise InvalidReplicationFactorError(
                    f"Unable to replicate the partition {replication_factor} time(s): the "
                    f"target replication factor of {replication_factor} cannot be reached "
                    "because only 1 broker(s) are registered."
                )
        configs: dict[str, str | None] = {}
        for c in t.configs or []:
            configs[c.name] = c.value
        effective = self.config_apis.validate_topic_configs(configs)
        new = NewTopic(
            name,
            num_partitions,
            replication_factor,
            {k: v for k, v in configs.items() if v is not None},
            replica_assignment=placed,
        )
        return new, effective

    @property
    def _cluster(self) -> bool:
        """A controller places replicas over the registered brokers (ZooKeeper
        mode): the store checks an assignment's brokers against them."""
        return bool(getattr(self.metadata_store, "controller_managed", False))

    def _check_replicas(self, partition: int, replicas: list[int]) -> None:
        """One partition's replicas (Kafka's checks and messages)."""
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}."
            )
        if not self._cluster:
            unknown = sorted({b for b in replicas if b != self.broker_id})
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                )

    def _check_assignments(
        self, assignments: list[CreatableReplicaAssignment]
    ) -> dict[int, list[int]]:
        """An explicit replica assignment of a new topic, checked: partition
        → replicas. On a cluster the store checks that its brokers are registered."""
        placed: dict[int, list[int]] = {}
        for a in assignments:
            if a.partition_index in placed:
                raise InvalidReplicaAssignmentError(
                    "partitions should be a consecutive 0-based integer sequence"
                )
            placed[a.partition_index] = list(a.broker_ids)
        if len({len(r) for r in placed.values()}) != 1:
            raise InvalidReplicaAssignmentError(
                "All partitions should have the same number of replicas"
            )
        for p, replicas in sorted(placed.items()):
            self._check_replicas(p, replicas)
        if sorted(placed) != list(range(len(placed))):
            raise InvalidReplicaAssignmentError(
                "partitions should be a consecutive 0-based integer sequence"
            )
        return placed

    # ------------------------------------------------------------------ DeleteTopics

    async def handle_delete_topics_request(
        self, request: Request, body: DeleteTopicsRequest
    ) -> DeleteTopicsResponseDict:
        version = request.header.api_version
        wanted: list[tuple[str | None, str]]
        if version >= 6:
            wanted = [(t.name, t.topic_id or ZERO_UUID) for t in body.topics]
        else:
            wanted = [(n, ZERO_UUID) for n in body.topic_names]
        dup_names = duplicates(n for n, i in wanted if n is not None and i == ZERO_UUID)
        dup_ids = duplicates(i for n, i in wanted if i != ZERO_UUID)
        enabled = bool(self.config.delete_topic_enable)
        quota = self._mutation_quota(request)
        responses: list[DeletableTopicResultDict] = []
        for name, topic_id in wanted:
            out: DeletableTopicResultDict = {
                "name": name,
                "topic_id": topic_id,
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
            responses.append(out)
            code: int = ErrorCode.NONE
            msg: str | None = None
            if name is not None and topic_id != ZERO_UUID:
                code, msg = (
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            elif name is None and topic_id == ZERO_UUID:
                code, msg = ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
            elif name is not None and name in dup_names:
                code, msg = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            elif topic_id != ZERO_UUID and topic_id in dup_ids:
                code, msg = ErrorCode.INVALID_REQUEST, "Duplicate topic id."
            elif not enabled:
                code, msg = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
            else:
                meta = (
                    self.metadata_store.topic(name)
                    if name is not None
                    else self.metadata_store.topic_by_id(topic_id)
                )
                target = name if name is not None else (meta.name if meta else None)
                if target is not None and (
                    (
                        name is None
                        and not self.auth.authorize(
                            request, AclOperation.DESCRIBE, ResourceType.TOPIC, target
                        )
                    )
                    or not self.auth.authorize(
                        request, AclOperation.DELETE, ResourceType.TOPIC, target
                    )
                ):
                    code, msg = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
                elif meta is None:
                    if name is not None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        msg = "This server does not host this topic-partition."
                    else:
                        code, msg = (
                            ErrorCode.UNKNOWN_TOPIC_ID,
                            "This server does not host this topic ID.",
                        )
                else:
                    out["name"], out["topic_id"] = meta.name, meta.topic_id
                    try:
                        quota.record(meta.partitions)
                        # Closing and renaming every log: not on the event loop.
                        await asyncio.to_thread(self.metadata_store.delete_topic, meta.name)
                        _log.info("deleted topic %s", quoted(meta.name))
                        if self.on_topic_deleted is not None:
                            self.on_topic_deleted(meta)
                    except Exception as e:
                        code, msg = error_of(e)
            out["error_code"], out["error_message"] = int(code), msg
            if version < 6:
                out["topic_id"] = ZERO_UUID
        return {"throttle_time_ms": self._throttle(request, quota), "responses": responses}

    # ------------------------------------------------------------------ CreatePartitions

    async def handle_create_partitions_request(
        self, request: Request, body: CreatePartitionsRequest
    ) -> CreatePartitionsResponseDict:
        validate_only = bool(body.validate_only)
        dupes = duplicates(t.name for t in body.topics)
        results: list[CreatePartitionsTopicResultDict] = []
        wanted: list[tuple[CreatePartitionsTopicResultDict, CreatePartitionsTopic]] = []
        seen: set[str] = set()
        for t in body.topics:
            if t.name in dupes:
                if t.name not in seen:
                    seen.add(t.name)
                    results.append(
                        {"name": t.name, "error_code": ErrorCode.INVALID_REQUEST,
                         "error_message": "Duplicate topic in request."}
                    )  # fmt: skip
                continue
            result: CreatePartitionsTopicResultDict = {
                "name": t.name,
                "error_code": 0,
                "error_message": None,
            }
            results.append(result)
            if not self.auth.authorize(request, AclOperation.ALTER, ResourceType.TOPIC, t.name):
                result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                result["error_message"] = "The topic authorization is failed."
                continue
            wanted.append((result, t))
        added = 0
        for _, t in wanted:
            meta = self.metadata_store.topic(t.name)
            if meta is not None and t.count > meta.partitions:
                added += t.count - meta.partitions
        if added > MAX_PARTITIONS_PER_REQUEST:
            # Refused whole, as Kafka's controller does (KAFKA-19673).
            for result in results:
                result["error_code"] = ErrorCode.POLICY_VIOLATION
                result["error_message"] = TOO_MANY_PARTITIONS
            return {"throttle_time_ms": 0, "results": results}
        quota = self._mutation_quota(request)
        if wanted:
            # Making the new logs takes a while: not on the event loop.
            await asyncio.to_thread(self._create_all_partitions, wanted, validate_only, quota)
        return {"throttle_time_ms": self._throttle(request, quota), "results": results}

    def _create_all_partitions(
        self,
        wanted: list[tuple[CreatePartitionsTopicResultDict, CreatePartitionsTopic]],
        validate_only: bool,
        quota: ControllerMutationQuota = UNBOUNDED,
    ) -> None:
        for result, t in wanted:
            try:
                self._create_partitions(t, validate_only, quota)
            except Exception as e:
                result["error_code"], result["error_message"] = error_of(e)

    def _create_partitions(
        self,
        t: CreatePartitionsTopic,
        validate_only: bool,
        quota: ControllerMutationQuota = UNBOUNDED,
    ) -> None:
        meta = self.metadata_store.topic(t.name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"The topic '{t.name}' does not exist.")
        if meta.is_internal:
            # A group's partition of __consumer_offsets is its id's hash modulo
            # the partition count: more partitions would move groups away from
            # their committed offsets. Kafka's tools refuse this; so does pylog.
            raise PolicyViolationError(
                f"The number of partitions of the internal topic {meta.name} cannot be "
                "changed: groups would move to other partitions and lose their offsets."
            )
        count: int = t.count
        if count < meta.partitions:
            raise InvalidPartitionsError(
                f"Topic currently has {meta.partitions} partitions, which is higher than the "
                f"requested {count}."
            )
        if count == meta.partitions:
            raise InvalidPartitionsError(f"Topic already has {meta.partitions} partitions.")
        placed: list[list[int]] | None = None
        if t.assignments is not None:
            placed = [list(a.broker_ids) for a in t.assignments]
            if not self._cluster:
                unknown = sorted({b for r in placed for b in r if b != self.broker_id})
                if unknown:
                    raise InvalidReplicaAssignmentError(
                        f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
                    )
            added = count - meta.partitions
            if len(placed) != added:
                raise InvalidReplicaAssignmentError(
                    f"Increasing the number of partitions by {added} but {len(placed)} "
                    "assignments provided."
                )
            for i, replicas in enumerate(placed):
                self._check_replicas(meta.partitions + i, replicas)
            bad = [
                (meta.partitions + i, len(r))
                for i, r in enumerate(placed)
                if len(r) != meta.replication_factor
            ]
            if bad:
                ids = ", ".join(str(p) for p, _ in bad)
                factors = ", ".join(str(n) for _, n in bad)
                raise InvalidReplicaAssignmentError(
                    "Inconsistent replication factor between partitions, partition 0 has "
                    f"{meta.replication_factor} while partitions [{ids}] have replication "
                    f"factors [{factors}], respectively."
                )
        if not validate_only:
            quota.record(count - meta.partitions)
        self.metadata_store.add_partitions(
            t.name,
            count,
            validate_only=validate_only,
            max_partitions=self.max_partitions,
            replica_assignment=placed,
        )
        if not validate_only:
            _log.info("topic %s now has %d partitions", quoted(t.name), count)

    # ------------------------------------------------------------------ DeleteRecords

    async def handle_delete_records_request(
        self, request: Request, body: DeleteRecordsRequest
    ) -> DeleteRecordsResponseDict:
        offsets: dict[TopicPartition, int] = {}
        deletable = self.auth.filter_by_authorized(
            request, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in body.topics)
        )
        for t in body.topics:
            if t.name not in deletable:
                continue
            for p in t.partitions:
                offsets[TopicPartition(t.name, p.partition_index)] = p.offset
        done = self.replica_manager.delete_records(offsets)
        refused = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
        topics: list[DeleteRecordsTopicResultDict] = []
        for t in body.topics:
            parts: list[DeleteRecordsPartitionResultDict] = []
            for p in t.partitions:
                code, low = done.get(TopicPartition(t.name, p.partition_index), refused)
                parts.append(
                    {"partition_index": p.partition_index, "low_watermark": low,
                     "error_code": int(code)}
                )  # fmt: skip
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
