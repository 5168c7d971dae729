"""The wire codec's per-request cost, beside kafka-python's codec on the same
messages in the same run.

- decode a Produce v9 request (one topic, one partition) with 1 KiB and with
  1 MiB of records: parse_request_header + decode_request. The records are a
  memoryview into the frame, so both sizes should cost the same.
- encode a Fetch v12 and v16 response (one partition, 1 MiB of records):
  encode_response, which passes the records object through as its own chunk.

    .venv/bin/python -m pytest -q -s bench/test_protocol_bench.py
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse as KpFetchResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest

from pylog.protocol import (
    ApiKey,
    RequestHeader,
    decode_request,
    encode_request,
    encode_response,
    parse_request_header,
)

KiB, MiB = 1 << 10, 1 << 20
MEDIANS: dict[str, float] = {}


def _record(name: str, benchmark: Any) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        MEDIANS[name] = stats.stats.median  # the median: steadier than the mean on a busy machine


def produce_frame(size: int) -> bytes:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {"name": "bench-topic", "partition_data": [{"index": 0, "records": b"\x01" * size}]}
        ],
    }
    return encode_request(ApiKey.PRODUCE, 9, 17, "bench-client", body)


def pylog_decode(frame: memoryview) -> Any:
    header = parse_request_header(frame)
    return decode_request(header, frame)


@pytest.mark.parametrize("size", [KiB, MiB], ids=["1KiB", "1MiB"])
def test_pylog_decode_produce_v9(benchmark: Any, size: int) -> None:
    frame = memoryview(produce_frame(size))[4:]
    benchmark.group = "decode Produce v9 request"
    req = benchmark(pylog_decode, frame)
    assert len(req.topic_data[0].partition_data[0].records) == size
    _record(f"pylog produce {size}", benchmark)


@pytest.mark.parametrize("size", [KiB, MiB], ids=["1KiB", "1MiB"])
def test_kafka_python_decode_produce_v9(benchmark: Any, size: int) -> None:
    data = produce_frame(size)
    benchmark.group = "decode Produce v9 request"
    req = benchmark(KpProduceRequest.decode, data, version=9, header=True, framed=True)
    assert len(req.topic_data[0].partition_data[0].records) == size
    _record(f"kafka-python produce {size}", benchmark)


TOPIC_ID = uuid.UUID("6a3b1a8e-6f7c-4b8e-9a35-0b7c7e2f9d11")
RECORDS = b"\x02" * MiB


def fetch_body() -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "bench-topic",
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 1_000_000,
                        "last_stable_offset": 1_000_000,
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": RECORDS,
                    }
                ],
            }
        ],
    }


@pytest.mark.parametrize("version", [12, 16])
def test_pylog_encode_fetch_response(benchmark: Any, version: int) -> None:
    header = RequestHeader(ApiKey.FETCH, version, 99, "bench-client", 0)
    body = fetch_body()
    benchmark.group = f"encode Fetch v{version} response, 1 MiB records"
    chunks = benchmark(encode_response, header, body)
    assert chunks[1] is RECORDS
    _record(f"pylog fetch v{version}", benchmark)


@pytest.mark.parametrize("version", [12, 16])
def test_kafka_python_encode_fetch_response(benchmark: Any, version: int) -> None:
    cls = KpFetchResponse[version]
    ft = KpFetchResponse.FetchableTopicResponse
    pd = ft.PartitionData

    def encode() -> bytes:
        # what a broker written with kafka-python's classes would do per response
        body = fetch_body()
        topics = [
            ft(
                topic=t["topic"],
                topic_id=t["topic_id"],
                partitions=[pd(**p) for p in t["partitions"]],
            )
            for t in body.pop("responses")
        ]
        msg = cls(responses=topics, **body)
        msg.with_header(correlation_id=99)
        return bytes(msg.encode(header=True, framed=True))

    benchmark.group = f"encode Fetch v{version} response, 1 MiB records"
    data = benchmark(encode)
    assert len(data) > MiB
    _record(f"kafka-python fetch v{version}", benchmark)


def test_print_figures(capsys: pytest.CaptureFixture[str]) -> None:
    if len(MEDIANS) < 8:
        pytest.skip("benchmarks disabled or filtered")
    rows = [
        ("decode Produce v9, 1 KiB records", "produce 1024"),
        ("decode Produce v9, 1 MiB records", "produce 1048576"),
        ("encode Fetch v12 response, 1 MiB records", "fetch v12"),
        ("encode Fetch v16 response, 1 MiB records", "fetch v16"),
    ]
    with capsys.disabled():
        print("\n[wire codec] µs per message (median), pylog vs kafka-python in the same run")
        for label, key in rows:
            ours, theirs = MEDIANS[f"pylog {key}"], MEDIANS[f"kafka-python {key}"]
            print(
                f"  {label:<42} pylog {ours * 1e6:8.2f} µs   kafka-python {theirs * 1e6:9.2f} µs"
                f"   ({theirs / ours:.1f}x)"
            )
        small, big = MEDIANS["pylog produce 1024"], MEDIANS["pylog produce 1048576"]
        print(f"  Produce decode, 1 MiB / 1 KiB records: {big / small:.2f} (1.0 = zero copy)")
