"""The streaming HTTP transport over real sockets: paced chunked NDJSON, a drop mid-stream, a server
that never answers, a refused port, a full accept queue, an error status with its body."""

from __future__ import annotations

import functools
import asyncio
import contextlib
import socket
import sys
import time

import pytest

from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, UnsupportedUrl)
from app.adapters.http.connection import HttpConnection
from app.adapters.http.streaming import HttpStreams
from tests.fakes.raw_http import chunk, closed_port, read_request, serving
from tests.bounded import run_within

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"


run = functools.partial(run_within, timeout=15.0)  # one coroutine to its end, within the time limit


def test_a_slow_chunked_stream_gives_each_line_when_its_last_byte_arrived() -> None:
    written: list[float] = []  # server: just before each write that ends a line

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD)
        for i in range(5):
            writer.write(chunk(b'{"i":%d,' % i))  # half a line ...
            await writer.drain()
            await asyncio.sleep(0.02)
            written.append(time.monotonic())
            writer.write(chunk(b'"t":"x"}\n'))  # ... and its end 20 ms later
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def go() -> tuple[list[tuple[bytes, float]], float, float | None]:
        async with serving(handle) as url, HttpStreams(url) as http:
            asked = time.monotonic()
            async with http.stream("POST", "/api/chat", b'{"model":"m"}') as lines:
                got = [item async for item in lines]
                return got, asked, lines.sent_at_s

    got, asked, sent = run(go)
    assert [line for line, _t in got] == [b'{"i":%d,"t":"x"}' % i for i in range(5)]
    stamps = [t for _line, t in got]
    assert sent is not None and asked <= sent < stamps[0]
    # Each line is stamped when its end arrived: after the server wrote it, well before the next one.
    assert all(w <= t < w + 0.015 for w, t in zip(written, stamps))
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert all(0.035 < g < 0.08 for g in gaps)


def test_lines_reach_a_callback_and_keep_alive_reuses_one_connection() -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(HEAD + chunk(b'{"a":1}\n{"b":') + chunk(b'2}\n') + chunk(b'{"c":3}') + b"0\r\n\r\n")

    async def go() -> list[bytes]:
        lines: list[bytes] = []
        async with serving(handle) as url, HttpStreams(url) as http:
            for _ in range(3):
                reply = await http.request("POST", "/api/chat", b"{}", lambda line, _t: lines.append(line))
                assert reply.status == 200 and reply.sent_at_s is not None
        return lines

    assert run(go) == [b'{"a":1}', b'{"b":2}', b'{"c":3}'] * 3
    assert len(accepted) == 1


def test_a_drop_mid_stream_is_dropped_after_the_lines_that_came() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(HEAD + chunk(b'{"a":1}\n') + chunk(b'{"b":2}\n'))
        await writer.drain()
        writer.close()

    async def go() -> tuple[list[bytes], BaseException]:
        got: list[bytes] = []
        async with serving(handle) as url, HttpStreams(url) as http:
            try:
                async with http.stream("POST", "/api/chat", b"{}") as lines:
                    async for line, _t in lines:
                        got.append(line)
            except ConnectionDropped as exc:
                return got, exc
        raise AssertionError("no error")

    got, exc = run(go)
    assert got == [b'{"a":1}', b'{"b":2}']
    assert isinstance(exc, ConnectionDropped) and exc.replied and "before the reply was complete" in exc.message


def test_a_close_before_replying_is_dropped_without_a_reply() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    async def go() -> None:
        async with serving(handle) as url, HttpStreams(url) as http:
            await http.request("POST", "/api/chat", b"{}", lambda _l, _t: None)

    with pytest.raises(ConnectionDropped, match="before replying") as info:
        run(go)
    assert not info.value.replied


