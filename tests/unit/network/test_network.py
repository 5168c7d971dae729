"""The network layer on real loopback sockets, with a scripted request handler.

Frames are real Kafka request frames (header v1 of ApiVersions v0, parsed by
pylog.protocol); the body's first byte tells the test handler what to do.
Covers framing, pipelining with in-order responses, bad and oversize frames,
handler failures, back-pressure, idle and connection limits, sendfile of
FileRecords, and the request metrics.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pylog.errors import CloseConnection
from pylog.network import ListenerSpec, MetricsRegistry, MetricsServer, Request, SocketServer
from pylog.network.processor import LARGE_INITIAL, RECYCLED_MIN, THREAD_MIN, FrameBuffers
from pylog.network.request_channel import BULK_PRODUCE_BYTES, Chunk
from pylog.records import FileRecords

API_VERSIONS = 18


class ScriptedHandler:
    """Body byte 0: E echo, S sleep 50 ms then echo, X raise, C CloseConnection,
    N no response, F FileRecords of ``file_records``, M the chunks of ``mixed``,
    B block until ``release``, V block until ``release`` then answer with a view
    of the frame (no copy),
    L mark_local_complete then wait for ``release``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[int] = []
        self.active = 0
        self.max_active = 0
        self.file_records: FileRecords | None = None
        self.mixed: list[Chunk] = []
        self.others_active: dict[int, bool] = {}

    async def handle(self, request: Request) -> list[Chunk] | None:
        body = bytes(request.frame[request.header.header_size :])
        corr = request.header.correlation_id
        self.started.append(corr)
        self.others_active[corr] = request.others_active
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            cmd = body[:1]
            if cmd == b"S":
                await asyncio.sleep(0.05)
            elif cmd == b"X":
                raise RuntimeError("a bug in a handler")
            elif cmd == b"C":
                raise CloseConnection("refused by the test")
            elif cmd == b"N":
                return None
            elif cmd == b"B":
                await self.release.wait()
            elif cmd == b"V":
                await self.release.wait()
                view = request.frame[request.header.header_size :]
                head = struct.pack(">ii", 4 + len(view), corr)
                return [head, view]
            elif cmd == b"L":
                request.mark_local_complete()
                await self.release.wait()
            elif cmd == b"F":
                assert self.file_records is not None
                size = 4 + self.file_records.size
                return [struct.pack(">ii", size, corr), self.file_records]
            elif cmd == b"M":
                chunks: list[Chunk] = [struct.pack(">i", corr), *self.mixed]
                return [struct.pack(">i", sum(len(c) for c in chunks)), *chunks]
            payload = struct.pack(">i", corr) + body
            return [struct.pack(">i", len(payload)), payload]
        finally:
            self.active -= 1


def frame(corr: int, body: bytes = b"E", api_key: int = API_VERSIONS, version: int = 0) -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    return struct.pack(">i", len(header) + len(body)) + header + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    data = await reader.readexactly(size)
    return struct.unpack(">i", data[:4])[0], data[4:]


def run(
    test: Callable[[SocketServer, int, ScriptedHandler], Awaitable[None]], **kwargs: Any
) -> SocketServer:
    """Start a SocketServer with a ScriptedHandler, run ``test``, shut down."""

    async def main() -> SocketServer:
        handler = ScriptedHandler()
        kwargs.setdefault("metrics", MetricsRegistry())
        server = SocketServer([ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], handler, **kwargs)
        port = (await server.startup())["PLAINTEXT"]
        try:
            await asyncio.wait_for(test(server, port, handler), 20)
        finally:
            handler.release.set()
            await server.shutdown(timeout=5)
        return server

    return asyncio.run(main())


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        return True


def test_echo_and_bound_port() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        assert port > 0 and server.bound_ports == {"PLAINTEXT": port}
        r, w = await connect(port)
        w.write(frame(7, b"Ehello"))
        assert await read_response(r) == (7, b"Ehello")
        w.close()

    run(t)


def test_pipelined_responses_come_back_in_request_order() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        # A slow request first: the fast ones behind it wait for its response.
        w.write(frame(1, b"S") + b"".join(frame(i, b"E%d" % i) for i in range(2, 200)))
        corrs = [(await read_response(r))[0] for _ in range(199)]
        assert corrs == list(range(1, 200))
        w.close()

    run(t)


