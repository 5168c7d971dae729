"""ProducerIdManager: producer ids for InitProducerId that never repeat, across
restarts too.

Ids are handed out from blocks reserved in the metadata store: the end of a
block is durable before its first id is used, so after a crash the next broker
starts past every id that may have been given out (the unused rest of the block
is skipped, as Kafka skips it).
"""

from __future__ import annotations

import threading

from pylog.metadata.store import MetadataStore

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdManager"]

PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self._store = store
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0  # exclusive; next == end means the block is used up

    def generate_producer_id(self) -> int:
        with self._lock:
            if self._next >= self._end:
                start = self._store.reserve_producer_id_block(self._block_size)
                self._next, self._end = start, start + self._block_size
            pid = self._next
            self._next += 1
            return pid
