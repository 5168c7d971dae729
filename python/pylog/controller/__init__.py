"""The controller: one broker of the cluster, elected through ZooKeeper, that
decides partition leadership and tells the other brokers (ZooKeeper mode).

- ``kafka_controller``: KafkaController — election through ``/controller`` and
  ``/controller_epoch``, failover, broker start-up and failure, topic
  creation, partition increase and deletion, ISR change notifications,
  controlled shutdown, preferred and unclean leader elections (and the
  automatic leader balance check), partition reassignment (KIP-455).
- ``election``: Kafka's leader election strategies (offline partition,
  reassignment, preferred replica, controlled shutdown).
- ``controller_event_manager``: the single event queue its work runs on.
- ``controller_context``: what the controller knows of the cluster.
- ``controller_channel_manager``: a request queue and sender per live broker
  (LeaderAndIsr, UpdateMetadata, StopReplica), and the request batch.
- ``partition_state_machine`` / ``replica_state_machine``: Kafka's states and
  the leader election for an offline partition.

A broker without ``zookeeper.connect`` has no controller: the admin APIs
change its JSON store directly and the store's listeners bring the
ReplicaManager in line.
"""
