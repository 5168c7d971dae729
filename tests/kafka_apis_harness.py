"""An in-process broker core for the KafkaApis tests: real LogManager, metadata
store, ReplicaManager and KafkaApis on files under a temporary directory;
requests encoded with the protocol codec, responses decoded back (FileRecords
slices read from the segment files, as sendfile would send them)."""

from __future__ import annotations

import itertools
import time
from typing import Any

from pylog.broker.kafka_apis import KafkaApis
from pylog.errors import CloseConnection
from pylog.log import LogManager
from pylog.metadata import JsonMetadataStore
from pylog.network import Request
from pylog.protocol import decode_response, encode_request, parse_request_header
from pylog.records import FileRecords
from pylog.server.config import KafkaConfig
from pylog.server.replica_manager import ReplicaManager


class Core:
    def __init__(self, data_dir: str, **props: Any) -> None:
        self.data_dir = data_dir
        base = {
            "log.dirs": data_dir,
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "node.id": 0,
        }
        base.update({k.replace("_", "."): v for k, v in props.items()})
        self.config = KafkaConfig.from_props(base)
        self.log_manager = LogManager(self.config.log)
        self.store = JsonMetadataStore(self.config.log_dirs[0])
        self.rm = ReplicaManager(self.log_manager, self.store, broker_id=self.config.broker_id)
        self.rm.startup()
        self.apis = KafkaApis(self.config, self.rm, self.store)
        self._corr = itertools.count(1)
        self.local_completed = 0

    def close(self) -> None:
        self.rm.shutdown()
        self.log_manager.shutdown()

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> tuple[Request, int]:
        corr = next(self._corr)
        raw = encode_request(api_key, version, corr, "test-client", body)
        frame = memoryview(bytearray(raw[4:]))
        header = parse_request_header(frame)
        req = Request(
            header=header,
            frame=frame,
            connection_id="c1",
            client_host="127.0.0.1",
            listener="PLAINTEXT",
            received_ns=time.monotonic_ns(),
        )
        return req, corr

    async def raw_call(self, api_key: int, version: int, body: dict[str, Any]) -> bytes | None:
        req, _ = self.request(api_key, version, body)
        chunks = await self.apis.handle(req)
        if req.local_complete_ns:
            self.local_completed += 1
        if chunks is None:
            return None
        return b"".join(c.read_bytes() if isinstance(c, FileRecords) else bytes(c) for c in chunks)

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        raw = await self.raw_call(api_key, version, body)
        assert raw is not None, "no response"
        return decode_response(api_key, version, raw, framed=True)


async def expect_close(core: Core, api_key: int, version: int, body: dict[str, Any]) -> None:
    try:
        await core.raw_call(api_key, version, body)
    except CloseConnection:
        return
    raise AssertionError("the connection was not closed")
