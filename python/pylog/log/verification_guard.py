"""VerificationGuard and VerificationStateEntry (Kafka's classes of the same
names in ``org.apache.kafka.storage.internals.log``, KIP-890 part 1).

Before a partition leader appends a producer's first transactional batch of
a transaction, it asks the transaction coordinator whether the partition is
in that transaction. The guard ties the answer to the append: it is made
(and kept in the producer state) before the question goes out, and the
append is let through only if the producer state still holds that same
guard. Any transactional append of the producer in between, a marker above
all, clears it, so a transaction that ended while the question was out
cannot be reopened by a late batch (a hanging transaction).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

__all__ = ["SENTINEL", "VerificationGuard", "VerificationStateEntry"]

_ids = itertools.count(1)


@dataclass(frozen=True, eq=False)
class VerificationGuard:
    """Compared by identity: a guard matches only itself."""

    id: int = field(default_factory=lambda: next(_ids))

    def verify(self, verifying: VerificationGuard) -> bool:
        """Whether ``verifying`` (what the request carries) is this guard;
        the sentinel verifies nothing."""
        return verifying is not SENTINEL and verifying is self


#: The leader saw an open transaction of the producer and did not ask the
#: coordinator: an append carrying it passes only while that transaction is
#: still open.
SENTINEL = VerificationGuard(0)


@dataclass
class VerificationStateEntry:
    """The guard of one producer on one partition while a verification is
    out, with the lowest sequence and the epoch it was asked for."""

    timestamp_ms: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        # A retry at a newer epoch restarts the entry's sequence; the same
        # epoch keeps the lowest sequence asked for.
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence
        elif epoch == self.epoch:
            self.lowest_sequence = min(self.lowest_sequence, sequence)
