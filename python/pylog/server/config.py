"""KafkaConfig: the broker's configuration, one table of Kafka's keys.

``BROKER_CONFIG`` holds the keys the broker itself reads (identity, listeners,
the network layer's limits, topic-creation defaults, metrics) in Kafka's names,
types and defaults, in the style of :mod:`pylog.log.config`; the storage keys
(``log.*``, ``message.max.bytes``, ``min.insync.replicas``, …) come from
``BROKER_LOG_CONFIG`` unchanged. ``ALL_BROKER_CONFIG`` is the two together and
is what validation, ``pylog configs --broker`` and the docs read.

Deliberate differences from Kafka, each because pylog is a one-command broker:

* ``listeners`` defaults to ``PLAINTEXT://127.0.0.1:9092`` (Kafka binds every
  interface) so a broker started by hand is not reachable from the network;
* ``node.id``/``broker.id`` both unset give broker id 0 (a lone broker);
* a lone broker (no ``zookeeper.connect``) creates ``__consumer_offsets``
  with one replica unless ``offsets.topic.replication.factor`` is set (its
  default is Kafka's 3, which a cluster follows).

Unknown keys (an old ``server.properties``' retired keys…) are kept and logged
once, as Kafka does, rather than refused.

``zookeeper.connect`` makes the broker a member of a ZooKeeper-mode cluster
(docs/cluster.md): its metadata lives in ZooKeeper's znodes and it registers
under ``/brokers/ids/<broker.id>``. Brokers of one cluster need distinct ids:
without ``broker.id`` (or ``node.id``) such a broker takes the one kept in its
log directories' ``meta.properties``, or a new one from ZooKeeper above
``reserved.broker.max.id`` (Kafka's ``broker.id.generation.enable``);
``broker_id`` is -1 until start-up has found it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pylog.config import (
    INT_MAX,
    LONG_MAX,
    AtLeast,
    Between,
    ConfigKey,
    ConfigType,
    HostCounts,
    ListOf,
    OneOf,
    config_table,
    parse_properties,
)
from pylog.errors import InvalidConfigurationError
from pylog.log.config import BROKER_LOG_CONFIG, BrokerLogConfig
from pylog.security.acl_authorizer import AUTHORIZER_CLASS_NAMES

#: A parsed broker config value: bool, int, float, str or list[str], as its
#: key's ConfigType says. Any, not that union: which one depends on the key's
#: name, known only at run time, and every reader (``get("node.id") >= 0``)
#: would otherwise narrow a union it already knows the answer to. The keys the
#: broker reads often have typed properties below.
ConfigValue: TypeAlias = Any

__all__ = [
    "ALL_BROKER_CONFIG",
    "BROKER_CONFIG",
    "ConfigValue",
    "EndPoint",
    "KafkaConfig",
    "parse_listeners",
]

_log = logging.getLogger("pylog.server")

B, I, L, D, S, LS, P = (  # noqa: E741  (short type names keep the table one key per line)
    ConfigType.BOOLEAN,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
_MIB = 1024 * 1024
_DEFAULT_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT",
    "SSL:SSL",
    "SASL_PLAINTEXT:SASL_PLAINTEXT",
    "SASL_SSL:SASL_SSL",
    "CONTROLLER:PLAINTEXT",
)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


# fmt: off
BROKER_CONFIG: dict[str, ConfigKey] = config_table(
    # ---- identity
    ConfigKey("node.id", I, -1, "This broker's id (KRaft name); broker.id when unset, 0 when "
              "neither is set.", AtLeast(-1), "high"),
    ConfigKey("broker.id", I, -1, "This broker's id (ZooKeeper-mode name of node.id).",
              AtLeast(-1), "high"),
    ConfigKey("broker.id.generation.enable", B, True, "With zookeeper.connect and no "
              "broker.id, take one from ZooKeeper (/brokers/seqid) above "
              "reserved.broker.max.id, and keep it in meta.properties.", None, "medium"),
    ConfigKey("reserved.broker.max.id", I, 1000, "Highest broker.id a user may configure; "
              "generated ids start above it.", AtLeast(0), "medium"),
    ConfigKey("broker.rack", S, None, "Rack of the broker, reported in Metadata.", None,
              "medium"),
    ConfigKey("cluster.id", S, None, "Cluster id reported to clients; generated and kept in "
              "the metadata store when unset.", None, "low"),
    # ---- ZooKeeper (a cluster: docs/cluster.md)
    ConfigKey("zookeeper.connect", S, None, "ZooKeeper connection string, "
              "host:port[,host:port...][/chroot]; unset: a lone broker keeping its metadata "
              "beside its logs.", None, "high"),
    ConfigKey("zookeeper.session.timeout.ms", I, 18_000, "ZooKeeper session timeout: a "
              "broker silent this long loses its registration.", AtLeast(1), "high"),
    ConfigKey("zookeeper.connection.timeout.ms", I, None, "Longest wait for the ZooKeeper "
              "connection at start-up; zookeeper.session.timeout.ms when unset.", AtLeast(1),
              "high"),
    ConfigKey("zookeeper.max.in.flight.requests", I, 10, "ZooKeeper requests the broker has "
              "in flight at once.", AtLeast(1), "high"),
    # ---- listeners
    ConfigKey("listeners", LS, ("PLAINTEXT://127.0.0.1:9092",),
              "Comma-separated NAME://host:port the broker listens on; an empty host binds "
              "every interface, port 0 an ephemeral port.", None, "high"),
    ConfigKey("advertised.listeners", LS, None, "NAME://host:port given to clients in "
              "Metadata; listeners when unset (port 0 becomes the bound port).", None, "high"),
    ConfigKey("listener.security.protocol.map", LS, _DEFAULT_PROTOCOL_MAP,
              "Listener name to security protocol, NAME:PROTOCOL pairs.", None, "low"),
    ConfigKey("inter.broker.listener.name", S, None, "Listener brokers use between "
              "themselves; the first listener when unset.", None, "medium"),
    ConfigKey("security.inter.broker.protocol", S, "PLAINTEXT", "Security protocol between "
              "brokers when inter.broker.listener.name is unset: the listener of that name "
              "(set at most one of the two). Both unset: the first listener.",
              OneOf(*SECURITY_PROTOCOLS), "medium"),
    # ---- TLS (docs/security.md); each may be set per listener as
    # listener.name.<listener>.<key>
    ConfigKey("ssl.keystore.type", S, "JKS", "Format of the keystore: PEM or PKCS12 (Java's "
              "JKS is refused). At the default the keystore file's content decides.", None,
              "medium"),
    ConfigKey("ssl.keystore.location", S, None, "The keystore file: for PEM the private key "
              "and the certificate chain in one file.", None, "high"),
    ConfigKey("ssl.keystore.password", P, None, "Password of a PKCS12 keystore file.", None,
              "high"),
    ConfigKey("ssl.keystore.key", P, None, "The private key in PEM (PKCS#8), inline, with "
              "ssl.keystore.certificate.chain.", None, "high"),
    ConfigKey("ssl.keystore.certificate.chain", P, None, "The certificate chain in PEM, "
              "inline, with ssl.keystore.key.", None, "high"),
    ConfigKey("ssl.key.password", P, None, "Password of an encrypted private key.", None,
              "high"),
    ConfigKey("ssl.truststore.type", S, "JKS", "Format of the truststore: PEM or PKCS12 (as "
              "ssl.keystore.type).", None, "medium"),
    ConfigKey("ssl.truststore.location", S, None, "The truststore file: the CA certificates "
              "client certificates are checked against (the system's CAs when unset).", None,
              "high"),
    ConfigKey("ssl.truststore.password", P, None, "Password of a PKCS12 truststore.", None,
              "high"),
    ConfigKey("ssl.truststore.certificates", P, None, "The trusted certificates in PEM, "
              "inline.", None, "high"),
    ConfigKey("ssl.enabled.protocols", LS, ("TLSv1.2", "TLSv1.3"), "TLS versions accepted.",
              ListOf("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"), "medium"),
    ConfigKey("ssl.protocol", S, "TLSv1.3", "Accepted for compatibility: "
              "ssl.enabled.protocols bounds the versions.", None, "medium"),
    ConfigKey("ssl.client.auth", S, "none", "Client certificates: none, requested (checked "
              "when given) or required (mutual TLS).", OneOf("none", "requested", "required"),
              "medium"),
    ConfigKey("ssl.principal.mapping.rules", S, "DEFAULT", "Rules mapping a client "
              "certificate's DN to the principal name: DEFAULT, RULE:pattern/replacement/[LU].",
              None, "low"),
    ConfigKey("ssl.cipher.suites", LS, (), "Not supported: OpenSSL's defaults for the "
              "enabled protocols are used; setting it is an error.", None, "low"),
    ConfigKey("ssl.endpoint.identification.algorithm", S, "https", "https: this broker checks "
              "the host name of the brokers it connects to against their certificates; empty "
              "turns that off.", None, "low"),
    # ---- SASL (docs/security.md)
    ConfigKey("sasl.enabled.mechanisms", LS, ("GSSAPI",), "SASL mechanisms of the SASL "
              "listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI, "
              "Kerberos, is not served: a SASL listener needs this set).", None, "medium"),
    ConfigKey("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "SASL mechanism brokers "
              "log in to each other with on a SASL inter-broker listener.", None, "medium"),
    ConfigKey("sasl.server.max.receive.size", I, 524_288, "Largest request frame before a "
              "SASL connection has authenticated.", AtLeast(1), "low"),
    ConfigKey("connections.max.reauth.ms", L, 0, "Longest SASL session before the client "
              "must re-authenticate (KIP-368); 0: unbounded. Also per listener and "
              "mechanism: listener.name.<l>.<mechanism>.connections.max.reauth.ms.",
              AtLeast(0), "medium"),
    # Kafka's GSSAPI (Kerberos) settings, dynamic in Kafka (its
    # DynamicListenerConfig): accepted and stored so that configuration
    # tools and clients that set them are answered as Kafka answers; pylog
    # has no GSSAPI, so they change nothing.
    ConfigKey("sasl.kerberos.service.name", S, None, "Accepted for compatibility: no GSSAPI "
              "here.", None, "medium"),
    ConfigKey("sasl.kerberos.kinit.cmd", S, "/usr/bin/kinit", "Accepted for compatibility: "
              "no GSSAPI here.", None, "low"),
    ConfigKey("sasl.kerberos.ticket.renew.window.factor", D, 0.8, "Accepted for "
              "compatibility: no GSSAPI here.", None, "low"),
    ConfigKey("sasl.kerberos.ticket.renew.jitter", D, 0.05, "Accepted for compatibility: no "
              "GSSAPI here.", None, "low"),
    ConfigKey("sasl.kerberos.min.time.before.relogin", L, 60_000, "Accepted for "
              "compatibility: no GSSAPI here.", None, "low"),
    ConfigKey("sasl.kerberos.principal.to.local.rules", LS, ("DEFAULT",), "Accepted for "
              "compatibility: no GSSAPI here.", None, "medium"),
    ConfigKey("connection.failed.authentication.delay.ms", I, 100, "Delay before answering "
              "a failed authentication (and closing), which slows password guessing.",
              AtLeast(0), "low"),
    # ---- authorization (docs/security.md#acls)
    ConfigKey("authorizer.class.name", S, "", "Turns ACLs on: Kafka's "
              "kafka.security.authorizer.AclAuthorizer or "
              "org.apache.kafka.metadata.authorizer.StandardAuthorizer (alike here); empty: "
              "no authorization.", OneOf("", *AUTHORIZER_CLASS_NAMES), "low"),
    ConfigKey("super.users", S, None, "Principals allowed everything, whatever the ACLs, "
              "separated by ';' (User:admin;User:broker).", None, "low"),
    ConfigKey("allow.everyone.if.no.acl.found", B, False, "With an authorizer, allow a "
              "request on a resource no ACL applies to (default: refuse it).", None, "low"),
    # ---- network: the keys Kafka's SocketServer reads (kafka.network.SocketServer)
    ConfigKey("num.network.threads", I, 3, "Threads that send the part of a large response "
              "(segment bytes, sendfile) the socket did not take at once; the connections "
              "themselves are asyncio protocol objects on one event loop.", AtLeast(1), "high"),
    ConfigKey("num.io.threads", I, 8, "Accepted for compatibility: request handlers are "
              "asyncio tasks; blocking disk work goes to worker threads.", AtLeast(1),
              "high"),
    ConfigKey("queued.max.requests", I, 500, "Requests received but not yet taken by a "
              "handler before the broker stops reading from sockets.", AtLeast(1), "high"),
    ConfigKey("queued.max.request.bytes", L, -1, "Bytes of requests read (or being read) "
              "and not yet answered before the broker stops reading new requests from "
              "sockets; -1 (or 0) for no bound. Each connection is also held to 1 MiB of "
              "unanswered requests plus the one being read.", AtLeast(-1), "medium"),
    ConfigKey("socket.request.max.bytes", I, 100 * _MIB, "Largest request frame; a larger "
              "size prefix closes the connection.", AtLeast(1), "high"),
    ConfigKey("socket.send.buffer.bytes", I, 100 * 1024, "SO_SNDBUF of client sockets; -1 "
              "for the OS default.", AtLeast(-1), "high"),
    ConfigKey("socket.receive.buffer.bytes", I, 100 * 1024, "SO_RCVBUF of client sockets; -1 "
              "for the OS default.", AtLeast(-1), "high"),
    ConfigKey("socket.listen.backlog.size", I, 50, "Listen backlog of each listener.",
              AtLeast(1), "medium"),
    ConfigKey("connections.max.idle.ms", L, 600_000, "Idle time after which a connection "
              "with no request in flight is closed.", AtLeast(1), "medium"),
    ConfigKey("max.connections", I, INT_MAX, "Most connections the broker accepts at once; "
              "further ones are closed as they arrive.", AtLeast(0), "medium"),
    ConfigKey("max.connections.per.ip", I, INT_MAX, "Most connections from one address.",
              AtLeast(0), "medium"),
    ConfigKey("max.connections.per.ip.overrides", S, "", "Per host or IP, the most "
              "connections from it, over max.connections.per.ip: host:count,host:count.",
              HostCounts(), "medium"),
    ConfigKey("max.connection.creation.rate", I, INT_MAX, "Most new connections the broker "
              "accepts per second (KIP-612); a connection over it is held before it is "
              "served. Per listener: listener.name.<l>.max.connection.creation.rate. The "
              "inter-broker listener is exempt when there are others.", AtLeast(0),
              "medium"),
    # ---- topics and produce
    ConfigKey("num.partitions", I, 1, "Partitions of an auto-created topic, and of a "
              "CreateTopics request that asks for the default (-1).", AtLeast(1), "medium"),
    ConfigKey("default.replication.factor", I, 1, "Replication factor of auto-created "
              "topics and of CreateTopics asking for the default (-1).", AtLeast(1),
              "medium"),
    ConfigKey("auto.create.topics.enable", B, True, "Create a topic when Metadata names one "
              "that does not exist.", None, "high"),
    ConfigKey("delete.topic.enable", B, True, "Allow DeleteTopics.", None, "high"),
    ConfigKey("telemetry.max.bytes", I, 1024 * 1024, "Largest metrics payload a client may "
              "push (KIP-714's PushTelemetry; larger is TELEMETRY_TOO_LARGE).", AtLeast(1),
              "medium"),
    ConfigKey("max.broker.partitions", I, 10_000, "Most partitions this broker holds, "
              "internal topics included (KIP-578's name); CreateTopics, CreatePartitions "
              "and auto-creation past it are refused with POLICY_VIOLATION. Independently, "
              "one request may add at most 10,000 partitions, as Kafka's controller.",
              AtLeast(1), "medium"),
    ConfigKey("replica.lag.time.max.ms", L, 30_000, "Time a follower may lag before it "
              "leaves the ISR.", AtLeast(0), "high"),
    ConfigKey("max.request.partition.size.limit", I, 2000, "Most partitions one "
              "DescribeTopicPartitions response holds (KIP-966); the client's own limit "
              "counts below it.", AtLeast(1), "low"),
    ConfigKey("leader.replication.throttled.rate", L, LONG_MAX, "Bytes per second a leader "
              "sends to the out-of-sync replicas named in its topics' "
              "leader.replication.throttled.replicas (Kafka's ReplicationQuotaManager); set "
              "dynamically, as kafka-reassign-partitions --throttle does.", AtLeast(0),
              "medium"),
    ConfigKey("follower.replication.throttled.rate", L, LONG_MAX, "Bytes per second a "
              "follower fetches for its out-of-sync replicas named in its topics' "
              "follower.replication.throttled.replicas.", AtLeast(0), "medium"),
    ConfigKey("replication.quota.window.num", I, 11, "Samples the replication quotas' rates "
              "are measured over.", AtLeast(1), "low"),
    ConfigKey("replication.quota.window.size.seconds", I, 1, "Length of each replication "
              "quota sample.", AtLeast(1), "low"),
    ConfigKey("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX, "Bytes per "
              "second this broker copies for the replicas it moves between its own log "
              "directories (AlterReplicaLogDirs), all moves together (Kafka's "
              "AlterLogDirsReplication quota); set dynamically, as "
              "kafka-reassign-partitions --replica-alter-log-dirs-throttle does.", AtLeast(0),
              "medium"),
    ConfigKey("alter.log.dirs.replication.quota.window.num", I, 11, "Samples the move "
              "throttle's rate is measured over.", AtLeast(1), "low"),
    ConfigKey("alter.log.dirs.replication.quota.window.size.seconds", I, 1, "Length of each "
              "move throttle sample.", AtLeast(1), "low"),
    ConfigKey("num.replica.alter.log.dirs.threads", I, None, "Tasks that copy the replicas "
              "moving between this broker's log directories, each moving one replica at a "
              "time; unset: one per log directory.", AtLeast(1), "high"),
    ConfigKey("num.replica.fetchers", I, 1, "Fetchers per source broker that replicate "
              "its partitions to this one.", AtLeast(1), "high"),
    ConfigKey("replica.fetch.max.bytes", I, _MIB, "Bytes a follower asks per partition in "
              "a Fetch (a larger first batch still comes whole).", AtLeast(0), "medium"),
    ConfigKey("replica.fetch.min.bytes", I, 1, "Bytes a follower's Fetch waits for.",
              AtLeast(0), "high"),
    ConfigKey("replica.fetch.wait.max.ms", I, 500, "Longest wait of a follower's Fetch on "
              "the leader; below replica.lag.time.max.ms.", AtLeast(0), "medium"),
    ConfigKey("replica.fetch.response.max.bytes", I, 10 * _MIB, "Bytes a follower asks for "
              "in one Fetch over all partitions.", AtLeast(0), "medium"),
    ConfigKey("replica.fetch.backoff.ms", I, 1_000, "Pause of a follower after a fetch "
              "error.", AtLeast(0), "medium"),
    ConfigKey("replica.socket.timeout.ms", I, 30_000, "Socket timeout of a follower's "
              "requests to its leader.", None, "high"),
    ConfigKey("replica.socket.receive.buffer.bytes", I, 64 * 1024, "SO_RCVBUF of a "
              "follower's connection to its leader (set before it connects); -1 for the OS "
              "default.", None, "high"),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", L, 5_000, "How often each "
              "partition's high watermark is saved to replication-offset-checkpoint.",
              AtLeast(1), "high"),
    ConfigKey("fetch.max.bytes", I, 55 * _MIB, "Largest Fetch response the broker "
              "builds.", AtLeast(1024), "medium"),
    ConfigKey("request.timeout.ms", I, 30_000, "Timeout for the broker's own requests.",
              AtLeast(0), "low"),
    # ---- client quotas (Kafka's ClientQuotaManagerConfig; docs/security.md)
    ConfigKey("quota.window.num", I, 11, "Samples the client quotas' rates are measured "
              "over.", AtLeast(1), "low"),
    ConfigKey("quota.window.size.seconds", I, 1, "Length of each client quota sample.",
              AtLeast(1), "low"),
    # ---- dynamic password configs (Kafka's PasswordEncoderConfigs; docs/operations.md)
    ConfigKey("password.encoder.secret", P, None, "Secret that encrypts the dynamic "
              "password configs (listener.name.<l>.ssl.keystore.password, ...) kept in "
              "/config/brokers/<id>; the same on every broker of a cluster.", None, "medium"),
    ConfigKey("password.encoder.old.secret", P, None, "The previous password.encoder.secret, "
              "while rotating it: stored passwords it encrypted still decode.", None, "medium"),
    ConfigKey("password.encoder.keyfactory.algorithm", S, None, "PBKDF2 variant deriving the "
              "key: PBKDF2WithHmacSHA512 (when unset), PBKDF2WithHmacSHA256 or "
              "PBKDF2WithHmacSHA1.", None, "low"),
    ConfigKey("password.encoder.cipher.algorithm", S, "AES/CBC/PKCS5Padding", "Cipher of the "
              "dynamic passwords: AES/CBC/PKCS5Padding or AES/GCM/NoPadding.",
              OneOf("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding"), "low"),
    ConfigKey("password.encoder.key.length", I, 128, "Key length in bits (128, 192 or 256 "
              "for AES).", AtLeast(8), "low"),
    ConfigKey("password.encoder.iterations", I, 4096, "PBKDF2 iterations.", AtLeast(1024),
              "low"),
    ConfigKey("controller.quota.window.num", I, 11, "Samples of the controller mutation "
              "quota (controller_mutation_rate, KIP-599): its token bucket holds this many "
              "windows of credits.", AtLeast(1), "low"),
    ConfigKey("controller.quota.window.size.seconds", I, 1, "Length of each controller "
              "mutation quota sample.", AtLeast(1), "low"),
    # ---- group coordinator and offset manager (Kafka's names and defaults)
    ConfigKey("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets "
              "(fixed once the topic exists).", AtLeast(1), "high"),
    ConfigKey("offsets.topic.replication.factor", I, 3, "Replication factor of "
              "__consumer_offsets; on a cluster it is not created (groups have no "
              "coordinator) until this many brokers are alive. A lone broker uses 1 "
              "unless it is set.", AtLeast(1), "high"),
    ConfigKey("offsets.topic.segment.bytes", I, 100 * _MIB, "segment.bytes of "
              "__consumer_offsets, small so compaction and loading stay fast.", AtLeast(1),
              "high"),
    ConfigKey("offsets.topic.compression.codec", I, 0, "Codec of the coordinator's "
              "records: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.", Between(0, 4), "high"),
    ConfigKey("offsets.load.buffer.size", I, 5 * _MIB, "Bytes read at a time when loading "
              "a __consumer_offsets partition.", AtLeast(1), "high"),
    ConfigKey("offsets.retention.minutes", I, 7 * 24 * 60, "How long committed offsets of "
              "an empty group (or of a topic the group stopped consuming) are kept.",
              AtLeast(1), "high"),
    ConfigKey("offsets.retention.check.interval.ms", L, 600_000, "How often committed "
              "offsets are checked for expiry.", AtLeast(1), "high"),
    ConfigKey("offsets.commit.timeout.ms", I, 5000, "Longest wait for an offset commit's "
              "append to be acknowledged.", AtLeast(1), "high"),
    ConfigKey("offsets.commit.required.acks", I, -1, "acks of the coordinator's appends "
              "(-1: all in-sync replicas) before a commit is answered.", Between(-1, 1),
              "high"),
    ConfigKey("offset.metadata.max.bytes", I, 4096, "Largest metadata string of a "
              "committed offset (larger: OFFSET_METADATA_TOO_LARGE).", AtLeast(0), "high"),
    ConfigKey("group.initial.rebalance.delay.ms", I, 3000, "Wait for more members before "
              "the first rebalance of a new group.", AtLeast(0), "medium"),
    ConfigKey("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member "
              "may ask for.", AtLeast(0), "medium"),
    ConfigKey("group.max.session.timeout.ms", I, 1_800_000, "Largest session timeout a "
              "member may ask for.", AtLeast(0), "medium"),
    ConfigKey("group.max.size", I, INT_MAX, "Most members a group may have.", AtLeast(1),
              "medium"),
    # ---- KIP-848 consumer groups (group.protocol=consumer)
    ConfigKey("group.coordinator.rebalance.protocols", LS, ("classic", "consumer", "share"),
              "The group protocols served: classic (JoinGroup/SyncGroup) always; consumer "
              "(ConsumerGroupHeartbeat, KIP-848) and share (share groups, KIP-932) unless "
              "left out.",
              ListOf("classic", "consumer", "share"), "medium"),
    ConfigKey("group.consumer.heartbeat.interval.ms", I, 5000, "How often a consumer-group "
              "member heartbeats.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.min.heartbeat.interval.ms", I, 5000, "Lower bound of "
              "group.consumer.heartbeat.interval.ms.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.max.heartbeat.interval.ms", I, 15000, "Upper bound of "
              "group.consumer.heartbeat.interval.ms.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.session.timeout.ms", I, 45000, "A consumer-group member not "
              "heard from for this long is fenced.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.min.session.timeout.ms", I, 45000, "Lower bound of "
              "group.consumer.session.timeout.ms.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.max.session.timeout.ms", I, 60000, "Upper bound of "
              "group.consumer.session.timeout.ms.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.assignors", LS,
              ("org.apache.kafka.coordinator.group.assignor.UniformAssignor",
               "org.apache.kafka.coordinator.group.assignor.RangeAssignor"),
              "The server-side assignors, by Kafka's class name or short name (uniform, "
              "range); the first is the default.",
              ListOf("uniform", "range",
                     "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                     "org.apache.kafka.coordinator.group.assignor.RangeAssignor"), "medium"),
    ConfigKey("group.consumer.max.size", I, INT_MAX, "Most members a consumer group may "
              "have.", AtLeast(1), "medium"),
    ConfigKey("group.consumer.migration.policy", S, "bidirectional", "Whether a group with "
              "members may change protocol (KIP-848's online upgrade and downgrade): "
              "bidirectional, upgrade, downgrade or disabled (case-insensitive).", None,
              "medium"),
    # ---- KIP-932 share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge)
    ConfigKey("group.share.heartbeat.interval.ms", I, 5000, "How often a share-group member "
              "heartbeats.", AtLeast(1), "medium"),
    ConfigKey("group.share.min.heartbeat.interval.ms", I, 5000, "Lower bound of "
              "group.share.heartbeat.interval.ms.", AtLeast(1), "medium"),
    ConfigKey("group.share.max.heartbeat.interval.ms", I, 15000, "Upper bound of "
              "group.share.heartbeat.interval.ms.", AtLeast(1), "medium"),
    ConfigKey("group.share.session.timeout.ms", I, 45000, "A share-group member not heard "
              "from for this long is removed.", AtLeast(1), "medium"),
    ConfigKey("group.share.min.session.timeout.ms", I, 45000, "Lower bound of "
              "group.share.session.timeout.ms.", AtLeast(1), "medium"),
    ConfigKey("group.share.max.session.timeout.ms", I, 60000, "Upper bound of "
              "group.share.session.timeout.ms.", AtLeast(1), "medium"),
    ConfigKey("group.share.max.size", I, 200, "Most members a share group may have.",
              Between(1, 1000), "medium"),
    ConfigKey("group.share.assignors", LS,
              ("org.apache.kafka.coordinator.group.assignor.SimpleAssignor",),
              "The share-group assignor: Kafka's SimpleAssignor.",
              ListOf("simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"),
              "medium"),
    ConfigKey("group.share.record.lock.duration.ms", I, 30000, "How long a share-group "
              "member holds the records it acquired before they are offered again.",
              AtLeast(1000), "medium"),
    ConfigKey("group.share.min.record.lock.duration.ms", I, 15000, "Lower bound of "
              "group.share.record.lock.duration.ms.", AtLeast(1000), "medium"),
    ConfigKey("group.share.max.record.lock.duration.ms", I, 60000, "Upper bound of "
              "group.share.record.lock.duration.ms.", AtLeast(1000), "medium"),
    ConfigKey("group.share.delivery.count.limit", I, 5, "How many times a record is "
              "delivered to a share group before it is archived.", AtLeast(2), "medium"),
    ConfigKey("group.share.min.delivery.count.limit", I, 2, "Lower bound of "
              "group.share.delivery.count.limit.", AtLeast(2), "medium"),
    ConfigKey("group.share.max.delivery.count.limit", I, 10, "Upper bound of "
              "group.share.delivery.count.limit.", AtLeast(2), "medium"),
    ConfigKey("group.share.partition.max.record.locks", I, 2000, "Most records of one share "
              "partition in flight at once.", AtLeast(100), "medium"),
    ConfigKey("group.share.max.share.sessions", I, 2000, "Most share sessions a broker "
              "keeps.", AtLeast(1), "medium"),
    ConfigKey("share.coordinator.state.topic.num.partitions", I, 50, "Partitions of "
              "__share_group_state (at creation).", AtLeast(1), "high"),
    ConfigKey("share.coordinator.state.topic.replication.factor", I, 3, "Replication factor "
              "of __share_group_state (at creation; a lone broker: 1 unless set).",
              AtLeast(1), "high"),
    ConfigKey("share.coordinator.state.topic.segment.bytes", I, 100 * 1024 * 1024,
              "Segment size of __share_group_state.", AtLeast(1), "high"),
    ConfigKey("share.coordinator.state.topic.min.isr", I, 2, "min.insync.replicas of "
              "__share_group_state (at creation, when replicated).", AtLeast(1), "high"),
    ConfigKey("share.coordinator.write.timeout.ms", I, 5000, "How long the share coordinator "
              "waits for a state record to be replicated.", AtLeast(1), "high"),
    # ---- transaction coordinator (Kafka's TransactionStateManagerConfig and
    # TransactionLogConfig; docs/transactions.md)
    ConfigKey("transactional.id.expiration.ms", I, 7 * 24 * 3_600_000, "Idle time after "
              "which a transactional id is forgotten.", AtLeast(1), "high"),
    ConfigKey("transaction.max.timeout.ms", I, 900_000, "Longest transaction timeout a "
              "producer may ask for (INVALID_TRANSACTION_TIMEOUT beyond).", AtLeast(1),
              "high"),
    ConfigKey("transaction.state.log.num.partitions", I, 50, "Partitions of "
              "__transaction_state (fixed once the topic exists).", AtLeast(1), "high"),
    ConfigKey("transaction.state.log.replication.factor", I, 3, "Replication factor of "
              "__transaction_state; on a cluster it is not created until this many brokers "
              "are alive. A lone broker uses 1 unless it is set.", AtLeast(1), "high"),
    ConfigKey("transaction.state.log.min.isr", I, 2, "min.insync.replicas of "
              "__transaction_state (never above its replication factor).", AtLeast(1),
              "high"),
    ConfigKey("transaction.state.log.segment.bytes", I, 100 * _MIB, "segment.bytes of "
              "__transaction_state.", AtLeast(1), "high"),
    ConfigKey("transaction.state.log.load.buffer.size", I, 5 * _MIB, "Bytes read at a "
              "time when loading a __transaction_state partition.", AtLeast(1), "high"),
    ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10_000,
              "How often transactions past their timeout are looked for and aborted.",
              AtLeast(1), "low"),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3_600_000,
              "How often transactional ids past transactional.id.expiration.ms are "
              "removed.", AtLeast(1), "low"),
    ConfigKey("transaction.partition.verification.enable", B, True, "KIP-890: a partition "
              "leader asks the coordinator whether a transactional batch's partition is in "
              "its transaction before appending it.", None, "low"),
    ConfigKey("add.partitions.to.txn.max.timeout.ms", I, 100, "KIP-890 part 2: how long a "
              "partition leader keeps asking the coordinator to add a transactions-v2 "
              "producer's partition while the previous transaction's markers are still "
              "being written (CONCURRENT_TRANSACTIONS).", AtLeast(1), "high"),
    ConfigKey("add.partitions.to.txn.retry.backoff.ms", I, 20, "The pause between those "
              "attempts.", AtLeast(1), "high"),
    # ---- lifecycle
    ConfigKey("controlled.shutdown.enable", B, True, "On a cluster, ask the controller to "
              "move this broker's leaderships to other in-sync replicas before it stops.",
              None, "medium"),
    ConfigKey("controlled.shutdown.max.retries", I, 3, "Attempts at a controlled shutdown "
              "(an error, or leaderships that could not move) before the broker stops "
              "anyway.", None, "medium"),
    ConfigKey("controlled.shutdown.retry.backoff.ms", L, 5_000, "Pause between controlled "
              "shutdown attempts.", None, "medium"),
    ConfigKey("controller.socket.timeout.ms", I, 30_000, "Socket timeout of the requests "
              "between the controller and the brokers.", None, "medium"),
    # ---- the controller's leader balancing
    ConfigKey("auto.leader.rebalance.enable", B, True, "The controller moves leadership "
              "back to each partition's preferred (first) replica when a broker leads too "
              "few of the partitions it prefers.", None, "high"),
    ConfigKey("leader.imbalance.check.interval.seconds", L, 300, "How often the controller "
              "checks the leader balance.", AtLeast(1), "high"),
    ConfigKey("leader.imbalance.per.broker.percentage", I, 10, "Share (percent) of a "
              "broker's preferred partitions led by others above which the controller "
              "rebalances them.", None, "high"),
    ConfigKey("shutdown.timeout.ms", L, 30_000, "pylog: longest wait for in-flight "
              "requests during a graceful shutdown.", AtLeast(0), "low"),
    # ---- metrics
    ConfigKey("metrics.port", I, 0, "pylog: port of the Prometheus /metrics endpoint; 0 "
              "turns it off.", Between(0, 65535), "medium"),
    ConfigKey("metrics.host", S, None, "pylog: address of the /metrics endpoint; the first "
              "listener's host when unset.", None, "low"),
    # ---- the web console (docs/console.md), served by `pylog broker start`
    ConfigKey("console.port", I, 0, "pylog: port of the web console the broker serves "
              "(the console extra); 0 turns it off.", Between(0, 65535), "low"),
    ConfigKey("console.host", S, None, "pylog: address of the web console; the first "
              "listener's host when unset.", None, "low"),
    ConfigKey("console.read.only", B, True, "pylog: the broker's web console shows the "
              "cluster and refuses every change.", None, "low"),
)
# fmt: on

ALL_BROKER_CONFIG: dict[str, ConfigKey] = {**BROKER_CONFIG, **BROKER_LOG_CONFIG}


# ---------------------------------------------------------------- per-listener keys

#: Keys a listener may set for itself as ``listener.name.<listener>.<key>``
#: (the listener name lower-cased, as Kafka writes it).
LISTENER_KEYS = frozenset(
    [k for k in BROKER_CONFIG if k.startswith("ssl.")]
    + ["sasl.enabled.mechanisms", "sasl.server.max.receive.size", "connections.max.reauth.ms"]
    # Kafka's ListenerReconfigurableConfigs of the SocketServer
    + ["max.connections", "max.connection.creation.rate"]
)
#: Keys set per listener and SASL mechanism:
#: ``listener.name.<listener>.<mechanism>.<key>`` (mechanism lower-cased).
MECHANISM_KEYS: dict[str, ConfigKey] = {
    "sasl.jaas.config": ConfigKey(
        "sasl.jaas.config",
        P,
        None,
        "JAAS login module of a listener's SASL mechanism.",
        None,
        "medium",
    ),
    "connections.max.reauth.ms": BROKER_CONFIG["connections.max.reauth.ms"],
}


def _listener_key(name: str) -> tuple[str, str, ConfigKey] | None:
    """(LISTENER, key suffix, its ConfigKey) of a ``listener.name.<l>.<key>``, or None."""
    if not name.startswith("listener.name."):
        return None
    rest = name[len("listener.name.") :]
    for suffix in sorted(LISTENER_KEYS | set(MECHANISM_KEYS), key=len, reverse=True):
        if not rest.endswith("." + suffix):
            continue
        head = rest[: -len(suffix) - 1]
        if suffix in LISTENER_KEYS and head and "." not in head:
            return head.upper(), suffix, BROKER_CONFIG[suffix]
        listener, dot, mechanism = head.rpartition(".")
        if suffix in MECHANISM_KEYS and dot and listener and mechanism:
            return listener.upper(), f"{mechanism.lower()}.{suffix}", MECHANISM_KEYS[suffix]
    return None


# ---------------------------------------------------------------- listeners

_LISTENER = re.compile(r"^([A-Za-z0-9_.\-]+)://(\[[0-9A-Fa-f:.]*\]|[^:\[\]]*):(-?\d+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One ``NAME://host:port`` listener; ``host`` "" means every interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def bind_host(self) -> str | None:
        """What to bind: None (every interface) for an empty host."""
        return self.host or None

    def with_port(self, port: int) -> EndPoint:
        return EndPoint(self.listener_name, self.host, port, self.security_protocol)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def _protocol_map(entries: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, proto = entry.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in SECURITY_PROTOCOLS:
            raise InvalidConfigurationError(
                f"Invalid value {entry!r} for configuration listener.security.protocol.map: "
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        out[name] = proto
    return out


def parse_listeners(
    key: str, entries: tuple[str, ...], protocol_map: Mapping[str, str]
) -> tuple[EndPoint, ...]:
    """``NAME://host:port`` entries as EndPoints; names must be unique and mapped."""
    endpoints: list[EndPoint] = []
    for entry in entries:
        m = _LISTENER.match(entry.strip())
        if m is None:
            raise InvalidConfigurationError(
                f"Invalid value {entry!r} for configuration {key}: expected NAME://host:port"
            )
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if host.startswith("["):
            host = host[1:-1]
        if not 0 <= port <= 65535:
            raise InvalidConfigurationError(
                f"Invalid value {entry!r} for configuration {key}: port must be 0..65535"
            )
        proto = protocol_map.get(name)
        if proto is None:
            raise InvalidConfigurationError(
                f"Invalid value {entry!r} for configuration {key}: listener name {name} is "
                "not in listener.security.protocol.map"
            )
        if any(e.listener_name == name for e in endpoints):
            raise InvalidConfigurationError(
                f"Invalid value {','.join(entries)!r} for configuration {key}: "
                f"listener name {name} appears twice"
            )
        endpoints.append(EndPoint(name, host, port, proto))
    return tuple(endpoints)


