"""API keys and the versions pylog advertises in ApiVersions."""

from __future__ import annotations

import enum


class ApiKey(enum.IntEnum):
    """Every API key of the Kafka protocol definitions pylog was built from."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74  # ListClientMetricsResources before Kafka 4.1
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    # Kafka 4.1+'s share-group offsets admin (definitions written for pylog)
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


#: (min, max) version per API that the broker serves and advertises in ApiVersions.
#: Minimums are what Kafka 4.0 advertises (KIP-896 removed the older versions,
#: except Produce, which Kafka 4 still advertises from 0 because librdkafka before
#: 2.11.1 turns compression off when the Produce minimum is above 0). Maximums are
#: Kafka 4.0's, capped at the newest version in the bundled message definitions
#: (Produce 12 and TxnOffsetCommit 5 are Kafka 4.x's transactions-v2 versions,
#: added to the definitions; Produce 13, OffsetCommit 10 and OffsetFetch 10 are
#: Kafka 4.1+'s topic ids, KIP-516; Fetch 18 is 4.1+'s follower high watermark;
#: Metadata 13's top-level error and ListOffsets 11's timestamp -6 need no more).
SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 11),
    ApiKey.METADATA: (0, 13),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    # The transaction coordinator's APIs (Kafka 4.x's ranges). AddPartitionsToTxn
    # v4+ is the brokers' form; EndTxn v5 and TxnOffsetCommit v5 are what
    # transactions-v2 producers send (KIP-890 part 2, docs/transactions.md).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 2),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    # KIP-113's replica moves between log dirs (Kafka 4 serves 1-2).
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # The ACL APIs: Kafka 4 serves 1-3 (KIP-896 dropped v0, which had no
    # pattern type).
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    # KIP-584's finalized features: kafka-features.sh upgrade / downgrade of
    # transaction.version (Kafka 4 serves 0-2; v2 answers no per-feature results).
    ApiKey.UPDATE_FEATURES: (0, 2),
    # The ZooKeeper controller's requests to brokers, at every version the
    # Kafka 3.x ZooKeeper-mode brokers served (v7 / v8 / v4 are 3.4+'s).
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    # A stopping broker's request to the controller. Version 0 has a request
    # header without a client id (a layout of its own), which no 3.x broker
    # sent any more: served from 1.
    ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
    # A Kafka 3.x ZooKeeper-mode broker's requests to its controller, at the
    # versions Kafka 3.9 sends them: AlterPartition (KIP-497; v2 topic ids,
    # v3 newIsrWithEpochs at IBP 3.5+) and AllocateProducerIds (KIP-730).
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.ALLOCATE_PRODUCER_IDS: (0, 0),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # The partition side of transactions: the coordinator's markers to each
    # leader (Kafka 4 serves 1-2, KIP-896 dropped v0; v2, KIP-1228, gives each
    # marker its transaction version), and the producers a replica remembers
    # (KIP-664).
    ApiKey.WRITE_TXN_MARKERS: (1, 2),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    # KIP-714's client telemetry, and the listing of its subscriptions
    # (ListClientMetricsResources v0; v1 is Kafka 4.1's ListConfigResources, KIP-1142).
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
    ApiKey.LIST_CONFIG_RESOURCES: (0, 1),
}

#: The consumer-group APIs: the codec handles them; the broker merges this table
#: into what it advertises once the group coordinator serves them.
GROUP_API_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.OFFSET_COMMIT: (2, 10),
    ApiKey.OFFSET_FETCH: (1, 10),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # KIP-848's consumer groups (group.protocol=consumer): v1 adds the regex
    # subscription; Kafka 4.0 serves both.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # KIP-932's share groups, as Kafka 4.1+ serves them (v0 was 4.0's early
    # access, removed in 4.1; ShareFetch/ShareAcknowledge v2 add KIP-1222's Renew).
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (1, 1),
    ApiKey.SHARE_FETCH: (1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (1, 2),
    # The share coordinator's inter-broker APIs (Kafka 4.1+'s versions; v1 of
    # Write and ReadSummary carry DeliveryCompleteCount).
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    # kafka-share-groups.sh --describe --offsets / --reset-offsets / --delete-offsets
    # (DescribeShareGroupOffsets v1 adds the lag).
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

#: The message-definition file stem of every API the codec carries.
SCHEMA_NAMES: dict[int, str] = {
    ApiKey.PRODUCE: "Produce",
    ApiKey.FETCH: "Fetch",
    ApiKey.LIST_OFFSETS: "ListOffsets",
    ApiKey.METADATA: "Metadata",
    ApiKey.LEADER_AND_ISR: "LeaderAndIsr",
    ApiKey.STOP_REPLICA: "StopReplica",
    ApiKey.UPDATE_METADATA: "UpdateMetadata",
    ApiKey.CONTROLLED_SHUTDOWN: "ControlledShutdown",
    ApiKey.ALTER_PARTITION: "AlterPartition",
    ApiKey.ALLOCATE_PRODUCER_IDS: "AllocateProducerIds",
    ApiKey.ELECT_LEADERS: "ElectLeaders",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "ListPartitionReassignments",
    ApiKey.OFFSET_COMMIT: "OffsetCommit",
    ApiKey.OFFSET_FETCH: "OffsetFetch",
    ApiKey.FIND_COORDINATOR: "FindCoordinator",
    ApiKey.JOIN_GROUP: "JoinGroup",
    ApiKey.HEARTBEAT: "Heartbeat",
    ApiKey.LEAVE_GROUP: "LeaveGroup",
    ApiKey.SYNC_GROUP: "SyncGroup",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroups",
    ApiKey.LIST_GROUPS: "ListGroups",
    ApiKey.SASL_HANDSHAKE: "SaslHandshake",
    ApiKey.API_VERSIONS: "ApiVersions",
    ApiKey.CREATE_TOPICS: "CreateTopics",
    ApiKey.DELETE_TOPICS: "DeleteTopics",
    ApiKey.DELETE_RECORDS: "DeleteRecords",
    ApiKey.INIT_PRODUCER_ID: "InitProducerId",
    ApiKey.ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    ApiKey.ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    ApiKey.END_TXN: "EndTxn",
    ApiKey.TXN_OFFSET_COMMIT: "TxnOffsetCommit",
    ApiKey.DESCRIBE_TRANSACTIONS: "DescribeTransactions",
    ApiKey.LIST_TRANSACTIONS: "ListTransactions",
    ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
    ApiKey.DESCRIBE_CONFIGS: "DescribeConfigs",
    ApiKey.ALTER_CONFIGS: "AlterConfigs",
    ApiKey.ALTER_REPLICA_LOG_DIRS: "AlterReplicaLogDirs",
    ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs",
    ApiKey.CREATE_PARTITIONS: "CreatePartitions",
    ApiKey.DELETE_GROUPS: "DeleteGroups",
    ApiKey.INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ApiKey.OFFSET_DELETE: "OffsetDelete",
    ApiKey.DESCRIBE_CLUSTER: "DescribeCluster",
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: "DescribeTopicPartitions",
    ApiKey.SASL_AUTHENTICATE: "SaslAuthenticate",
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: "DescribeUserScramCredentials",
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: "AlterUserScramCredentials",
    ApiKey.DESCRIBE_ACLS: "DescribeAcls",
    ApiKey.CREATE_ACLS: "CreateAcls",
    ApiKey.DELETE_ACLS: "DeleteAcls",
    ApiKey.DESCRIBE_CLIENT_QUOTAS: "DescribeClientQuotas",
    ApiKey.ALTER_CLIENT_QUOTAS: "AlterClientQuotas",
    ApiKey.UPDATE_FEATURES: "UpdateFeatures",
    ApiKey.CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
    ApiKey.CONSUMER_GROUP_DESCRIBE: "ConsumerGroupDescribe",
    ApiKey.WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ApiKey.DESCRIBE_PRODUCERS: "DescribeProducers",
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: "GetTelemetrySubscriptions",
    ApiKey.PUSH_TELEMETRY: "PushTelemetry",
    ApiKey.LIST_CONFIG_RESOURCES: "ListConfigResources",
    ApiKey.SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat",
    ApiKey.SHARE_GROUP_DESCRIBE: "ShareGroupDescribe",
    ApiKey.SHARE_FETCH: "ShareFetch",
    ApiKey.SHARE_ACKNOWLEDGE: "ShareAcknowledge",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: "InitializeShareGroupState",
    ApiKey.READ_SHARE_GROUP_STATE: "ReadShareGroupState",
    ApiKey.WRITE_SHARE_GROUP_STATE: "WriteShareGroupState",
    ApiKey.DELETE_SHARE_GROUP_STATE: "DeleteShareGroupState",
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: "ReadShareGroupStateSummary",
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: "DescribeShareGroupOffsets",
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: "AlterShareGroupOffsets",
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: "DeleteShareGroupOffsets",
}
