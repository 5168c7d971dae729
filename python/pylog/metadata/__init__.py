"""Cluster metadata: what topics exist, with how many partitions, which ids and
which config overrides, the cluster id and the producer-id blocks.

:class:`MetadataStore` (``pylog.metadata.store``) is the interface the broker
uses; :class:`JsonMetadataStore` (``pylog.metadata.json_store``) is today's
implementation, a JSON snapshot and a journal of the changes since in the
first log directory of a single broker. A ZooKeeper-backed store goes beside it.

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
