"""Replication: the broker's configuration (KafkaConfig), the ReplicaManager and
its partitions, the purgatory and its delayed operations (produce, fetch), and
the producer-id manager. Requests reach it from KafkaApis (``pylog.broker``);
nothing here imports the coordinator or the broker layer."""