def test_a_server_that_never_answers_times_out_on_reading() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # holds the connection open, says nothing

    async def go() -> None:
        async with serving(handle) as url, HttpStreams(url, read_timeout_s=0.2) as http:
            async with http.stream("POST", "/api/chat", b"{}") as lines:
                async for _ in lines:
                    pass

    started = time.monotonic()
    with pytest.raises(ReadTimeout, match="sent nothing for 0.2 s") as info:
        run(go)
    assert info.value.timeout_s == 0.2 and 0.2 <= time.monotonic() - started < 5


def test_a_refused_port_is_refused() -> None:
    url = f"http://127.0.0.1:{closed_port()}"

    async def go() -> None:
        async with HttpStreams(url) as http:
            await http.request("POST", "/api/chat", b"{}", lambda _l, _t: None)

    with pytest.raises(ConnectRefused) as info:
        run(go)
    assert info.value.url == url and "refused" in info.value.reason.lower()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a full accept queue drops SYNs on Linux")
def test_connecting_has_its_own_timeout() -> None:
    # A listener whose accept queue is full (nothing accepts) leaves new connections unanswered.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)

        async def go() -> None:
            async with HttpStreams(f"http://127.0.0.1:{port}", connect_timeout_s=0.3, read_timeout_s=60) as http:
                await http.request("POST", "/api/chat", b"{}", lambda _l, _t: None)

        with pytest.raises(ConnectTimeout, match="timed out after 0.3 s") as info:
            run(go)
        assert info.value.timeout_s == 0.3
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def test_an_error_status_keeps_its_whole_body() -> None:
    body = b'{"error":"model \'x\' not found"}'

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        reply = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        for piece in (reply, body[:10], body[10:]):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.001)  # separate writes on the wire (server side of the test)
        await reader.read()

    async def go() -> None:
        async with serving(handle) as url, HttpStreams(url) as http:
            async with http.stream("POST", "/api/chat", b"{}"):
                raise AssertionError("an error status must not yield lines")

    with pytest.raises(HttpStatusError) as info:
        run(go)
    assert (info.value.status, info.value.body) == (404, body)


def test_leaving_a_stream_early_closes_its_connection() -> None:
    closed = asyncio.Event

    async def go() -> tuple[bool, int]:
        gone = closed()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await read_request(reader)
            writer.write(HEAD)
            try:
                for i in range(1000):
                    writer.write(chunk(b'{"i":%d}\n' % i))
                    await writer.drain()
                    await asyncio.sleep(0.005)
            except ConnectionError:
                pass
            gone.set()

        async with serving(handle) as url, HttpStreams(url) as http:
            async with http.stream("POST", "/api/chat", b"{}") as lines:
                async for _ in lines:
                    break
            await asyncio.wait_for(gone.wait(), 5)
            return gone.is_set(), len(http._idle)

    assert run(go) == (True, 0)


def test_bytes_that_are_not_http_are_a_protocol_violation_and_urls_must_be_plain_http() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        await reader.read()

    async def go() -> None:
        async with serving(handle) as url, HttpStreams(url) as http:
            await http.request("POST", "/", b"", lambda _l, _t: None)

    with pytest.raises(ProtocolViolation):
        run(go)
    with pytest.raises(UnsupportedUrl, match="plain http"):
        HttpStreams("https://example.com")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel receive stamps are a Linux feature")
def test_on_linux_lines_carry_the_kernels_arrival_time() -> None:
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n" + b'{"a":1}\n'
    stamps: list[float] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(reply)
        await reader.read()

    async def go() -> tuple[float, float, float | None]:
        async with serving(handle) as url:
            conn = await HttpConnection.open(url)
            assert conn.kernel_stamps and conn.send_stamps
            asked = time.monotonic()
            sent = await conn.send("POST", "/api/chat", b"{}", lambda _line, t: stamps.append(t))
            await sent.done
            conn.close()
            return asked, time.monotonic(), sent.sent_at_s

    asked, after, sent_at = run(go)
    assert len(stamps) == 1 and after - 1.0 < stamps[0] <= after
    # The request's own stamp is the kernel's transmit time: after it was asked for, before the reply.
    assert sent_at is not None and asked <= sent_at < stamps[0]
