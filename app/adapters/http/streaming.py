"""Streamed HTTP requests to one server over a pool of keep-alive connections (see connection.py).

Two ways to read a reply, over one pool:
- `request()` hands each line to a callback as it is parsed, with no task switch per line (a load
  generator's 64 streams at 10,000 lines/s);
- `stream()` is an async context manager whose LineStream is iterated (one reply in a console).
Each line comes with the time its last byte arrived, each reply with when its request left.
Connecting has its own timeout; a reply that falls silent for the read timeout fails. Failures
are the typed errors of app.adapters.http.errors.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from app.adapters.http.connection import (HttpConnection, Headers, LineHandler, Reply, ended_cleanly, origin_of,
                                         path_prefix)


class LineStream:
    """The body lines of one reply, each with the time its last byte arrived (s on the transport's clock)."""

    def __init__(self) -> None:
        self._lines: deque[tuple[bytes, float]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.reply: Reply | None = None

    @property
    def sent_at_s(self) -> float | None:
        """When the request went to the kernel (s on the transport's clock)."""
        return None if self.reply is None else self.reply.sent_at_s

    @property
    def status(self) -> int:
        """The HTTP status (0 before the head arrived)."""
        return 0 if self.reply is None else self.reply.status

    def push(self, line: bytes, t: float) -> None:
        """Queue one line (the reply's line handler)."""
        self._lines.append((line, t))

    def wake(self) -> None:
        """Wake a reader waiting for lines (the reply's progress handler)."""
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> LineStream:
        return self

    async def __anext__(self) -> tuple[bytes, float]:
        while not self._lines:
            assert self.reply is not None
            if self.reply.done.done():
                self.reply.done.result()  # raises the failure, after every line that came before it
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._lines.popleft()


class HttpStreams:
    """Streamed requests to one server over a pool of keep-alive connections (use on one loop)."""

    def __init__(self, base_url: str, *, clock: Callable[[], float] = time.monotonic, connect_timeout_s: float = 3.0,
                 read_timeout_s: float = 300.0, headers: Headers = (), tls: ssl.SSLContext | None = None) -> None:
        # tls: the context for an https:// base URL (see tls_socket.py); without one only http:// is taken.
        origin_of(base_url, https=tls is not None)  # fail early on an unusable URL
        self._tls = tls
        self.base_url = base_url.rstrip("/")
        # A base URL behind a reverse proxy (http://host:port/ollama) puts its path before every request's.
        self._prefix = path_prefix(self.base_url)
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._clock = clock
        self._headers = tuple(headers)
        self._idle: list[HttpConnection] = []
        self._all: set[HttpConnection] = set()

    async def connection(self) -> HttpConnection:
        """An idle open connection, or a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                return conn
            self._all.discard(conn)
        conn = await HttpConnection.open(self.base_url, clock=self._clock, connect_timeout_s=self.connect_timeout_s,
                                         read_timeout_s=self.read_timeout_s, tls=self._tls)
        self._all.add(conn)
        return conn

    def release(self, conn: HttpConnection) -> None:
        """Give a connection back (closed ones are forgotten)."""
        if conn.reusable:
            self._idle.append(conn)
        else:
            self._all.discard(conn)

    async def request(self, method: str, path: str, body: bytes, on_line: LineHandler, headers: Headers = (),
                      on_sent: Callable[[float], None] | None = None) -> Reply:
        """Send one request and feed each body line to on_line as it is parsed; returns the complete
        Reply. on_sent hears when the request went out (s), before any line. on_line may raise to
        abort (the connection is closed and the error propagates)."""
        conn = await self.connection()
        reply: Reply | None = None
        try:
            reply = await conn.send(method, self._prefix + path, body, on_line, (*self._headers, *headers))
            if on_sent is not None and reply.sent_at_s is not None:
                on_sent(reply.sent_at_s)
            await reply.done
            return reply
        finally:
            if not ended_cleanly(reply):
                conn.close()  # a reply cut short leaves the connection in an unknown state
            self.release(conn)

    @asynccontextmanager
    async def stream(self, method: str, path: str, body: bytes, headers: Headers = ()) -> AsyncIterator[LineStream]:
        """Send one request and, once a 2xx head arrived, yield its body lines to iterate; an error
        status raises HttpStatusError with the whole body. Leaving early closes the connection."""
        conn = await self.connection()
        lines = LineStream()
        try:
            reply = lines.reply = await conn.send(method, self._prefix + path, body, lines.push,
                                                  (*self._headers, *headers))
            reply.on_progress = lines.wake
            await reply.head
            yield lines
        finally:
            if not ended_cleanly(lines.reply):
                conn.close()
            self.release(conn)

    def close(self) -> None:
        """Close every connection."""
        for conn in list(self._all):
            conn.close()
        self._all.clear()
        self._idle.clear()

    async def aclose(self) -> None:
        """Close every connection (for `async with`)."""
        self.close()

    async def __aenter__(self) -> HttpStreams:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HttpStreams", "LineStream"]
