"""The broker: the layer that composes the others into one Kafka broker.

KafkaServer (``kafka_server``) runs the lifecycle: it loads the logs, binds the
listeners, builds the metadata store, the ReplicaManager, the GroupCoordinator
and KafkaApis, and shuts them down in order. KafkaApis (``kafka_apis``) routes
each request by API key through one table to the handlers, which are split by
concern as Kafka's are: produce and fetch, topics, configs, cluster, groups and
SASL (``*_apis`` modules).
"""
