"""A request handler waiting on an EagerFuture (what the purgatories hand out)
resumes, and its answer is written, inside the ``set_result`` that completes
it, not on a later turn of the event loop; on real loopback connections of a
SocketServer. Awaited in a task of its own it is an ordinary future."""

from __future__ import annotations

import asyncio
import struct

from pylog.network import ListenerSpec, Request, SocketServer
from pylog.network.eager_future import EagerFuture
from pylog.network.request_channel import Chunk

API_VERSIONS = 18


class WakingHandler:
    """Body byte 0: W waits (as a Fetch in the purgatory) on an EagerFuture,
    T does the same after a first wait that a task carries on, K completes the
    waiting future (as an append does); each answer echoes the body."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.waiting: EagerFuture[str] | None = None
        self.parked = asyncio.Event()

    async def handle(self, request: Request) -> list[Chunk] | None:
        body = bytes(request.frame[request.header.header_size :])
        cmd = body[:1]
        if cmd in (b"W", b"T"):
            if cmd == b"T":
                await asyncio.sleep(0)  # carried on by a task from here
            fut: EagerFuture[str] = EagerFuture()
            self.waiting = fut
            request.mark_local_complete()
            self.parked.set()
            got = await fut
            self.events.append(f"{cmd.decode()} resumed with {got}")
        elif cmd == b"K":
            assert self.waiting is not None
            # What the loop runs next, queued before the result is set (a
            # task's wake-up would be queued behind it).
            asyncio.get_running_loop().call_soon(self.events.append, "next turn")
            self.events.append("K completes")
            self.waiting.set_result("data")
            self.events.append("K answers")
        payload = struct.pack(">i", request.header.correlation_id) + body
        return [struct.pack(">i", len(payload)), payload]


def frame(corr: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", API_VERSIONS, 0, corr, 4) + b"test"
    return struct.pack(">i", len(header) + len(body)) + header + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def run_waking(first: bytes) -> list[str]:
    async def main() -> list[str]:
        h = WakingHandler()
        server = SocketServer([ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], h)
        port = (await server.startup())["PLAINTEXT"]
        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            w1.write(frame(1, first))
            await asyncio.wait_for(h.parked.wait(), 20)
            w2.write(frame(2, b"K"))
            assert await asyncio.wait_for(read_response(r2), 20) == (2, b"K")
            assert await asyncio.wait_for(read_response(r1), 20) == (1, first)
            w1.close()
            w2.close()
        finally:
            await server.shutdown(timeout=5)
        return h.events

    return asyncio.run(main())


def test_a_waiting_handler_is_answered_inside_the_request_that_woke_it() -> None:
    # Not on a later turn of the loop, nor after K's own answer: inside
    # set_result, as Kafka answers a Fetch inside the append that woke it.
    events = run_waking(b"W")
    assert events == ["K completes", "W resumed with data", "K answers", "next turn"]


def test_a_handler_carried_on_by_a_task_leaves_it_for_an_eager_wait() -> None:
    events = run_waking(b"T")
    assert events == ["K completes", "T resumed with data", "K answers", "next turn"]


def test_awaited_in_a_task_an_eager_future_is_an_ordinary_future() -> None:
    async def main() -> list[str]:
        seen: list[str] = []
        fut: EagerFuture[str] = EagerFuture()

        async def waiter() -> None:
            seen.append(f"waiter got {await fut}")

        task = asyncio.get_running_loop().create_task(waiter())
        await asyncio.sleep(0)
        fut.set_result("data")
        seen.append("set")
        await task
        return seen

    assert asyncio.run(main()) == ["set", "waiter got data"]


def test_eager_callbacks_run_once_and_a_failing_one_is_contained() -> None:
    async def main() -> list[str]:
        seen: list[str] = []
        fut: EagerFuture[int] = EagerFuture()

        def boom() -> None:
            raise RuntimeError("a bug in a resumed handler")

        fut.add_eager_callback(lambda: seen.append(f"first {fut.result()}"))
        fut.add_eager_callback(boom)
        fut.add_eager_callback(lambda: seen.append("third"))
        fut.set_result(7)  # boom is logged, not raised to the completer
        fut.add_eager_callback(lambda: seen.append("late"))  # done: runs now
        cancelled: EagerFuture[int] = EagerFuture()
        cancelled.add_eager_callback(lambda: seen.append(f"cancelled {cancelled.cancelled()}"))
        assert cancelled.cancel()
        assert not cancelled.cancel()
        return seen

    assert asyncio.run(main()) == ["first 7", "third", "late", "cancelled True"]