def test_a_connections_requests_are_handled_one_at_a_time() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(b"".join(frame(i, b"S") for i in range(5)))
        for _ in range(5):
            await read_response(r)
        assert h.max_active == 1 and h.started == list(range(5))
        w.close()

    run(t)


def test_mark_local_complete_lets_the_next_request_start() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(frame(1, b"L") + frame(2, b"E"))
        await asyncio.sleep(0.1)
        assert h.started == [1, 2]  # 2 ran while 1 waits "in the purgatory"
        h.release.set()
        assert [(await read_response(r))[0] for _ in range(2)] == [1, 2]
        w.close()

    run(t)


def test_connections_are_served_concurrently() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r1, w1 = await connect(port)
        r2, w2 = await connect(port)
        w1.write(frame(1, b"B"))
        await asyncio.sleep(0.05)
        w2.write(frame(2, b"E"))
        assert (await read_response(r2))[0] == 2  # not stuck behind connection 1
        h.release.set()
        assert (await read_response(r1))[0] == 1
        w1.close()
        w2.close()

    run(t)


def test_a_request_says_whether_another_connection_sent_one_just_before() -> None:
    # Request.others_active (large appends stay on the loop when it is False):
    # a connection alone is alone from its first request; another
    # connection's request makes both active; 100 ms without one, alone
    # again. Bulk Produce frames (128 KiB and up) do not count: two producers
    # alone append inline, another's prompt request still counts for them.
    bulk = b"E" + bytes(BULK_PRODUCE_BYTES)

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r1, w1 = await connect(port)
        r2, w2 = await connect(port)

        async def ask(w: asyncio.StreamWriter, r: asyncio.StreamReader, f: bytes) -> None:
            w.write(f)
            await read_response(r)

        await ask(w1, r1, frame(1))
        await ask(w1, r1, frame(2))
        await ask(w2, r2, frame(3))
        await ask(w1, r1, frame(4))
        await asyncio.sleep(0.15)
        await ask(w1, r1, frame(5, bulk, api_key=0))
        await ask(w2, r2, frame(6, bulk, api_key=0))
        await ask(w1, r1, frame(7, bulk, api_key=0))
        await ask(w2, r2, frame(8))
        await ask(w1, r1, frame(9, bulk, api_key=0))
        assert h.others_active == {
            1: False, 2: False, 3: True, 4: True,
            5: False, 6: False, 7: False, 8: False, 9: True,
        }  # fmt: skip
        w1.close()
        w2.close()

    run(t, socket_request_max_bytes=1 << 20)


@pytest.mark.parametrize(
    "bad",
    [
        struct.pack(">i", -1),  # negative size
        struct.pack(">i", 2000) + b"x" * 10,  # over socket.request.max.bytes
        struct.pack(">i", 4) + b"abcd",  # shorter than any request header
        struct.pack(">i", 12) + struct.pack(">hhih", 18, 0, 1, 50) + b"ab",  # client id overrun
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # not Kafka at all
    ],
    ids=["negative", "oversize", "short-header", "bad-header", "http"],
)
def test_bad_frame_closes_only_that_connection(bad: bytes) -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        good_r, good_w = await connect(port)
        bad_r, bad_w = await connect(port)
        bad_w.write(bad)
        assert await closed_by_server(bad_r)
        good_w.write(frame(5))
        assert (await read_response(good_r))[0] == 5
        assert server.bad_frames == 1
        good_w.close()

    run(t, socket_request_max_bytes=1000)


def test_truncated_frame_then_disconnect_leaves_the_server_serving() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        _r, w = await connect(port)
        w.write(frame(1, b"E" * 100_000)[:50_000])  # a large frame, cut short
        await w.drain()
        w.close()
        r2, w2 = await connect(port)
        w2.write(frame(2))
        assert (await read_response(r2))[0] == 2
        w2.close()
        await asyncio.sleep(0.05)
        assert server.channel.size == 0

    run(t)


def test_large_frames_arrive_whole() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        bodies = [b"E" + os.urandom(n) for n in (10, 70_000, 3, 1_500_000, 16_383, 16_384)]
        w.write(b"".join(frame(i, b) for i, b in enumerate(bodies)))
        for i, body in enumerate(bodies):
            assert await read_response(r) == (i, body)
        w.close()

    run(t)


