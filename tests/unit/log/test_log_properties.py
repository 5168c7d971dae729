"""Log against an in-memory model: random appends, reads, truncations, rolls,
retention and reopens must keep the log's records equal to the model's."""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from conftest import build_batch
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from support.clock import ManualClock
from support.scheduler import ManualScheduler

from pylog import _native
from pylog.log.config import LogConfig
from pylog.log.log import FetchIsolation, Log

T0 = 1_700_000_000_000


def split_batches(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    while pos + 12 <= len(data):
        size = 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        if pos + size > len(data):
            break
        out.append(data[pos : pos + size])
        pos += size
    return out


def read_all(log: Log, start: int, isolation: FetchIsolation) -> list[tuple[int, bytes]]:
    """Every record from ``start`` to the isolation bound, fetching as a consumer does."""
    out: list[tuple[int, bytes]] = []
    offset = start
    while True:
        data = log.read(offset, 700, isolation, min_one_message=True).records.read_bytes()
        batches = split_batches(data)
        if not batches:
            return out
        for b in batches:
            for r in _native.decode_records(b):
                if r.offset >= offset:
                    assert r.value is not None
                    out.append((r.offset, r.value))
        offset = out[-1][0] + 1 if out else offset
        if offset >= log.log_end_offset:
            return out


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="pylog-prop-")
        self.clock = ManualClock(T0)
        self.scheduler = ManualScheduler(self.clock)
        self.config = LogConfig.from_props(
            {
                "internal.segment.bytes": 400,
                "segment.index.bytes": 64,
                "index.interval.bytes": 50,
                "retention.ms": -1,
                "file.delete.delay.ms": 0,
                "message.timestamp.after.max.ms": 2**63 - 1,
            }
        )
        # The model: offset → value, and where each batch starts.
        self.records: dict[int, bytes] = {}
        self.batch_starts: list[int] = []
        self.leo = 0
        self.log_start = 0
        self.counter = 0
        self.log = self._open()

    def _open(self, clean: bool = True, recovery_point: int = 0) -> Log:
        return Log.open(
            self.dir,
            self.config,
            scheduler=self.scheduler,
            clock=self.clock,
            had_clean_shutdown=clean,
            recovery_point=recovery_point,
            log_start_offset=self.log_start,
        )

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- operations

    @rule(n=st.integers(1, 5), size=st.integers(0, 50), dt=st.integers(0, 50))
    def append(self, n: int, size: int, dt: int) -> None:
        self.clock.advance(dt)
        values = []
        for _ in range(n):
            self.counter += 1
            values.append(b"%d:" % self.counter + b"x" * size)
        info = self.log.append_as_leader(bytearray(build_batch(values, timestamp=self.clock())), 0)
        assert info.first_offset == self.leo
        self.batch_starts.append(self.leo)
        for i, v in enumerate(values):
            self.records[self.leo + i] = v
        self.leo += n

    @rule(data=st.data())
    def read_one(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.leo))
        got = self.log.read(offset, 10_000)
        if offset == self.leo:
            assert got.records.size == 0
            return
        batches = split_batches(got.records.read_bytes())
        assert batches
        records = [r for b in batches for r in _native.decode_records(b)]
        assert records[0].offset <= offset <= records[-1].offset
        for r in records:
            assert self.records[r.offset] == r.value

    @precondition(lambda self: len(self.batch_starts) > 0)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from([*self.batch_starts, self.leo]))
        if target < self.log_start:
            return
        self.log.truncate_to(target)
        self.records = {o: v for o, v in self.records.items() if o < target}
        self.batch_starts = [b for b in self.batch_starts if b < target]
        self.leo = target

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.leo

    @precondition(lambda self: len(self.batch_starts) > 0)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        self.log.update_high_watermark(self.leo)
        target = data.draw(st.sampled_from([*self.batch_starts, self.leo]))
        self.log.maybe_increment_log_start_offset(target)
        self.log.delete_old_segments()
        self._follow_log_start()

    @rule(limit=st.integers(0, 2000))
    def retention_by_size(self, limit: int) -> None:
        self.log.update_high_watermark(self.leo)
        self.log.update_config(self._with(**{"retention.bytes": limit}))
        self.log.delete_old_segments()
        self.log.update_config(self._with(**{"retention.bytes": -1}))
        self._follow_log_start()

    @rule(age=st.integers(0, 500))
    def retention_by_time(self, age: int) -> None:
        self.log.update_high_watermark(self.leo)
        self.log.update_config(self._with(**{"retention.ms": age}))
        self.log.delete_old_segments()
        self.log.update_config(self._with(**{"retention.ms": -1}))
        self._follow_log_start()

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = self._open()

    @rule()
    def reopen_after_crash(self) -> None:
        # Segments past the recovery point are re-validated; nothing was torn,
        # so nothing may be lost.
        recovery_point = self.log.recovery_point
        self.log.close_handlers()
        self.log = self._open(clean=False, recovery_point=recovery_point)

    @rule()
    def run_background_tasks(self) -> None:
        self.scheduler.run_all()

    def _with(self, **props: object) -> LogConfig:
        return self.config.with_overrides(props)

    def _follow_log_start(self) -> None:
        new = self.log.log_start_offset
        assert new >= self.log_start
        assert new <= self.leo
        self.log_start = new
        self.scheduler.run_all()

    # -- invariants

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start
        assert self.log.log_start_offset <= self.log.high_watermark <= self.leo
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(set(bases))
        assert bases[0] <= self.log_start

    @invariant()
    def contents_agree(self) -> None:
        got = read_all(self.log, self.log_start, FetchIsolation.LOG_END)
        expected = sorted((o, v) for o, v in self.records.items() if o >= self.log_start)
        assert got == expected


LogModel.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
