"""The response bodies some handlers build as dicts rather than as the
generated response classes, typed by TypedDicts of the same fields: each
``XDict`` stands for the class ``X`` of the message's module
(tests/test_broker_typing.py checks that every key is one of its fields). A key
left out takes the field's default, as with the class.

* Produce and Fetch (``produce_fetch_apis``), for speed: the generated encoders
  read each field with ``.get()``, a C call on a dict but a Python method on a
  Struct, so building and encoding the classes costs 1.7-3x the dicts' time
  (measured: ProduceResponse v9, one partition 2.7 -> 4.6 us, ten 12 -> 26 us;
  FetchResponse v12, one partition 3.1 -> 5.6 us, ten 12 -> 37 us).
* The topic and cluster handlers (``topic_apis``, ``cluster_apis``): typed
  dicts still; moving them to the response classes is a change of its own.
"""

from __future__ import annotations

from typing import TypedDict

from pylog.protocol import Records
from pylog.protocol.messages.fetch_response import AbortedTransaction
from pylog.protocol.messages.produce_response import BatchIndexAndErrorMessage

# ---------------------------------------------------------------- Produce


class LeaderIdAndEpochDict(TypedDict):
    leader_id: int
    leader_epoch: int


class NodeEndpointDict(TypedDict):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionProduceResponseDict(TypedDict, total=False):
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: list[BatchIndexAndErrorMessage]
    error_message: str | None
    current_leader: LeaderIdAndEpochDict | None  # v10+ (KIP-951)


class TopicProduceResponseDict(TypedDict):
    name: str
    topic_id: str  # v13+ (KIP-516); the name before
    partition_responses: list[PartitionProduceResponseDict]


class ProduceResponseDict(TypedDict, total=False):
    responses: list[TopicProduceResponseDict]
    throttle_time_ms: int
    node_endpoints: list[NodeEndpointDict]  # v10+ (KIP-951)


# ---------------------------------------------------------------- Fetch


class EpochEndOffsetDict(TypedDict):
    epoch: int
    end_offset: int


class PartitionDataDict(TypedDict, total=False):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: EpochEndOffsetDict | None
    current_leader: LeaderIdAndEpochDict | None
    aborted_transactions: list[AbortedTransaction] | None
    preferred_read_replica: int
    records: Records | None


class FetchableTopicResponseDict(TypedDict, total=False):
    topic: str  # up to v12
    topic_id: str  # v13+
    partitions: list[PartitionDataDict]


class FetchResponseDict(TypedDict, total=False):
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchableTopicResponseDict]
    node_endpoints: list[NodeEndpointDict]  # v16+ (KIP-951)


# ---------------------------------------------------------------- CreateTopics


class CreatableTopicConfigsDict(TypedDict):
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool


class CreatableTopicResultDict(TypedDict, total=False):
    name: str
    topic_id: str
    error_code: int
    error_message: str | None
    num_partitions: int
    replication_factor: int
    configs: list[CreatableTopicConfigsDict] | None
    topic_config_error_code: int


class CreateTopicsResponseDict(TypedDict):
    throttle_time_ms: int
    topics: list[CreatableTopicResultDict]


# ---------------------------------------------------------------- DeleteTopics


class DeletableTopicResultDict(TypedDict):
    name: str | None
    topic_id: str
    error_code: int
    error_message: str | None


class DeleteTopicsResponseDict(TypedDict):
    throttle_time_ms: int
    responses: list[DeletableTopicResultDict]


# ---------------------------------------------------------------- CreatePartitions


class CreatePartitionsTopicResultDict(TypedDict):
    name: str
    error_code: int
    error_message: str | None


class CreatePartitionsResponseDict(TypedDict):
    throttle_time_ms: int
    results: list[CreatePartitionsTopicResultDict]


# ---------------------------------------------------------------- DeleteRecords


class DeleteRecordsPartitionResultDict(TypedDict):
    partition_index: int
    low_watermark: int
    error_code: int


class DeleteRecordsTopicResultDict(TypedDict):
    name: str
    partitions: list[DeleteRecordsPartitionResultDict]


class DeleteRecordsResponseDict(TypedDict):
    throttle_time_ms: int
    topics: list[DeleteRecordsTopicResultDict]


# ---------------------------------------------------------------- Metadata


class MetadataResponseBrokerDict(TypedDict):
    node_id: int
    host: str
    port: int
    rack: str | None


class MetadataResponsePartitionDict(TypedDict):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]


class MetadataResponseTopicDict(TypedDict, total=False):
    error_code: int
    name: str | None
    topic_id: str
    is_internal: bool
    partitions: list[MetadataResponsePartitionDict]
    topic_authorized_operations: int


class MetadataResponseDict(TypedDict, total=False):
    throttle_time_ms: int
    brokers: list[MetadataResponseBrokerDict]
    cluster_id: str | None
    controller_id: int
    topics: list[MetadataResponseTopicDict]
    cluster_authorized_operations: int


# ---------------------------------------------------------------- DescribeCluster


class DescribeClusterBrokerDict(TypedDict):
    broker_id: int
    host: str
    port: int
    rack: str | None


class DescribeClusterResponseDict(TypedDict):
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    endpoint_type: int
    cluster_id: str
    controller_id: int
    brokers: list[DescribeClusterBrokerDict]
    cluster_authorized_operations: int


# ---------------------------------------------------------------- DescribeLogDirs


class DescribeLogDirsPartitionDict(TypedDict):
    partition_index: int
    partition_size: int
    offset_lag: int
    is_future_key: bool


class DescribeLogDirsTopicDict(TypedDict):
    name: str
    partitions: list[DescribeLogDirsPartitionDict]


class DescribeLogDirsResultDict(TypedDict):
    error_code: int
    log_dir: str
    topics: list[DescribeLogDirsTopicDict]
    total_bytes: int
    usable_bytes: int


class DescribeLogDirsResponseDict(TypedDict):
    throttle_time_ms: int
    error_code: int
    results: list[DescribeLogDirsResultDict]