@pytest.mark.parametrize("cmd", [b"X", b"C"], ids=["handler-bug", "close-connection"])
def test_handler_failure_closes_the_connection_after_earlier_responses(cmd: bytes) -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(frame(1, b"S") + frame(2, cmd) + frame(3))
        assert (await read_response(r))[0] == 1
        assert await closed_by_server(r)
        r2, w2 = await connect(port)
        w2.write(frame(4))
        assert (await read_response(r2))[0] == 4
        w2.close()

    run(t)


def test_no_response_requests_do_not_block_the_next_one() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(frame(1, b"N") + frame(2))
        assert (await read_response(r))[0] == 2
        w.close()

    run(t)


def test_queued_max_requests_stops_reading_until_the_channel_drains() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        readers = []
        for c in range(4):
            r, w = await connect(port)
            # Each connection: one blocked request, then nine queued behind it.
            w.write(b"".join(frame(c * 100 + i, b"B" if i == 0 else b"E") for i in range(10)))
            readers.append((r, w))
        await asyncio.sleep(0.2)
        # Reading stopped once 3 were queued (a frame already in a buffer may add one).
        assert server.channel.size <= 4
        paused = sum(1 for p in server.processors.values() if p._reading_paused_for)
        assert paused >= 1
        h.release.set()
        for c, (r, w) in enumerate(readers):
            got = [(await read_response(r))[0] for _ in range(10)]
            assert got == [c * 100 + i for i in range(10)]
            w.close()
        assert server.channel.size == 0

    run(t, queued_max_requests=3)


def test_idle_connections_are_closed() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(frame(1))
        await read_response(r)
        started = time.monotonic()
        assert await closed_by_server(r)
        assert time.monotonic() - started < 10

    run(t, connections_max_idle_ms=200)


def test_a_connection_holding_its_byte_bound_reads_no_new_request() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        # Each request lets the next start (mark_local_complete) but stays
        # unanswered: 600 + 600 bytes reach the 1000-byte bound, the third waits.
        w.write(b"".join(frame(i, b"L" + b"x" * 600) for i in range(5)))
        await asyncio.sleep(0.2)
        assert h.started == [0, 1]
        assert server.channel.request_bytes == 2 * len(frame(0, b"L" + b"x" * 600)) - 8
        h.release.set()
        assert [(await read_response(r))[0] for _ in range(5)] == list(range(5))
        await asyncio.sleep(0.05)
        assert server.channel.request_bytes == 0
        w.close()

    run(t, connection_max_request_bytes=1000)


def test_queued_max_request_bytes_stops_every_connection_reading() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r1, w1 = await connect(port)
        w1.write(frame(1, b"B" + b"x" * 3000))  # holds the whole budget
        await asyncio.sleep(0.1)
        r2, w2 = await connect(port)
        w2.write(frame(2))
        await asyncio.sleep(0.2)
        assert h.started == [1]  # connection 2 waits for bytes to be answered
        h.release.set()
        assert (await read_response(r1))[0] == 1
        assert (await read_response(r2))[0] == 2
        assert server.channel.request_bytes == 0
        w1.close()
        w2.close()

    run(t, queued_max_request_bytes=2000)


def test_a_large_frame_buffer_grows_as_its_bytes_arrive() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        whole = frame(1, b"E" + b"y" * 5_000_000)
        w.write(whole[:100])  # the prefix announces 5 MB: 1 MiB is taken, not 5
        await asyncio.sleep(0.1)
        assert 0 < server.channel.request_bytes <= LARGE_INITIAL
        w.write(whole[100:])
        assert await read_response(r) == (1, b"E" + b"y" * 5_000_000)
        w.close()

    run(t)


def test_a_recycled_frame_buffer_is_reused_only_once_nothing_refers_to_it() -> None:
    pool = FrameBuffers()
    first = pool.take()
    assert len(first) == LARGE_INITIAL
    first_id = id(first)  # the pool keeps it alive: the id stays its own
    view = memoryview(first)[:10]
    pool.give(first)
    del first
    second = pool.take()
    assert id(second) != first_id  # the first is still read through `view`
    pool.give(second)
    del second
    view.release()
    assert id(pool.take()) == first_id


