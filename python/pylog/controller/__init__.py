"""The controller: one broker of the cluster, elected through the metadata
store, that decides partition leadership and tells the other brokers.

KafkaController will live here, with the partition state machine
(NewPartition, OnlinePartition, OfflinePartition, NonExistentPartition) and the
replica state machine (NewReplica, OnlineReplica, OfflineReplica,
ReplicaDeletionStarted, …) it drives, and the ControllerChannelManager that
sends LeaderAndIsr, UpdateMetadata and StopReplica to each broker. Until then a
single pylog broker is its own controller: the admin APIs change the metadata
store directly and its listeners bring the ReplicaManager in line.
"""
