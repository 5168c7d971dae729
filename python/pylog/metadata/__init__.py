"""Cluster metadata: what topics exist, with how many partitions, which ids and
which config overrides, the cluster id and the producer-id blocks.

:class:`MetadataStore` (``pylog.metadata.store``) is the interface the broker
uses; :class:`JsonMetadataStore` (``pylog.metadata.json_store``) is today's
implementation for a lone broker, a JSON snapshot and a journal of the changes
since in its first log directory; :class:`ZkMetadataStore`
(``pylog.metadata.zk_store``) keeps the same data in ZooKeeper in Kafka's
layout (``pylog.metadata.zk_data``) through :class:`KafkaZkClient`
(``pylog.metadata.kafka_zk_client``), for a broker started with
``zookeeper.connect``.

The MetadataCache — each broker's view of the cluster (live brokers and their
endpoints, partition leaders and ISRs), fed by the controller's UpdateMetadata
requests and read by Metadata, FindCoordinator and DescribeCluster — will live
here too.
"""

from pylog.metadata.json_store import JOURNAL_FILE, METADATA_FILE, JsonMetadataStore
from pylog.metadata.store import (
    INTERNAL_TOPICS,
    MetadataEvent,
    MetadataStore,
    NewTopic,
    TopicMetadata,
    new_uuid,
    validate_topic_name,
)

__all__ = [
    "INTERNAL_TOPICS",
    "JOURNAL_FILE",
    "METADATA_FILE",
    "JsonMetadataStore",
    "MetadataEvent",
    "MetadataStore",
    "NewTopic",
    "TopicMetadata",
    "new_uuid",
    "validate_topic_name",
]
