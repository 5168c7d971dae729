"""The vocabulary every layer shares (Kafka's ``org.apache.kafka.common``):
:class:`~pylog.common.topic_partition.TopicPartition` and the broker's clock
(:mod:`pylog.common.utils.time`). A leaf: it imports no other pylog layer.
"""