def test_frames_in_recycled_buffers_stay_intact_while_a_request_holds_them() -> None:
    # One connection's request holds a view of its frame (answered only later,
    # zero-copy) while another connection sends frames of the recycled size:
    # none of them may land in the held buffer.
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r1, w1 = await connect(port)
        held = b"V" + os.urandom(RECYCLED_MIN + 1000)
        w1.write(frame(1, held))
        while 1 not in h.started:
            await asyncio.sleep(0.01)
        r2, w2 = await connect(port)
        for i in range(8):
            body = b"E" + os.urandom(RECYCLED_MIN + 1000 * i)
            w2.write(frame(10 + i, body))
            assert await read_response(r2) == (10 + i, body)
        h.release.set()
        assert await read_response(r1) == (1, held)
        w1.close()
        w2.close()

    run(t)


def test_a_frame_slower_than_the_idle_time_is_closed() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        whole = frame(1, b"E" * 100)
        started = time.monotonic()
        closed = False
        for i in range(len(whole)):  # a byte every 50 ms: each well within 300 ms
            w.write(whole[i : i + 1])
            await asyncio.sleep(0.05)
            if w.is_closing() or r.at_eof():
                closed = True
                break
            if time.monotonic() - started > 10:
                break
        assert closed or await closed_by_server(r)
        assert time.monotonic() - started < 10
        assert server.channel.request_bytes == 0

    run(t, connections_max_idle_ms=300)


def test_max_connections() -> None:
    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r1, w1 = await connect(port)
        r2, _w2 = await connect(port)
        w1.write(frame(1))
        assert (await read_response(r1))[0] == 1
        assert await closed_by_server(r2)
        assert server.connections_refused == 1
        w1.close()

    run(t, max_connections=1)


class Segment:
    """The SliceSource of a FileRecords: an open file."""

    def __init__(self, path: Any) -> None:
        self.log_path = str(path)
        self.fd = os.open(path, os.O_RDONLY)

    def fileno(self) -> int:
        return self.fd


@pytest.mark.parametrize("threads", [3, 0], ids=["network-threads", "no-network-threads"])
@pytest.mark.parametrize(
    "size", [100, 2 * 1024 * 1024, 6 * 1024 * 1024], ids=["small-pread", "sendfile", "large"]
)
def test_file_records_are_sent_from_the_file(tmp_path: Any, size: int, threads: int) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(size + 1000)
    path.write_bytes(data)
    segment = Segment(path)

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.file_records = FileRecords(segment, 500, size)
        r, w = await connect(port)
        w.write(frame(1, b"F") + frame(2, b"F") + frame(3))
        for corr in (1, 2):
            assert await read_response(r) == (corr, data[500 : 500 + size])
        # Read after the large responses: reading resumed, the socket non-blocking again.
        assert (await read_response(r))[0] == 3
        w.write(frame(4))
        assert (await read_response(r))[0] == 4
        w.close()

    try:
        server = run(t, network_threads=threads)
    finally:
        os.close(segment.fd)
    if size > 4096:
        assert server.sendfile_bytes == 2 * size
    if size > THREAD_MIN and threads:
        # The socket (100 KiB SO_SNDBUF) cannot take 6 MiB at once.
        assert server.network_thread_sends >= 1
    else:  # the event loop sends what the socket does not take at once
        assert server.network_thread_sends == 0
    assert server.metrics is not None
    text = server.metrics.render()
    for name in ("network_thread_sends", "network_thread_handbacks"):
        count = getattr(server, name)
        assert f"kafka_network_socketserver_{name}_total {count}\n" in text


def test_pipelined_slice_answers_stay_whole_when_the_socket_fills_mid_answer(
    tmp_path: Any,
) -> None:
    # Answers with segment slices go out by sendfile from the callback that
    # completed them while the socket takes them; a client that reads nothing
    # for a while fills its socket part-way through some answer (its bytes, or
    # a slice), and the writer task sends the rest of it, then the others.
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(20_000)
    path.write_bytes(data)
    segment = Segment(path)
    expected = b"ab" + data[13 : 13 + 8192] + b"cd" + data[9000:14000]

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.mixed = [b"ab", FileRecords(segment, 13, 8192), b"cd", FileRecords(segment, 9000, 5000)]
        r, w = await connect(port)
        w.write(b"".join(frame(i, b"M" if i % 3 else b"E") for i in range(400)))
        await asyncio.sleep(0.3)  # the answers fill the sockets meanwhile
        for i in range(400):
            corr, body = await read_response(r)
            assert corr == i
            assert body == (expected if i % 3 else b"E")
        w.close()

    try:
        server = run(t)
    finally:
        os.close(segment.fd)
    # a slice's rest under SENDFILE_MIN, once the socket filled, is read and written
    assert 0 < server.sendfile_bytes <= 266 * (8192 + 5000)


