"""FinalizedFeatureCache: the feature levels this broker runs at and
advertises in ApiVersions (KIP-584; Kafka's ``FinalizedFeatureCache`` of its
ZooKeeper-mode brokers, ``MetadataCache.features()`` in KRaft).

pylog knows one feature, ``transaction.version``
(:mod:`pylog.common.transaction_version`). Its level is what the metadata
store holds (``/feature`` on a ZooKeeper cluster, the document on a lone
broker) once an operator finalized one with UpdateFeatures; until then the
default, 2 as a Kafka 4.x cluster bootstraps with, but never above what every
registered broker supports: a Kafka 3.9 broker in the cluster (it supports
level 0 alone) keeps the cluster at 0 without anything being written, so it
never meets a ``/feature`` it would stop on.

The epoch ApiVersions answers is the znode version plus one (0 while nothing
is stored), so a client that saw the default sees a level written later.
"""

from __future__ import annotations

from pylog.common.transaction_version import (
    DEFAULT_TRANSACTION_VERSION,
    FEATURE_NAME,
    TransactionVersion,
)
from pylog.metadata.store import MetadataStore

__all__ = ["FinalizedFeatureCache"]


class FinalizedFeatureCache:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    def default_level(self, name: str) -> int:
        """The level of ``name`` when none is stored: the default, capped at
        what every registered broker supports."""
        if name != FEATURE_NAME:
            return 0
        support = self.store.feature_support()
        level = int(DEFAULT_TRANSACTION_VERSION)
        if support is not None:
            level = min(level, support.get(name, 0))
        return level

    def features(self) -> tuple[dict[str, int], int]:
        """(every finalized feature's level, the epoch)."""
        stored = self.store.finalized_features()
        levels = {FEATURE_NAME: self.default_level(FEATURE_NAME)}
        levels.update(stored.features)
        return levels, stored.epoch + 1

    def transaction_version(self) -> TransactionVersion:
        return TransactionVersion.of(self.features()[0][FEATURE_NAME])
