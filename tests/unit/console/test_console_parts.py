"""The console's pure parts: how record bytes are shown, how the forms'
timestamps and headers are read, the lag history's bounds and its chart,
and the audit log."""

from __future__ import annotations

import logging

import pytest

from pylog.console import lag_history
from pylog.console.app import parse_headers, parse_timestamp
from pylog.console.audit import AuditLog
from pylog.console.lag_history import LagHistory
from pylog.console.record_format import MAX_SHOWN, render_bytes


def test_bytes_as_text_json_and_hex() -> None:
    assert render_bytes(None, "text") is None
    assert render_bytes(b"<script>x</script>", "text") == "<script>x</script>"  # escaped later
    assert render_bytes(b"\xff\xfeab", "text") == "\ufffd\ufffdab"
    assert render_bytes(b'{"a":[1,2]}', "json") == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert render_bytes(b"not json", "json") == "not json"
    assert render_bytes(b"k2", "hex") == "6b 32"
    assert render_bytes(b"", "hex") == ""


def test_large_values_are_cut() -> None:
    shown = render_bytes(b"a" * (MAX_SHOWN + 10), "text")
    assert shown is not None
    assert shown.startswith("a" * MAX_SHOWN)
    assert shown.endswith(f"({MAX_SHOWN + 10} bytes)")


def test_timestamps() -> None:
    assert parse_timestamp("") is None
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("1970-01-01T00:00:01") == 1000  # UTC when no offset is named
    assert parse_timestamp("1970-01-01T01:00:01+01:00") == 1000
    assert parse_timestamp("yesterday") is None


def test_headers() -> None:
    assert parse_headers("a: 1\n\nb:x:y\nnovalue\n") == [
        ("a", b"1"),
        ("b", b"x:y"),
        ("novalue", None),
    ]


def test_lag_history_is_bounded_and_charted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lag_history, "MAX_GROUPS", 2)
    monkeypatch.setattr(lag_history, "MAX_POINTS", 3)
    h = LagHistory(lambda g: 0, interval_s=0)
    assert h.chart("g1") is None
    for lag in (5, 1, 2, 3):
        h.add("g1", lag)
    assert [lag for _, lag in h.series("g1")] == [1, 2, 3]  # the oldest sample dropped
    h.add("g2", 0)
    h.add("g3", 0)
    assert h.series("g1") == []  # the least recently seen group dropped
    chart = h.chart("g2")
    assert chart is None  # one sample: nothing to draw yet
    h.add("g3", 10)
    chart = h.chart("g3")
    assert chart is not None
    assert chart.max_lag == 10
    (x0, y0, _, lag0), (x1, y1, _, lag1) = chart.samples
    assert (lag0, lag1) == (0, 10)
    assert x0 < x1 and y1 < y0  # later to the right, more lag higher up
    assert min(y0, y1) >= 0 and max(y0, y1) <= chart.height


def test_audit_log_records_and_quotes(caplog: pytest.LogCaptureFixture) -> None:
    audit = AuditLog()
    with caplog.at_level(logging.INFO, logger="pylog.console.audit"):
        audit.record("User:alice", "10.0.0.1", "create topic", "t\nforged line", "ok")
        audit.record("User:alice", "10.0.0.1", "produce to", "t-0", "refused: read-only console")
        # a name typed at sign-in cannot forge a line either
        audit.record("User:x\nconsole change by User:admin", "10.0.0.1", "sign in", "x", "failed")
    entries = audit.entries()
    assert [e.action for e in entries] == ["sign in", "produce to", "create topic"]  # newest first
    assert len(caplog.records) == 3
    assert all("\n" not in r.getMessage() for r in caplog.records)
    assert "User:alice" in caplog.records[0].getMessage()