def test_a_response_of_bytes_and_several_slices_arrives_whole_and_in_order(
    tmp_path: Any,
) -> None:
    path = tmp_path / "00000000000000000000.log"
    data = os.urandom(5 * 1024 * 1024)
    path.write_bytes(data)
    segment = Segment(path)
    mib = 1024 * 1024
    slices = [
        FileRecords(segment, 7, 2 * mib),
        FileRecords(segment, 3 * mib, 100),
        FileRecords(segment, 0, 0),
        FileRecords(segment, 2 * mib + 5, 3 * mib - 5),
    ]
    expected = b"abc" + data[7 : 7 + 2 * mib] + b"defg" + data[3 * mib : 3 * mib + 100] + b"h"
    expected += data[2 * mib + 5 :] + b"tail"

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.mixed = [b"abc", slices[0], b"defg", slices[1], slices[2], b"h", slices[3], b"tail"]
        r, w = await connect(port)
        w.write(frame(1, b"M") + frame(2) + frame(3, b"M"))
        assert await read_response(r) == (1, expected)
        assert (await read_response(r))[0] == 2
        assert await read_response(r) == (3, expected)
        w.close()

    try:
        server = run(t)
    finally:
        os.close(segment.fd)
    assert server.network_thread_sends >= 1
    assert server.sendfile_bytes == 2 * (5 * mib - 5)  # the 100-byte slice is read, not sent


async def _until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (an upper bound only catches a hang)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in 10 s")


@pytest.mark.parametrize("who", ["client-closes", "server-aborts", "client-reads-late"])
def test_a_reader_that_stalls_does_not_hold_a_network_thread(tmp_path: Any, who: str) -> None:
    """A client that stops reading a large response: the network thread hands
    the rest back to the event loop (SO_SNDTIMEO) and is free for others; the
    response still arrives whole if the client reads on, and the connection's
    end (the client's close, the broker's abort) ends the send."""
    path = tmp_path / "00000000000000000000.log"
    size = 8 * 1024 * 1024
    data = os.urandom(size)
    path.write_bytes(data)
    segment = Segment(path)

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.file_records = FileRecords(segment, 0, size)
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        stalled.sendall(frame(1, b"F"))  # and do not read
        await _until(lambda: server.network_thread_handbacks == 1)
        # One network thread, and it is free while the client still stalls.
        executor = server.network_executor
        assert executor is not None
        await asyncio.wait_for(asyncio.wrap_future(executor.submit(lambda: None)), 10)
        r, w = await connect(port)
        w.write(frame(2, b"F"))
        assert await read_response(r) == (2, data)
        w.close()
        if who == "client-reads-late":
            stalled.settimeout(10)
            got = await asyncio.to_thread(lambda: stalled.makefile("rb").read(8 + size))
            assert got == struct.pack(">ii", 4 + size, 1) + data
            stalled.close()
            return
        if who == "client-closes":
            # Unread bytes: the close resets the connection.
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stalled.close()
        else:
            p = next(p for p in server.processors.values() if p.bytes_out == 0)
            p.close("test", abort=True)
        await _until(lambda: not server.processors)
        if who != "client-closes":
            stalled.close()

    try:
        run(t, network_threads=1)
    finally:
        os.close(segment.fd)


