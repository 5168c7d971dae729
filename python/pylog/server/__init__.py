"""The broker: its configuration and lifecycle (KafkaServer), KafkaApis, the
ReplicaManager and its partitions, the purgatory and the metadata store."""
