"""The planning rules of pylog.spark without a Spark session: option parsing
and refusals, offset-range splits, the streaming rate limit, and the native
columnar reads that feed it (Arrow batches in Spark's schema, exact ranges)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pylog import _native
from pylog.spark._arrow import arrow_schema, to_record_batch
from pylog.spark._options import (
    OffsetRange,
    PylogOptionError,
    parse_read_options,
    snap_to,
    split_ranges,
)
from pylog.spark.source import _rate_limit


def test_options_parse_like_sparks_kafka_source() -> None:
    o = parse_read_options(
        {"path": "/a, /b", "subscribe": "t1,t2", "includeHeaders": "TRUE"}, False
    )
    assert o.paths == ["/a", "/b"] and o.subscribe == ["t1", "t2"] and o.include_headers
    assert o.starting == "earliest" and o.ending == "latest" and o.fail_on_data_loss
    o = parse_read_options({"kafka.bootstrap.servers": "h:1", "assign": '{"t":[0,2]}'}, True)
    assert o.assign == {"t": [0, 2]} and o.starting == "latest" and o.servers == "h:1"
    o = parse_read_options(
        {"path": "/a", "subscribePattern": "t.*", "startingOffsets": '{"t":{"0":5,"1":-2}}'}, False
    )
    assert o.starting == {("t", 0): 5, ("t", 1): -2}
    bad = {
        "ending offset not valid in streaming": ({"endingOffsets": "latest"}, True),
        "must be 'true' or 'false'": ({"failOnDataLoss": "yes"}, False),
        "'maxoffsetspertrigger' must be a positive integer": ({"maxOffsetsPerTrigger": "-1"}, True),
        "can't be earliest for batch": ({"endingOffsets": '{"t":{"0":-2}}'}, False),
        "read_committed needs 'kafka.bootstrap.servers'": (
            {"kafka.isolation.level": "read_committed"},
            False,
        ),
        "must be read_uncommitted or read_committed": ({"kafka.isolation.level": "x"}, False),
        "'groupIdPrefix' need 'kafka.bootstrap.servers'": ({"kafka.group.id": "g"}, True),
        "'upToLogEnd' reads segment files": (
            {"upToLogEnd": "true", "kafka.bootstrap.servers": "h:1"},
            False,
        ),
        "'kafka.security.protocol' must be one of": (
            {"kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "TLS"},
            False,
        ),
        "SASL_PLAINTEXT needs a user": (
            {
                "kafka.bootstrap.servers": "h:1",
                "kafka.security.protocol": "SASL_PLAINTEXT",
                "kafka.sasl.mechanism": "PLAIN",
            },
            False,
        ),
        "'kafka.sasl.mechanism' must be one of": (
            {"kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SASL_SSL"},
            False,
        ),
    }
    for want, (extra, streaming) in bad.items():
        with pytest.raises(PylogOptionError, match=want):
            parse_read_options({"path": "/a", "subscribe": "t", **extra}, streaming)


def test_splits_cover_each_range_exactly() -> None:
    ranges = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 10, 20), OffsetRange("t", 2, 5, 5)]
    for min_parts, max_recs, cuts in [
        (None, None, None),
        (None, 64, None),
        (7, None, {("t", 0): [300, 900]}),
        (50, 100, {("t", 0): [500]}),
    ]:
        pieces = split_ranges(ranges, min_parts, max_recs, cuts)
        for tp in (0, 1):
            mine = [(r.start, r.end) for r in pieces if r.partition == tp]
            src = next(r for r in ranges if r.partition == tp)
            # contiguous, non-empty, from start to end
            assert mine[0][0] == src.start and mine[-1][1] == src.end
            assert all(a < b for a, b in mine)
            assert all(mine[i][1] == mine[i + 1][0] for i in range(len(mine) - 1))
            if max_recs:
                assert max(b - a for a, b in mine) <= max_recs
        assert not [r for r in pieces if r.partition == 2]
        if min_parts:
            assert len(pieces) >= min_parts
        if cuts:
            assert any(r.start == 500 or r.start == 300 for r in pieces)


def test_split_points_move_back_to_batch_starts() -> None:
    pieces = split_ranges([OffsetRange("t", 0, 0, 100)], None, 25, None)
    assert [(r.start, r.end) for r in pieces] == [(0, 25), (25, 50), (50, 75), (75, 100)]
    snapped = snap_to(pieces, {("t", 0): [0, 10, 20, 30, 60, 74]})
    assert [(r.start, r.end) for r in snapped] == [(0, 20), (20, 30), (30, 74), (74, 100)]
    # no batch start inside a piece: the split stays where it was
    assert snap_to(pieces, {("t", 0): [0]}) == pieces


def test_rate_limit_spreads_by_backlog() -> None:
    base = {("t", 0): 0, ("t", 1): 100}
    assert _rate_limit(base, {("t", 0): 10, ("t", 1): 110}, 100) == {("t", 0): 10, ("t", 1): 110}
    got = _rate_limit(base, {("t", 0): 300, ("t", 1): 200}, 100)
    assert got == {("t", 0): 75, ("t", 1): 125}


def test_segment_columns_become_spark_shaped_arrow(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    recs = [(b"k%d" % i if i % 2 else None, b"v%d" % i, [("h", b"x")], 1000 + i) for i in range(50)]
    with open(log, "wb") as f:
        for base in (0, 50):
            f.write(_native.build_batch(recs, base_offset=base, compression=4))
    cols, pos, nxt, done = _native.read_segment_columns(
        str(log), 0, None, 20, 70, include_headers=True
    )
    # both batches hold wanted offsets: read whole, the second's end is next
    assert (pos, nxt, done) == (log.stat().st_size, 100, True)
    b = to_record_batch(cols, "t", 3, True)
    assert b.schema == arrow_schema(True)
    rows = b.to_pylist()
    assert [r["offset"] for r in rows] == list(range(20, 70))
    assert rows[0]["key"] is None and rows[1]["key"] == b"k21" and rows[30]["value"] == b"v0"
    assert rows[0]["headers"] == [{"key": "h", "value": b"x"}]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {3}
    assert rows[0]["timestamp"].timestamp() == pytest.approx(1.020)