def _read_answer_slowly(port: int, corr: int, size: int) -> bytes:
    """A Java consumer's connection (receive.buffer.bytes 64 KiB) that asks
    for one answer and reads it only after a pause, so the socket fills."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.settimeout(10)
        s.sendall(frame(corr, b"F"))
        time.sleep(0.05)
        with s.makefile("rb") as f:
            return f.read(8 + size)


def test_the_rest_of_a_1_mib_answer_goes_to_a_network_thread(tmp_path: Any) -> None:
    """Issue 28: the Java consumer's 1 MiB fetches. The socket takes ~256 KiB
    a round and each round waits for the client to read; on the event loop
    every round was a wake of the interpreter (the rest of anything under
    4 MiB went that way), now a network thread sends the rest."""
    path = tmp_path / "00000000000000000000.log"
    size = 1024 * 1024
    data = os.urandom(size)
    path.write_bytes(data)
    segment = Segment(path)

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.file_records = FileRecords(segment, 0, size)
        got = await asyncio.to_thread(_read_answer_slowly, port, 1, size)
        assert got == struct.pack(">ii", 4 + size, 1) + data

    try:
        server = run(t)
    finally:
        os.close(segment.fd)
    assert server.network_thread_sends == 1
    assert size > THREAD_MIN
    assert server.network_sends_running == 0
    assert server.sendfile_bytes == size


def test_below_4_mib_the_loop_sends_rather_than_wait_for_a_busy_thread(tmp_path: Any) -> None:
    """With every network thread busy, the rest of a 1 MiB answer goes
    through the event loop's rounds instead of queueing for a thread."""
    path = tmp_path / "00000000000000000000.log"
    size = 1024 * 1024
    data = os.urandom(size)
    path.write_bytes(data)
    segment = Segment(path)

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        h.file_records = FileRecords(segment, 0, size)
        executor = server.network_executor
        assert executor is not None
        busy = threading.Event()
        held = executor.submit(busy.wait, 10)
        server.network_sends_running += 1  # as a response on that thread would count
        try:
            got = await asyncio.to_thread(_read_answer_slowly, port, 1, size)
            assert got == struct.pack(">ii", 4 + size, 1) + data
            assert not held.done()
        finally:
            server.network_sends_running -= 1
            busy.set()

    try:
        server = run(t, network_threads=1)
    finally:
        os.close(segment.fd)
    assert server.network_thread_sends == 0
    assert server.sendfile_bytes == size


def test_shutdown_answers_requests_in_flight() -> None:
    async def main() -> None:
        h = ScriptedHandler()
        server = SocketServer([ListenerSpec("PLAINTEXT", "127.0.0.1", 0)], h)
        port = (await server.startup())["PLAINTEXT"]
        r, w = await connect(port)
        w.write(frame(1, b"S") + frame(2, b"S"))
        await asyncio.sleep(0.01)
        await server.shutdown(timeout=5)
        assert [(await read_response(r))[0] for _ in range(2)] == [1, 2]
        assert await closed_by_server(r)
        with pytest.raises(OSError):
            await connect(port)

    asyncio.run(main())


def test_request_metrics_and_the_metrics_endpoint() -> None:
    registry = MetricsRegistry()

    async def t(server: SocketServer, port: int, h: ScriptedHandler) -> None:
        r, w = await connect(port)
        w.write(b"".join(frame(i) for i in range(10)))
        for _ in range(10):
            await read_response(r)
        w.close()
        http = MetricsServer(registry, "127.0.0.1", 0)
        mport = await http.start()
        try:
            url = f"http://127.0.0.1:{mport}/metrics"
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(url, timeout=5).read().decode()
            )
        finally:
            await http.stop()
        assert 'kafka_network_requestmetrics_requests_total{request="ApiVersions"} 10' in text
        for phase in ("requestqueuetimems", "localtimems", "remotetimems", "totaltimems"):
            fam = f"kafka_network_requestmetrics_{phase}"  # the JMX exporter's names
            assert f"# TYPE {fam} summary" in text
            assert f'{fam}_count{{request="ApiVersions"}} 10' in text
            assert f'{fam}{{request="ApiVersions",quantile="0.99"}} ' in text
            fam = f"pylog_network_requestmetrics_{phase}"
            assert f"# TYPE {fam} histogram" in text
            assert f'{fam}_bucket{{request="ApiVersions",le="+Inf"}} 10' in text
        assert "kafka_server_socketservermetrics_incoming_byte_total" in text
        assert "kafka_network_requestchannel_requestqueuesize 0" in text

    run(t, metrics=registry)
    m = registry.request("ApiVersions")
    assert m.requests.value == 10
    assert m.times["TotalTimeMs"].count == 10


def test_port_in_use_is_an_error() -> None:
    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        try:
            server = SocketServer([ListenerSpec("PLAINTEXT", "127.0.0.1", port)], None)
            with pytest.raises(OSError):
                await server.bind()
        finally:
            sock.close()

    asyncio.run(main())
