"""KIP-932's share partitions on the partition leader: SharePartition (the
per-record delivery state of one group on one topic-partition), the
SharePartitionManager (ShareFetch and ShareAcknowledge over them), the
ShareSessionCache, and the Persister interface their state is saved through
(implemented by the share coordinator on ``__share_group_state``)."""
