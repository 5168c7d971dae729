"""The online upgrade and downgrade of a group between the classic protocol
and KIP-848's consumer protocol (Kafka's ``ConsumerGroup.fromClassicGroup``,
``ClassicGroup.fromConsumerGroup`` and the records its GroupMetadataManager
writes for each; KIP-848, "Online upgrade / downgrade").

Upgrade: each classic member becomes a consumer-group member at the group's
generation as its member epoch (Stable), subscribed to the topics of its
ConsumerProtocolSubscription, holding — and targeted at — the partitions of
its last ConsumerProtocolAssignment, and keeping its classic session timeout
and protocols (so it goes on with JoinGroup/SyncGroup/Heartbeat). The group
epoch and assignment epoch are the generation. Written as: the classic
group's tombstone, each member's metadata, the group epoch, each member's
target, the target epoch, each member's current assignment — in the same
batch as the joining member's own records.

Downgrade: the consumer group's members but the leaving one become classic
members with their classic protocols and session timeouts, each assigned its
target assignment serialized in the ConsumerProtocolAssignment version its
subscription speaks; the generation is the group epoch, the protocol the one
the members vote for. Written as: the consumer group's tombstones, then the
classic GroupMetadata record; the group then rebalances.
"""

from __future__ import annotations

from collections.abc import Mapping

from pylog.coordinator.consumer_group import ConsumerGroup
from pylog.coordinator.consumer_group_member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from pylog.coordinator.consumer_group_records import (
    Record,
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    target_epoch_record,
    target_member_record,
)
from pylog.coordinator.consumer_protocol import (
    deserialize_assignment,
    deserialize_subscription,
    deserialize_version,
    serialize_assignment,
)
from pylog.coordinator.group import GroupMetadata, GroupState, MemberMetadata
from pylog.coordinator.partition_assignor import TopicInfo
from pylog.coordinator.records import GroupMetadataKey, RecordFormatError

__all__ = [
    "classic_group_from_consumer_group",
    "consumer_group_from_classic_group",
    "consumer_group_records",
    "to_topic_ids",
]


def to_topic_ids(
    partitions: Mapping[str, list[int]], topics: Mapping[str, TopicInfo]
) -> dict[str, frozenset[int]]:
    """Partitions by topic name as partitions by topic id; topics that do
    not exist (any more) are dropped, as Kafka's toTopicPartitionMap does."""
    out: dict[str, frozenset[int]] = {}
    for name, ps in partitions.items():
        info = topics.get(name)
        if info is not None and ps:
            out[info.topic_id] = out.get(info.topic_id, frozenset()) | frozenset(ps)
    return out


def consumer_group_from_classic_group(
    classic: GroupMetadata, topics: Mapping[str, TopicInfo], now_ms: int
) -> ConsumerGroup:
    """The consumer group a classic group becomes (its offsets kept).
    RecordFormatError when a member's embedded protocol cannot be read."""
    group = ConsumerGroup(classic.group_id, now_ms)
    group.offsets = classic.offsets
    group.pending_txn_offsets = classic.pending_txn_offsets
    group.group_epoch = group.assignment_epoch = classic.generation_id
    for m in classic.members.values():
        try:
            metadata = m.metadata(classic.protocol_name) if classic.protocol_name else b""
        except KeyError:
            metadata = b""
        if not metadata and m.protocols:
            # A member of a group still in its first rebalance: its first choice.
            metadata = m.protocols[0][1]
        subscription = deserialize_subscription(metadata)
        assigned = to_topic_ids(deserialize_assignment(m.assignment).partitions, topics)
        member = ConsumerGroupMember(
            m.member_id,
            member_epoch=classic.generation_id,
            previous_member_epoch=classic.generation_id,
            state=MemberState.STABLE,
            instance_id=m.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            subscribed_topic_names=subscription.topics,
            assigned=assigned,
            classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
        )
        group.targets[m.member_id] = dict(assigned)
        group.put_member(member, now_ms)
    return group


def consumer_group_records(group: ConsumerGroup) -> list[Record]:
    """What a freshly upgraded group is written as (Kafka's
    createConsumerGroupRecords), after the classic group's tombstone."""
    gid = group.group_id
    members = list(group.consumer_members.values())
    records: list[Record] = [(GroupMetadataKey(gid).encode(), None)]
    records.extend(member_metadata_record(gid, m) for m in members)
    records.append(group_epoch_record(gid, group.group_epoch))
    records.extend(
        target_member_record(gid, m.member_id, group.targets.get(m.member_id, {})) for m in members
    )
    records.append(target_epoch_record(gid, group.group_epoch))
    records.extend(current_assignment_record(gid, m) for m in members)
    return records


def classic_group_from_consumer_group(
    group: ConsumerGroup, leaving_member_id: str, topic_names: Mapping[str, str], now_ms: int
) -> GroupMetadata:
    """The classic group a consumer group becomes when ``leaving_member_id``
    (its last consumer-protocol member) leaves; Stable at the group epoch,
    each member assigned its target. RecordFormatError when a member's
    protocol metadata cannot be read."""
    classic = GroupMetadata(group.group_id, now_ms, GroupState.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = "consumer"
    classic.offsets = group.offsets
    classic.pending_txn_offsets = group.pending_txn_offsets
    for m in group.consumer_members.values():
        if m.member_id == leaving_member_id or m.classic is None:
            continue
        classic.add(
            MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic.session_timeout_ms,
                "consumer",
                list(m.classic.supported_protocols),
            )
        )
    try:
        classic.protocol_name = classic.select_protocol()
    except (ValueError, IndexError):
        raise RecordFormatError("the classic members share no protocol") from None
    for cm in classic.members.values():
        version = deserialize_version(cm.metadata(classic.protocol_name))
        target = group.targets.get(cm.member_id, {})
        by_name = {topic_names[t]: sorted(ps) for t, ps in target.items() if t in topic_names}
        cm.assignment = serialize_assignment(by_name, version)
    return classic