# ---------------------------------------------------------------- KafkaConfig


@dataclass(frozen=True)
class KafkaConfig:
    """A broker's resolved configuration.

    Typed attributes for what the broker reads often; :meth:`get` for any key of
    ``ALL_BROKER_CONFIG`` (parsed value, else the table's default); ``log`` is
    the storage layer's :class:`BrokerLogConfig`; ``originals`` the strings as
    given (DescribeConfigs answers from them).
    """

    broker_id: int
    listeners: tuple[EndPoint, ...]
    advertised_listeners: tuple[EndPoint, ...]
    log: BrokerLogConfig
    values: Mapping[str, ConfigValue] = field(repr=False)
    originals: Mapping[str, str] = field(repr=False, default_factory=dict)
    unknown: tuple[str, ...] = ()
    #: ``listener.name.<l>.<key>`` values: LISTENER → key (``ssl.keystore.location``,
    #: ``plain.sasl.jaas.config``) → parsed value.
    listener_values: Mapping[str, Mapping[str, ConfigValue]] = field(
        repr=False, default_factory=dict
    )

    # -- construction

    @classmethod
    def from_props(cls, props: Mapping[str, object]) -> KafkaConfig:
        """Validate and resolve ``props`` (strings or Python values, Kafka's names)."""
        values: dict[str, ConfigValue] = {}
        unknown: list[str] = []
        per_listener: dict[str, dict[str, ConfigValue]] = {}
        for name, raw in props.items():
            key = ALL_BROKER_CONFIG.get(name)
            if key is None:
                scoped = _listener_key(name)
                if scoped is None:
                    unknown.append(name)
                    continue
                listener, suffix, key = scoped
                try:
                    per_listener.setdefault(listener, {})[suffix] = key.parse(raw)
                except InvalidConfigurationError as e:
                    raise InvalidConfigurationError(str(e).replace(key.name, name, 1)) from None
                continue
            values[name] = key.parse(raw)
        if unknown:
            _log.warning(
                "these configurations were supplied but are not known: %s", ", ".join(unknown)
            )

        def get(name: str) -> ConfigValue:
            value = values.get(name)
            return ALL_BROKER_CONFIG[name].default if value is None else value

        node_id, broker_id = get("node.id"), get("broker.id")
        if node_id >= 0 and broker_id >= 0 and node_id != broker_id:
            raise InvalidConfigurationError(
                f"Invalid value {broker_id} for configuration broker.id: it must equal "
                f"node.id ({node_id}) when both are set"
            )
        on_zookeeper = bool(get("zookeeper.connect"))
        configured_id = node_id if node_id >= 0 else broker_id
        if on_zookeeper and configured_id < 0 and not get("broker.id.generation.enable"):
            raise InvalidConfigurationError(
                "broker.id must be set (0 or more) when zookeeper.connect is set and "
                "broker.id.generation.enable is false: the brokers of a cluster need "
                "distinct ids"
            )
        if on_zookeeper and get("broker.id.generation.enable"):
            max_id = int(get("reserved.broker.max.id"))
            if configured_id > max_id:
                raise InvalidConfigurationError(
                    f"Invalid value {configured_id} for configuration broker.id: it must not "
                    f"be greater than reserved.broker.max.id ({max_id}), above which "
                    "generated ids go"
                )
        # On ZooKeeper an unset id is found at start-up (meta.properties, or
        # generated): -1 until then. A lone broker is 0.
        resolved_id = configured_id if configured_id >= 0 else -1 if on_zookeeper else 0

        pmap = _protocol_map(get("listener.security.protocol.map"))
        listeners = parse_listeners("listeners", get("listeners"), pmap)
        if not listeners:
            raise InvalidConfigurationError(
                "Invalid value '' for configuration listeners: at least one listener is needed"
            )
        adv_raw = values.get("advertised.listeners")
        if adv_raw:
            advertised = parse_listeners("advertised.listeners", adv_raw, pmap)
            for ep in advertised:
                if ep.host in ("0.0.0.0", "::"):
                    raise InvalidConfigurationError(
                        f"Invalid value {str(ep)!r} for configuration advertised.listeners: "
                        "a wildcard address cannot be advertised"
                    )
        else:
            # As Kafka: a wildcard listener is advertised under this host's name.
            advertised = tuple(
                EndPoint(ep.listener_name, socket.getfqdn(), ep.port, ep.security_protocol)
                if ep.host in ("", "0.0.0.0", "::")
                else ep
                for ep in listeners
            )
        names = {ep.listener_name for ep in listeners}
        for ep in advertised:
            if ep.listener_name not in names:
                raise InvalidConfigurationError(
                    f"Invalid value {str(ep)!r} for configuration advertised.listeners: "
                    f"listener {ep.listener_name} is not in listeners"
                )
        _check_consumer_group_keys(get)
        if get("group.min.session.timeout.ms") > get("group.max.session.timeout.ms"):
            raise InvalidConfigurationError(
                "Invalid value for configuration group.min.session.timeout.ms: it must not "
                "be above group.max.session.timeout.ms"
            )
        ibl = values.get("inter.broker.listener.name")
        if ibl is not None and ibl.upper() not in names:
            raise InvalidConfigurationError(
                f"Invalid value {ibl!r} for configuration inter.broker.listener.name: "
                "not a listener name"
            )
        sibp = values.get("security.inter.broker.protocol")
        if ibl is not None and sibp is not None:
            raise InvalidConfigurationError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                "should be set"
            )
        if sibp is not None and sibp not in names:
            raise InvalidConfigurationError(
                f"Invalid value {sibp!r} for configuration security.inter.broker.protocol: "
                f"no listener is named {sibp}"
            )
        for listener in per_listener:
            if listener not in names:
                _log.warning(
                    "listener.name.%s.* keys are set but no listener is named %s",
                    listener.lower(),
                    listener,
                )
        return cls(
            broker_id=resolved_id,
            listeners=listeners,
            advertised_listeners=advertised,
            log=BrokerLogConfig.from_props(values),
            values=values,
            originals={k: str(v) for k, v in props.items()},
            unknown=tuple(unknown),
            listener_values=per_listener,
        )

    @classmethod
    def from_properties(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> KafkaConfig:
        """A ``server.properties`` file (optional) with ``overrides`` on top."""
        props: dict[str, object] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as f:
                    props.update(parse_properties(f.read()))
            except OSError as e:
                raise InvalidConfigurationError(f"cannot read {os.fspath(path)}: {e}") from e
        props.update(overrides or {})
        return cls.from_props(props)

    # -- access

    def get(self, name: str) -> ConfigValue:
        """The value of any broker key: as set, else its default."""
        key = ALL_BROKER_CONFIG.get(name)
        if key is None:
            raise KeyError(name)
        value = self.values.get(name)
        return key.default if value is None else value

    def is_set(self, name: str) -> bool:
        return self.values.get(name) is not None

    def with_overrides(self, overrides: Mapping[str, object]) -> KafkaConfig:
        """A new config: these originals plus ``overrides``."""
        return KafkaConfig.from_props({**self.originals, **overrides})

    def with_broker_id(self, broker_id: int) -> KafkaConfig:
        """This config with the id found at start-up (meta.properties, or
        generated by ZooKeeper)."""
        return dataclasses.replace(self, broker_id=broker_id)

    def with_bound_ports(self, ports: Mapping[str, int]) -> KafkaConfig:
        """This config once the listeners are bound: a listener or advertised
        listener with port 0 takes its listener's bound port (listener name → port)."""

        def bound(ep: EndPoint) -> EndPoint:
            port = ports.get(ep.listener_name)
            return ep.with_port(port) if ep.port == 0 and port else ep

        return dataclasses.replace(
            self,
            listeners=tuple(bound(ep) for ep in self.listeners),
            advertised_listeners=tuple(bound(ep) for ep in self.advertised_listeners),
        )

    def listener(self, name: str) -> EndPoint | None:
        for ep in self.listeners:
            if ep.listener_name == name.upper():
                return ep
        return None

    @property
    def inter_broker_listener_name(self) -> str:
        """inter.broker.listener.name, else the listener named by
        security.inter.broker.protocol when set, else the first listener."""
        name = self.values.get("inter.broker.listener.name")
        if name:
            return str(name).upper()
        protocol = self.values.get("security.inter.broker.protocol")
        return str(protocol) if protocol else self.listeners[0].listener_name

    def listener_get(self, listener: str, name: str) -> ConfigValue:
        """``name`` as ``listener`` sees it: ``listener.name.<listener>.<name>``
        when set, else the broker-wide key (``name`` may be mechanism-scoped,
        ``plain.sasl.jaas.config``: then there is no broker-wide fallback but
        the unscoped key's)."""
        scoped = self.listener_values.get(listener.upper(), {})
        if name in scoped:
            return scoped[name]
        if name in ALL_BROKER_CONFIG:
            return self.get(name)
        base = name.partition(".")[2]  # <mechanism>.<key>: the listener's, then the broker's
        if base in scoped:
            return scoped[base]
        return self.get(base) if base in ALL_BROKER_CONFIG else None

    # Typed shortcuts for the keys read on the request path.

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return self.log.log_dirs

    @property
    def num_partitions(self) -> int:
        return int(self.get("num.partitions"))

    @property
    def default_replication_factor(self) -> int:
        return int(self.get("default.replication.factor"))

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.get("auto.create.topics.enable"))

    @property
    def delete_topic_enable(self) -> bool:
        return bool(self.get("delete.topic.enable"))

    @property
    def message_max_bytes(self) -> int:
        return int(self.get("message.max.bytes"))

    @property
    def min_insync_replicas(self) -> int:
        return int(self.get("min.insync.replicas"))

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.get("socket.request.max.bytes"))

    @property
    def queued_max_requests(self) -> int:
        return int(self.get("queued.max.requests"))

    @property
    def connections_max_idle_ms(self) -> int:
        return int(self.get("connections.max.idle.ms"))

    @property
    def max_connections(self) -> int:
        return int(self.get("max.connections"))

    @property
    def max_connections_per_ip(self) -> int:
        return int(self.get("max.connections.per.ip"))

    @property
    def metrics_port(self) -> int:
        return int(self.get("metrics.port"))

    @property
    def replica_lag_time_max_ms(self) -> int:
        return int(self.get("replica.lag.time.max.ms"))

    @property
    def fetch_max_bytes(self) -> int:
        return int(self.get("fetch.max.bytes"))

    def describe(self) -> dict[str, str]:
        """Every key's effective value as a string (DescribeConfigs of the broker)."""
        out: dict[str, str] = {}
        for name, key in ALL_BROKER_CONFIG.items():
            if key.internal:
                continue
            value = self.get(name)
            if value is None:
                out[name] = ""
            elif isinstance(value, bool):
                out[name] = str(value).lower()
            elif isinstance(value, tuple):
                out[name] = ",".join(value)
            else:
                out[name] = str(value)
        return out


