"""The metrics under the Prometheus JMX exporter's Kafka names: a request
time histogram rendered as the exporter's summary (Kafka's percentiles, over
the recent window) beside pylog's buckets, and BrokerTopicStats' per-topic
and all-topics counters."""

from __future__ import annotations

import re

import pytest

from pylog.network.metrics import (
    BUCKETS_MS,
    SNAPSHOT_EVERY_S,
    Histogram,
    MetricsRegistry,
    _bucket_quantile,
    register_process_metrics,
)
from pylog.server.broker_topic_stats import BROKER_TOPIC_METERS, BrokerTopicStats


def test_bucket_quantile_interpolates_inside_the_bucket() -> None:
    bounds = (1.0, 2.0, 5.0)
    assert _bucket_quantile(bounds, [0, 0, 0, 0], 0.5) == 0.0  # nothing observed
    # 10 observations, all in (1, 2]: the median halfway through that bucket
    assert _bucket_quantile(bounds, [0, 10, 0, 0], 0.5) == pytest.approx(1.5)
    assert _bucket_quantile(bounds, [5, 5, 0, 0], 0.5) == pytest.approx(1.0)
    assert _bucket_quantile(bounds, [0, 0, 0, 4], 0.99) == 5.0  # overflow: the last bound


def test_recent_quantiles_forget_old_observations() -> None:
    h = Histogram()
    for _ in range(100):
        h.observe(200.0)  # slow at first
    start = 1000.0
    first = dict(h.recent_quantiles(start))
    assert set(first) == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert 100.0 < first["0.99"] <= 250.0
    for _ in range(100):
        h.observe(0.3)  # then fast
    # A minute on, the window starts at the first snapshot: only the fast ones.
    later = dict(h.recent_quantiles(start + SNAPSHOT_EVERY_S))
    assert 0.25 < later["0.99"] <= 0.5
    # Nothing more for ten minutes: the window is empty, the percentiles 0.
    for minute in range(2, 12):
        quiet = dict(h.recent_quantiles(start + minute * SNAPSHOT_EVERY_S))
    assert quiet["0.50"] == 0.0 and quiet["0.99"] == 0.0
    assert len(h.snapshots) <= 7  # bounded


def test_request_times_render_as_the_exporters_summary_and_as_buckets() -> None:
    registry = MetricsRegistry()
    m = registry.request("Produce")
    for ms in (0.2, 0.4, 3.0):
        m.record(queue_ms=0.01, local_ms=ms, remote_ms=0, response_queue_ms=0, send_ms=0,
                 total_ms=ms)  # fmt: skip
    text = registry.render()
    assert "# TYPE kafka_network_requestmetrics_totaltimems summary" in text
    p99 = re.search(
        r'^kafka_network_requestmetrics_totaltimems\{request="Produce",quantile="0.99"\} (\S+)$',
        text,
        re.M,
    )
    assert p99 is not None and 2.0 < float(p99.group(1)) <= 5.0
    assert 'kafka_network_requestmetrics_totaltimems_count{request="Produce"} 3' in text
    assert "# TYPE pylog_network_requestmetrics_totaltimems histogram" in text
    le = BUCKETS_MS[-1]
    assert (
        f'pylog_network_requestmetrics_totaltimems_bucket{{request="Produce",le="{int(le)}"}} 3'
        in text
    )
    assert 'pylog_network_requestmetrics_totaltimems_bucket{request="Produce",le="+Inf"} 3' in text


def test_broker_topic_stats_count_per_topic_and_for_all() -> None:
    stats = BrokerTopicStats()
    stats.produced("orders", failed=False, size=1000, records=10)
    stats.produced("orders", failed=True)
    stats.produced("audit", failed=False, size=50, records=1)
    stats.fetched("orders", from_follower=False, size=700)
    stats.fetched("orders", from_follower=True, size=900)  # replication, all topics only
    series = {m: dict((tuple(sorted(k.items())), v) for k, v in stats.series(m))
              for m in BROKER_TOPIC_METERS}  # fmt: skip
    assert series["BytesIn"] == {(): 1050, (("topic", "audit"),): 50, (("topic", "orders"),): 1000}
    assert series["MessagesIn"][(("topic", "orders"),)] == 10
    assert series["TotalProduceRequests"][()] == 3
    assert series["FailedProduceRequests"] == {
        (): 1,
        (("topic", "audit"),): 0,
        (("topic", "orders"),): 1,
    }
    assert series["BytesOut"] == {(): 700, (("topic", "audit"),): 0, (("topic", "orders"),): 700}
    assert series["ReplicationBytesOut"] == {(): 900}
    stats.remove("orders")  # a deleted topic's series go; the totals keep what it counted
    assert dict((tuple(k.items()), v) for k, v in stats.series("BytesIn")) == {
        (): 1050,
        (("topic", "audit"),): 50,
    }


def test_process_metrics_render() -> None:
    registry = MetricsRegistry()
    register_process_metrics(registry)
    text = registry.render()
    pool = "kafka_server_kafkarequesthandlerpool_requesthandleravgidle"
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes",
                 "process_open_fds", f"{pool}_percent", f"{pool}percent_count"):  # fmt: skip
        assert re.search(rf"^{name} \S+$", text, re.M), name
    idle = re.search(
        r"^kafka_network_socketserver_networkprocessoravgidlepercent (\S+)$", text, re.M
    )
    assert idle is not None and 0.0 <= float(idle.group(1)) <= 1.0
