"""SharePartition: one share group's delivery state of one topic-partition,
on its leader (KIP-932; Kafka's ``kafka.server.share.SharePartition``).

Records from ``start_offset`` on are in flight, each in a state::

    AVAILABLE     may be acquired by the next ShareFetch of any member
    ACQUIRED      delivered to one member, locked for
                  group.share.record.lock.duration.ms
    ACKNOWLEDGED  the member accepted it: never delivered again
    ARCHIVED      rejected, a gap, or delivered group.share.delivery.count.limit
                  times: never delivered again

Acquiring a record counts a delivery. Released by the member (RELEASE), or
its lock expired (the member died or was slow), a record is AVAILABLE again
— unless it was delivered the limit's number of times, then ARCHIVED. The
start offset moves past every leading record that is ACKNOWLEDGED or
ARCHIVED; entries behind it are dropped, so memory is bounded by the
records in flight, which ``group.share.partition.max.record.locks`` caps: no
new record is acquired while that many lie between the start offset and the
next new one.

Offsets at or past the start with no entry are AVAILABLE and never
delivered. Kafka keeps in-flight batches and splits them per offset when
needed; here the entries are per offset (bounded as above) and the
persisted form gathers them into runs (StateBatch).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pylog.common.topic_partition import TopicPartition
from pylog.errors import ErrorCode
from pylog.server.share.persister import PersistedState, StateBatch

__all__ = ["AcknowledgeType", "RecordState", "SharePartition"]


#: The longest run of one state read back; what this broker writes is bounded by
#: group.share.partition.max.record.locks and one batch.
_MAX_LOADED_RUN = 1_000_000


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch / ShareAcknowledge's AcknowledgeTypes."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(slots=True)
class _InFlight:
    state: RecordState
    delivery_count: int
    member_id: str = ""
    lock_id: int = 0  # the acquisition whose lock timer releases it


class SharePartition:
    def __init__(
        self,
        group_id: str,
        topic_id: str,
        tp: TopicPartition,
        start_offset: int,
        *,
        delivery_count_limit: int,
        max_in_flight: int,
    ) -> None:
        self.group_id = group_id
        self.topic_id = topic_id
        self.tp = tp
        self.start_offset = start_offset
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.state_epoch = 0
        #: the partition's leader epoch when this leader loaded it (written with
        #: the state: the share coordinator fences an older leader's writes)
        self.leader_epoch = -1
        self.in_flight: dict[int, _InFlight] = {}
        # One past the highest offset ever acquired or persisted.
        self.end_offset = start_offset
        self._lock_ids = 0

    # ------------------------------------------------------------ loading

    @classmethod
    def from_persisted(
        cls,
        group_id: str,
        topic_id: str,
        tp: TopicPartition,
        st: PersistedState,
        *,
        delivery_count_limit: int,
        max_in_flight: int,
    ) -> SharePartition:
        sp = cls(
            group_id,
            topic_id,
            tp,
            st.start_offset,
            delivery_count_limit=delivery_count_limit,
            max_in_flight=max_in_flight,
        )
        sp.state_epoch = st.state_epoch
        for b in st.batches:
            if b.last_offset - max(b.first_offset, st.start_offset) >= _MAX_LOADED_RUN:
                continue  # not state this broker wrote: in flight is far less
            if b.delivery_state not in RecordState._value2member_map_:
                continue
            state = RecordState(b.delivery_state)
            if state is RecordState.ACQUIRED:  # nobody holds a lock after a restart
                state = RecordState.AVAILABLE
            for o in range(max(b.first_offset, st.start_offset), b.last_offset + 1):
                sp.in_flight[o] = _InFlight(state, b.delivery_count)
            sp.end_offset = max(sp.end_offset, b.last_offset + 1)
        sp._advance_start()
        return sp

    def persisted(self) -> PersistedState:
        """The state to save: the start offset and runs of in-flight offsets
        (an ACQUIRED record is saved AVAILABLE with its delivery count: after
        a restart nobody holds it)."""
        batches: list[StateBatch] = []
        run: list[int] | None = None  # first, last, state, count
        for o in sorted(self.in_flight):
            e = self.in_flight[o]
            state = RecordState.AVAILABLE if e.state is RecordState.ACQUIRED else e.state
            if (
                run is not None
                and run[1] == o - 1
                and run[2] == state
                and run[3] == e.delivery_count
            ):
                run[1] = o
                continue
            if run is not None:
                batches.append(StateBatch(run[0], run[1], run[2], run[3]))
            run = [o, o, int(state), e.delivery_count]
        if run is not None:
            batches.append(StateBatch(run[0], run[1], run[2], run[3]))
        return PersistedState(self.start_offset, self.state_epoch, self.leader_epoch, batches)

    # ------------------------------------------------------------ fetching

    def next_fetch_offset(self) -> int:
        """The first offset that may be acquired now."""
        o = self.start_offset
        while o < self.end_offset:
            e = self.in_flight.get(o)
            if e is None or e.state is RecordState.AVAILABLE:
                return o
            o += 1
        return o

    def can_acquire(self) -> bool:
        return self.next_fetch_offset() < self.end_offset or (
            self.end_offset - self.start_offset < self.max_in_flight
        )

    def move_start(self, log_start_offset: int) -> None:
        """Records deleted from the log (retention, DeleteRecords) are gone
        from the queue too."""
        if log_start_offset > self.start_offset:
            for o in range(self.start_offset, min(log_start_offset, self.end_offset)):
                self.in_flight.pop(o, None)
            self.start_offset = log_start_offset
            self.end_offset = max(self.end_offset, log_start_offset)
            self._advance_start()

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int]],
        max_records: int,
        *,
        record_limit: bool = False,
        aborted: frozenset[int] = frozenset(),
    ) -> tuple[list[tuple[int, int, int]], int, int]:
        """Acquire for ``member_id`` the available records of ``batches``
        ((base offset, last offset) of the fetched log batches, in order), a
        whole batch at a time, until ``max_records`` are acquired; with
        ``record_limit`` (KIP-1206's ShareAcquireMode RECORD_LIMIT) no more
        than ``max_records``, the rest of the last batch left available.
        Records of the batches whose base offsets are in ``aborted`` (an
        aborted transaction's, under ``share.isolation.level=read_committed``)
        are archived, never delivered (Kafka's
        filterAbortedTransactionalAcquiredRecords). Returns the acquired runs
        (first, last, delivery count), the lock id their timer must name, and
        how many leading batches were used."""
        self._lock_ids += 1
        lock_id = self._lock_ids
        out: list[tuple[int, int, int]] = []
        taken = 0
        used = 0
        for base, last in batches:
            if taken >= max_records:
                break
            full = False
            used += 1
            for o in range(max(base, self.start_offset), last + 1):
                if o >= self.end_offset and o - self.start_offset >= self.max_in_flight:
                    # Too many in flight: new records wait for the start to move.
                    full = True
                    break
                if record_limit and taken >= max_records:
                    full = True  # the rest of the batch stays available
                    break
                e = self.in_flight.get(o)
                if e is None:
                    e = self.in_flight[o] = _InFlight(RecordState.AVAILABLE, 0)
                elif e.state is not RecordState.AVAILABLE:
                    continue
                if base in aborted:
                    e.state = RecordState.ARCHIVED
                    continue
                e.state = RecordState.ACQUIRED
                e.delivery_count += 1
                e.member_id = member_id
                e.lock_id = lock_id
                taken += 1
                if out and out[-1][1] == o - 1 and out[-1][2] == e.delivery_count:
                    out[-1] = (out[-1][0], o, e.delivery_count)
                else:
                    out.append((o, o, e.delivery_count))
            if full:
                self.end_offset = max(self.end_offset, o)
                break
            self.end_offset = max(self.end_offset, last + 1)
        if aborted:
            self._advance_start()  # archived records at the head move the start
        return out, lock_id, used

    # ------------------------------------------------------------ acknowledging

    def acknowledge(self, member_id: str, batches: Iterable[tuple[int, int, list[int]]]) -> int:
        """Apply a member's acknowledgements: every offset must be ACQUIRED by
        it (INVALID_RECORD_STATE otherwise, and nothing of that batch
        changes). Renew (KIP-1222) keeps the record acquired; the caller
        restarts its lock."""
        checked: list[tuple[int, int, list[int]]] = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST
            if any(t not in AcknowledgeType._value2member_map_ for t in types):
                return ErrorCode.INVALID_REQUEST
            if last >= self.end_offset:
                # never delivered: and the walk below stays within what is in flight
                return ErrorCode.INVALID_RECORD_STATE
            # Offsets below the start offset are done already: Kafka ignores them.
            for o in range(max(first, self.start_offset), last + 1):
                t = types[0] if len(types) == 1 else types[o - first]
                e = self.in_flight.get(o)
                if t == AcknowledgeType.GAP and e is None:
                    continue
                if e is None or e.state is not RecordState.ACQUIRED or e.member_id != member_id:
                    return ErrorCode.INVALID_RECORD_STATE
            checked.append((first, last, types))
        for first, last, types in checked:
            for o in range(max(first, self.start_offset), last + 1):
                t = types[0] if len(types) == 1 else types[o - first]
                e = self.in_flight.get(o)
                if e is None:
                    continue
                if t == AcknowledgeType.ACCEPT:
                    self._set(e, RecordState.ACKNOWLEDGED)
                elif t == AcknowledgeType.RELEASE:
                    self._release(e)
                elif t in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                    self._set(e, RecordState.ARCHIVED)
        self._advance_start()
        return ErrorCode.NONE

    def renew(self, member_id: str, offsets: Iterable[int], lock_id: int) -> None:
        for o in offsets:
            e = self.in_flight.get(o)
            if e is not None and e.state is RecordState.ACQUIRED and e.member_id == member_id:
                e.lock_id = lock_id

    def new_lock_id(self) -> int:
        self._lock_ids += 1
        return self._lock_ids

    def release_member(self, member_id: str) -> int:
        """Every record ``member_id`` holds goes back (its session closed, it
        left the group); how many."""
        n = 0
        for e in self.in_flight.values():
            if e.state is RecordState.ACQUIRED and e.member_id == member_id:
                self._release(e)
                n += 1
        self._advance_start()
        return n

    def expire_lock(self, offsets: Iterable[int], lock_id: int) -> int:
        """The acquisition lock ``lock_id`` ran out: its records still held
        under it go back. How many."""
        n = 0
        for o in offsets:
            e = self.in_flight.get(o)
            if e is not None and e.state is RecordState.ACQUIRED and e.lock_id == lock_id:
                self._release(e)
                n += 1
        if n:
            self._advance_start()
        return n

    def _release(self, e: _InFlight) -> None:
        if e.delivery_count >= self.delivery_count_limit:
            self._set(e, RecordState.ARCHIVED)
        else:
            self._set(e, RecordState.AVAILABLE)

    @staticmethod
    def _set(e: _InFlight, state: RecordState) -> None:
        e.state = state
        e.member_id = ""
        e.lock_id = 0

    def _advance_start(self) -> None:
        o = self.start_offset
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        while True:
            e = self.in_flight.get(o)
            if e is None or e.state not in done:
                break
            del self.in_flight[o]
            o += 1
        self.start_offset = o
        self.end_offset = max(self.end_offset, o)

    def counts(self) -> dict[str, int]:
        out = {s.name: 0 for s in RecordState}
        for e in self.in_flight.values():
            out[e.state.name] += 1
        return out


#: how a manager hears that records became available again
ReleasedHook = Callable[[SharePartition], None]
