"""pylog.protocol.client.KafkaConnection against a real broker: pipelined
requests answered in order, and a clear error when no address answers."""

from __future__ import annotations

import socket

import pytest

from pylog.errors import KafkaError
from pylog.protocol import ApiKey
from pylog.protocol.client import KafkaConnection
from pylog.testing import broker


def test_pipelined_requests_come_back_in_order() -> None:
    with broker() as b, KafkaConnection(f"127.0.0.1:1,{b.bootstrap_servers}") as c:
        c.send(
            ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
        )
        c.send(ApiKey.METADATA, 12, {"topics": None})
        versions = c.recv(ApiKey.API_VERSIONS, 3)
        metadata = c.recv(ApiKey.METADATA, 12)
        assert versions.error_code == 0
        assert {k.api_key for k in versions.api_keys} >= {ApiKey.FETCH, ApiKey.JOIN_GROUP}
        assert [x.port for x in metadata.brokers] == [b.port]
        again = c.request(ApiKey.METADATA, 12, {"topics": None})
        assert again.cluster_id == metadata.cluster_id


def test_no_reachable_address_names_every_one_tried() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(KafkaError, match=f"127.0.0.1:{port}.*nohost-x:9"):
        KafkaConnection(f"127.0.0.1:{port}, nohost-x:9", timeout=2)
