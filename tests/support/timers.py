"""HeapTimer: Python's heapq behind the purgatory's ``Timer`` interface, the
reference the purgatory's tests run beside the native timing wheel to show
both behave alike."""

from __future__ import annotations

import heapq


class HeapTimer:
    """Deadlines in a heap; a cancelled id is dropped lazily when it surfaces."""

    def __init__(self, start_ms: int = 0) -> None:
        self._heap: list[tuple[int, int]] = []
        self._live: dict[int, int] = {}

    def add(self, id: int, expiration_ms: int) -> bool:
        self._live[id] = expiration_ms
        heapq.heappush(self._heap, (expiration_ms, id))
        return True

    def cancel(self, id: int) -> bool:
        return self._live.pop(id, None) is not None

    def advance(self, now_ms: int) -> list[int]:
        out: list[int] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            exp, id = heapq.heappop(heap)
            if self._live.get(id) == exp:
                del self._live[id]
                out.append(id)
        return out

    def next_expiration_ms(self) -> int | None:
        heap = self._heap
        while heap and self._live.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def __len__(self) -> int:
        return len(self._live)
