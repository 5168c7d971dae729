"""TransactionVersion: the levels of the finalized feature ``transaction.version``
(Kafka's ``org.apache.kafka.server.common.TransactionVersion``, KIP-890).

* 0: transactions v1 as Kafka 3.x has them (``__transaction_state`` values
  written at version 0);
* 1: the same protocol, ``__transaction_state`` values written at version 1
  (the flexible encoding, with tagged fields);
* 2: transactions v2 (KIP-890 part 2): a producer that sees it finalized sends
  Produce v12 / TxnOffsetCommit v5 (the partition is added to the transaction
  by its leader or group coordinator) and EndTxn v5, and every EndTxn bumps
  the producer epoch.

The coordinator, the ApiVersions handler and the metadata stores all read
it, so it lives in the common leaf.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "DEFAULT_TRANSACTION_VERSION",
    "FEATURE_NAME",
    "MAX_TRANSACTION_VERSION",
    "TransactionVersion",
]

#: The feature's name in ApiVersions, UpdateFeatures and ``/feature``.
FEATURE_NAME = "transaction.version"


class TransactionVersion(IntEnum):
    TV_0 = 0
    TV_1 = 1
    TV_2 = 2

    @property
    def supports_epoch_bump(self) -> bool:
        """Whether every EndTxn bumps the producer epoch (transactions v2)."""
        return self >= TransactionVersion.TV_2

    @property
    def transaction_log_value_version(self) -> int:
        """The version of the ``__transaction_state`` values written at this level."""
        return 0 if self == TransactionVersion.TV_0 else 1

    @classmethod
    def of(cls, level: int) -> TransactionVersion:
        """The version of a feature level, clamped into 0..2."""
        return cls(min(max(level, 0), cls.TV_2))


#: The highest level this broker supports (what it registers and advertises).
MAX_TRANSACTION_VERSION = TransactionVersion.TV_2
#: The level a cluster runs at when no operator finalized another: 2, as a
#: Kafka 4.x cluster bootstraps with.
DEFAULT_TRANSACTION_VERSION = TransactionVersion.TV_2
