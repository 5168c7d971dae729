"""TopicPartition: a partition of a topic (Kafka's ``org.apache.kafka.common.TopicPartition``).

Every layer names partitions with it — storage (a log's directory is
``<topic>-<partition>``, checkpoints key their entries by it), replication, the
coordinator, the controller — so it lives in the common leaf, not in any one
of them.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """A partition of a topic; its directory name is ``<topic>-<partition>``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
