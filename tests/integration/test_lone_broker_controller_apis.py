"""The controller's admin APIs on a lone broker (no ZooKeeper, no
controller): it answers them itself, as the one replica of everything —
nothing to reassign, no election needed — instead of NOT_CONTROLLER, which
an AdminClient (kafka-topics --describe lists reassignments) retries until
its timeout."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.testing import broker


def test_reassignments_and_elections_on_a_lone_broker() -> None:
    with broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("lone", 2, 1)])["lone"].result(30)
        me = b.server.config.broker_id  # type: ignore[union-attr]
        with KafkaConnection(b.bootstrap_servers) as c:
            listed = c.request(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, {"timeout_ms": 1000, "topics": None}
            )
            assert listed.error_code == 0 and listed.topics == []
            altered = c.request(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS,
                0,
                {
                    "timeout_ms": 1000,
                    "topics": [
                        {
                            "name": "lone",
                            "partitions": [
                                {"partition_index": 0, "replicas": [me]},
                                {"partition_index": 1, "replicas": [me, me + 1]},
                            ],
                        },
                        {
                            "name": "missing",
                            "partitions": [{"partition_index": 0, "replicas": None}],
                        },
                    ],
                },
            )
            assert altered.error_code == 0
            codes = {
                (t.name, p.partition_index): p.error_code
                for t in altered.responses
                for p in t.partitions
            }
            assert codes == {("lone", 0): 0, ("lone", 1): 39, ("missing", 0): 3}
            elected = c.request(
                ApiKey.ELECT_LEADERS,
                2,
                {
                    "election_type": 0,
                    "topic_partitions": [{"topic": "lone", "partitions": [0, 1]}],
                    "timeout_ms": 1000,
                },
            )
            results = [
                p.error_code for r in elected.replica_election_results for p in r.partition_result
            ]
            assert results == [84, 84]  # ELECTION_NOT_NEEDED