def _check_consumer_group_keys(get: Any) -> None:
    """Kafka's GroupCoordinatorConfig checks of the KIP-848 keys."""

    def refuse(key: str, why: str) -> InvalidConfigurationError:
        return InvalidConfigurationError(f"Invalid value for configuration {key}: {why}")

    if "classic" not in get("group.coordinator.rebalance.protocols"):
        raise refuse("group.coordinator.rebalance.protocols", "it must contain classic")
    policy = str(get("group.consumer.migration.policy"))
    if policy.lower() not in ("bidirectional", "upgrade", "downgrade", "disabled"):
        raise refuse(
            "group.consumer.migration.policy",
            "String must be one of (case insensitive): DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL",
        )
    if not get("group.consumer.assignors"):
        raise refuse("group.consumer.assignors", "at least one assignor is required")
    for kind in ("heartbeat.interval", "session.timeout"):
        lo = get(f"group.consumer.min.{kind}.ms")
        hi = get(f"group.consumer.max.{kind}.ms")
        value = get(f"group.consumer.{kind}.ms")
        if lo > hi:
            raise refuse(f"group.consumer.min.{kind}.ms", f"it must not be above {hi}")
        if not lo <= value <= hi:
            raise refuse(f"group.consumer.{kind}.ms", f"it must be within [{lo}, {hi}]")
    for kind in ("heartbeat.interval.ms", "session.timeout.ms", "record.lock.duration.ms",
                 "delivery.count.limit"):  # fmt: skip
        lo, hi = get(f"group.share.min.{kind}"), get(f"group.share.max.{kind}")
        if not lo <= get(f"group.share.{kind}") <= hi:
            raise refuse(f"group.share.{kind}", f"it must be within [{lo}, {hi}]")
    if get("group.consumer.heartbeat.interval.ms") >= get("group.consumer.session.timeout.ms"):
        raise refuse(
            "group.consumer.heartbeat.interval.ms",
            "it must be below group.consumer.session.timeout.ms",
        )
