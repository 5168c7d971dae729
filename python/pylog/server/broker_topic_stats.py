"""BrokerTopicStats: Kafka's ``kafka.server:type=BrokerTopicMetrics`` meters,
per topic and for all topics, as counters read at scrape time.

Kafka (``org.apache.kafka.storage.log.metrics.BrokerTopicStats``) marks, on a
leader's append of a client's records, BytesInPerSec (the batches' bytes) and
MessagesInPerSec (records appended), TotalProduceRequestsPerSec once per
partition of a Produce and FailedProduceRequestsPerSec when that partition's
append failed; on a Fetch's answer BytesOutPerSec per topic for consumers,
while a follower's bytes count only in the all-topics
ReplicationBytesOutPerSec. The Prometheus JMX exporter's Kafka rules turn each
``...PerSec`` meter into ``kafka_server_brokertopicmetrics_<name>_total``, the
per-topic ones with a ``topic`` label and the all-topics one without: the
same names here, so dashboards made for Kafka read pylog unchanged.

Plain integers on the event loop: nothing to lock, nothing on the hot path
but an addition per partition."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BROKER_TOPIC_METERS", "BrokerTopicStats"]

# Kafka's meter (without PerSec) -> what it counts. Lower-cased, they are the
# JMX exporter's names: kafka_server_brokertopicmetrics_<meter>_total.
BROKER_TOPIC_METERS: dict[str, str] = {
    "BytesIn": "Bytes of client records appended by this broker as leader (BytesInPerSec).",
    "MessagesIn": "Records appended by this broker as leader (MessagesInPerSec).",
    "BytesOut": "Record bytes sent to consumers, not followers (BytesOutPerSec).",
    "TotalProduceRequests": "Partitions of Produce requests (TotalProduceRequestsPerSec).",
    "FailedProduceRequests": "Partitions of Produce requests whose append failed "
    "(FailedProduceRequestsPerSec).",
    "TotalFetchRequests": "Partitions of consumers' Fetch requests (TotalFetchRequestsPerSec).",
    "ReplicationBytesOut": "Record bytes sent to followers, all topics "
    "(ReplicationBytesOutPerSec).",
}
_ALL_TOPICS_ONLY = {"ReplicationBytesOut"}


class BrokerTopicStats:
    def __init__(self) -> None:
        self.all_topics: dict[str, int] = dict.fromkeys(BROKER_TOPIC_METERS, 0)
        self.topics: dict[str, dict[str, int]] = {}

    def _topic(self, topic: str) -> dict[str, int]:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = {
                k: 0 for k in BROKER_TOPIC_METERS if k not in _ALL_TOPICS_ONLY
            }
        return stats

    def mark(self, topic: str, meter: str, value: int = 1) -> None:
        self._topic(topic)[meter] += value
        self.all_topics[meter] += value

    def produced(self, topic: str, *, failed: bool, size: int = 0, records: int = 0) -> None:
        """One partition of a Produce, appended (``size`` bytes of ``records``) or failed."""
        stats = self._topic(topic)
        stats["TotalProduceRequests"] += 1
        self.all_topics["TotalProduceRequests"] += 1
        if failed:
            stats["FailedProduceRequests"] += 1
            self.all_topics["FailedProduceRequests"] += 1
            return
        stats["BytesIn"] += size
        self.all_topics["BytesIn"] += size
        stats["MessagesIn"] += records
        self.all_topics["MessagesIn"] += records

    def fetched(self, topic: str, *, from_follower: bool, size: int) -> None:
        """One partition of a Fetch's answer, ``size`` record bytes."""
        if from_follower:
            self.all_topics["ReplicationBytesOut"] += size
            return
        stats = self._topic(topic)
        stats["TotalFetchRequests"] += 1
        self.all_topics["TotalFetchRequests"] += 1
        stats["BytesOut"] += size
        self.all_topics["BytesOut"] += size

    def remove(self, topic: str) -> None:
        """A deleted topic's series go (Kafka's removeMetrics); the all-topics
        totals keep what it counted."""
        self.topics.pop(topic, None)

    def series(self, meter: str) -> Iterable[tuple[dict[str, str], float]]:
        """The all-topics value (no label), then one per topic."""
        yield {}, float(self.all_topics[meter])
        if meter in _ALL_TOPICS_ONLY:
            return
        for topic, stats in sorted(self.topics.items()):
            yield {"topic": topic}, float(stats[meter])
