"""ConsumerGroupMigrationPolicy: whether a group may change protocol while it
has members (Kafka's enum of the name, broker key
``group.consumer.migration.policy``, KIP-848's online upgrade and downgrade).

``upgrade``: a classic group whose members use the ``consumer`` embedded
protocol becomes a consumer group when a member joins it with
ConsumerGroupHeartbeat. ``downgrade``: a consumer group becomes a classic
group again when its last consumer-protocol member leaves and the others all
speak the classic protocol. ``bidirectional`` (Kafka's default) allows both,
``disabled`` neither. An empty group changes type whatever the policy.
"""

from __future__ import annotations

import enum

__all__ = ["ConsumerGroupMigrationPolicy"]


class ConsumerGroupMigrationPolicy(enum.Enum):
    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
            ConsumerGroupMigrationPolicy.UPGRADE,
        )

    @property
    def downgrade_enabled(self) -> bool:
        return self in (
            ConsumerGroupMigrationPolicy.BIDIRECTIONAL,
            ConsumerGroupMigrationPolicy.DOWNGRADE,
        )

    @classmethod
    def parse(cls, name: str | None) -> ConsumerGroupMigrationPolicy:
        """Case-insensitive, as Kafka's; anything else is ``disabled`` (the
        broker's config check refuses it first)."""
        for policy in cls:
            if name is not None and policy.value == name.lower():
                return policy
        return cls.DISABLED
