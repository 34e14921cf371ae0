"""A lean HTTP/1.1 client for streamed Ollama replies, built for measuring rather than convenience.

Why not httpx (which the app's OllamaClient uses): a load generator must never be the bottleneck
and must time each line when it arrives. Through httpx a 2-core machine spends ~60 % of a core on
10,000 lines/s and stamps lines several milliseconds late, because each stream is a task that
runs only after the others' parsing. Here bytes are stamped when they arrive (by the kernel where
it can, see loadgen_socket) and parsed in a later callback, so every line carries the time its
last byte reached the machine, whatever the parsing of other streams costs (see
benchmarks/bench_loadgen.py).

Errors are the app's typed errors, decided by the same code as OllamaClient's (ollama_stream):
refused connection → OllamaConnectError, silence → OllamaTimeout, a reply cut short →
StreamDropped, an HTTP error → Ollama's own error text, an in-band `{"error"}` line → its error.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

from app.adapters.http.timed_socket import StampedSocket
from app.backends.ollama.stream import StreamDropped, error_from_body
from app.core.errors import MalformedResponse, OllamaConnectError, OllamaError, OllamaTimeout
from app.core.units import KIB

LineHandler = Callable[[bytes, float], None]  # (line without "\n", receive time on the clock)
MAX_HEADER_BYTES = 64 * KIB

_HEADERS, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _LENGTH, _UNTIL_CLOSE, _DONE = range(8)


def host_port(base_url: str) -> tuple[str, int]:
    """(host, port) of an http:// URL; OllamaConnectError for anything the client cannot reach."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    if parts.scheme != "http" or not parts.hostname:
        raise OllamaConnectError(f"The load generator speaks plain http:// to a local server; cannot use {base_url!r}.",
                                 hint="Give the server's address as http://host:port.")
    return parts.hostname, parts.port or 80


class _Reply:
    """State of the response being read: status, framing, body for errors, the line buffer."""

    def __init__(self, on_line: LineHandler) -> None:
        self.on_line = on_line
        self.status = 0
        self.keep_alive = True
        self.body = bytearray()  # kept only for error replies
        self.partial = b""  # an incomplete text line
        self.remaining = 0  # bytes left in the current chunk or content length
        self.state = _HEADERS
        self.future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.any_byte = False


class StreamConnection:
    """One keep-alive HTTP/1.1 connection carrying one request at a time."""

    def __init__(self, base_url: str, clock: Callable[[], float], read_timeout_s: float) -> None:
        self.base_url = base_url
        self._clock = clock
        self._read_timeout_s = read_timeout_s
        self._loop = asyncio.get_running_loop()
        self._sock: StampedSocket | None = None
        self._pending: deque[tuple[float, bytes]] = deque()
        self._parse_scheduled = False
        self._buffer = b""
        self._reply: _Reply | None = None
        self._closed = False
        self._last_data = 0.0
        self._watchdog: asyncio.TimerHandle | None = None

    @classmethod
    async def open(cls, base_url: str, *, clock: Callable[[], float] = time.monotonic,
                   connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0) -> StreamConnection:
        """Connect to the server at base_url (typed errors on failure)."""
        host, port = host_port(base_url)
        conn = cls(base_url, clock, read_timeout_s)
        try:
            conn._sock = await StampedSocket.connect(host, port, connect_timeout_s, clock, conn._data_received,
                                                     conn._connection_lost)
        except TimeoutError:
            raise OllamaTimeout(f"Connecting to Ollama at {base_url} timed out after {connect_timeout_s:g} s") from None
        except OSError as exc:
            raise OllamaConnectError(f"Cannot connect to Ollama at {base_url}: {exc.strerror or exc}") from exc
        return conn

    @property
    def kernel_stamps(self) -> bool:
        """True when lines carry the kernel's arrival time (Linux), False when the loop's."""
        return self._sock is not None and self._sock.kernel_stamps

    @property
    def reusable(self) -> bool:
        """True when another request may be sent on this connection."""
        return not self._closed and self._reply is None and self._sock is not None and not self._sock.closed

    def close(self) -> None:
        """Close the connection."""
        if self._sock is not None:
            self._sock.close()
        self._closed = True

    async def post(self, path: str, body: bytes, on_line: LineHandler) -> int:
        """Send a POST and feed each body line to on_line with its receive time; returns the status
        (200) once the reply is complete. A non-2xx reply raises Ollama's error; on_line may raise
        to abort (the connection is then closed)."""
        if not self.reusable:
            raise StreamDropped(f"Connection to Ollama at {self.base_url} is closed", status=200)
        assert self._sock is not None
        reply = self._reply = _Reply(on_line)
        host, port = host_port(self.base_url)
        request = (b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: ollama-deck-bench\r\n"
                   b"Accept: application/x-ndjson\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                   % (path.encode(), host.encode(), port, len(body), body))
        self._last_data = self._clock()
        self._arm_watchdog()
        try:
            try:
                await self._sock.send(request)
            except OSError as exc:
                raise StreamDropped(f"Connection to Ollama at {self.base_url} closed while sending: {exc}",
                                    status=200) from exc
            return await reply.future
        except BaseException:
            self.close()  # a reply cut short leaves the connection in an unknown state
            raise
        finally:
            self._reply = None
            if self._watchdog is not None:
                self._watchdog.cancel()
                self._watchdog = None

    # ---- from the socket ----------------------------------------------------------------------
    def _data_received(self, data: bytes, t: float) -> None:
        # Queue with its arrival stamp and parse later: see the module docstring.
        self._pending.append((t, data))
        self._last_data = t
        if not self._parse_scheduled:
            self._parse_scheduled = True
            self._loop.call_soon(self._parse_pending)

    def _connection_lost(self, exc: BaseException | None) -> None:
        self._closed = True
        if self._parse_scheduled:
            self._parse_pending()
        reply = self._reply
        if reply is None or reply.future.done():
            return
        if reply.state == _UNTIL_CLOSE:
            self._finish(reply)
            return
        how = "before replying" if not reply.any_byte else "before the reply was complete"
        reason = f": {exc}" if exc else ""
        reply.future.set_exception(StreamDropped(
            f"Connection to Ollama at {self.base_url} closed {how}{reason}", status=200))

    # ---- parsing ------------------------------------------------------------------------------
    def _arm_watchdog(self) -> None:
        due = self._last_data + self._read_timeout_s - self._clock()
        self._watchdog = self._loop.call_later(max(0.0, due), self._check_silence)

    def _check_silence(self) -> None:
        reply = self._reply
        if reply is None or reply.future.done():
            return
        if self._clock() - self._last_data >= self._read_timeout_s:
            reply.future.set_exception(OllamaTimeout(
                f"Ollama at {self.base_url} sent nothing for {self._read_timeout_s:g} s"))
            return
        self._arm_watchdog()

    def _parse_pending(self) -> None:
        self._parse_scheduled = False
        reply = self._reply
        while self._pending:
            t, data = self._pending.popleft()
            if reply is None or reply.future.done():
                self.close()  # bytes nobody asked for: the connection can no longer be trusted
                continue
            try:
                self._feed(reply, data, t)
            except OllamaError as exc:
                reply.future.set_exception(exc)
            except Exception as exc:  # noqa: BLE001 - a handler's bug must end this request, not the loop
                reply.future.set_exception(exc)

    def _feed(self, reply: _Reply, data: bytes, t: float) -> None:
        reply.any_byte = True
        buf = self._buffer + data if self._buffer else data
        self._buffer = b""
        pos = 0
        while pos < len(buf) and reply.state != _DONE:
            if reply.state == _HEADERS:
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if len(buf) - pos > MAX_HEADER_BYTES:
                        raise MalformedResponse(f"Ollama at {self.base_url} sent headers over {MAX_HEADER_BYTES} bytes")
                    break
                self._headers(reply, buf[pos:end])
                pos = end + 4
                if reply.state == _LENGTH and reply.remaining == 0:
                    self._finish(reply)
            elif reply.state == _CHUNK_SIZE:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                try:
                    reply.remaining = int(buf[pos:end].split(b";", 1)[0], 16)
                except ValueError:
                    raise MalformedResponse(f"Ollama at {self.base_url} sent a broken chunked body") from None
                pos = end + 2
                reply.state = _CHUNK_DATA if reply.remaining else _TRAILER
            elif reply.state in (_CHUNK_DATA, _LENGTH, _UNTIL_CLOSE):
                take = len(buf) - pos if reply.state == _UNTIL_CLOSE else min(reply.remaining, len(buf) - pos)
                self._body(reply, buf[pos:pos + take], t)
                pos += take
                if reply.state != _UNTIL_CLOSE:
                    reply.remaining -= take
                    if reply.remaining == 0:
                        if reply.state == _LENGTH:
                            self._finish(reply)
                        else:
                            reply.state = _CHUNK_END
            elif reply.state == _CHUNK_END:
                if len(buf) - pos < 2:
                    break
                pos += 2
                reply.state = _CHUNK_SIZE
            elif reply.state == _TRAILER:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                empty = end == pos  # an empty line ends the trailer; other lines are trailer fields
                pos = end + 2
                if empty:
                    self._finish(reply)
        if reply.state != _DONE and pos < len(buf):
            self._buffer = buf[pos:]

    def _headers(self, reply: _Reply, block: bytes) -> None:
        lines = block.decode("latin-1").split("\r\n")
        try:
            version, status, *_ = lines[0].split(" ", 2)
            reply.status = int(status)
        except ValueError:
            raise MalformedResponse(f"Ollama at {self.base_url} did not answer HTTP: {lines[0][:80]!r}") from None
        chunked, length = False, None
        reply.keep_alive = version == "HTTP/1.1"
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "content-length":
                length = int(value)
            elif name == "connection":
                reply.keep_alive = value != "close"
        if chunked:
            reply.state = _CHUNK_SIZE
        elif length is not None:
            reply.state, reply.remaining = _LENGTH, length
        else:
            reply.state, reply.keep_alive = _UNTIL_CLOSE, False

    def _body(self, reply: _Reply, data: bytes, t: float) -> None:
        if reply.status >= 300:
            reply.body += data
            return
        text = reply.partial + data if reply.partial else data
        start = 0
        while True:
            end = text.find(b"\n", start)
            if end < 0:
                break
            if end > start:
                reply.on_line(text[start:end], t)
            start = end + 1
        reply.partial = text[start:]

    def _finish(self, reply: _Reply) -> None:
        reply.state = _DONE
        if reply.future.done():
            return
        if not reply.keep_alive:
            self.close()
        if reply.status >= 300:
            reply.future.set_exception(error_from_body(reply.status, bytes(reply.body), self.base_url))
            return
        try:
            if reply.partial.strip():  # a last line without its newline
                reply.on_line(reply.partial, self._last_data)
        except Exception as exc:  # noqa: BLE001 - the handler's verdict on that line ends the request
            reply.future.set_exception(exc)
            return
        reply.future.set_result(reply.status)


class ConnectionPool:
    """Idle keep-alive connections to one server, opened on demand."""

    def __init__(self, base_url: str, *, clock: Callable[[], float] = time.monotonic,
                 connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0) -> None:
        self.base_url = base_url
        self._clock = clock
        self._connect_timeout_s = connect_timeout_s
        self._read_timeout_s = read_timeout_s
        self._idle: list[StreamConnection] = []
        self._all: set[StreamConnection] = set()
        host_port(base_url)  # fail early on an unusable URL

    async def acquire(self) -> StreamConnection:
        """An idle open connection, or a new one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable:
                return conn
            self._all.discard(conn)
        conn = await StreamConnection.open(self.base_url, clock=self._clock, connect_timeout_s=self._connect_timeout_s,
                                           read_timeout_s=self._read_timeout_s)
        self._all.add(conn)
        return conn

    def release(self, conn: StreamConnection) -> None:
        """Give a connection back (closed ones are forgotten)."""
        if conn.reusable:
            self._idle.append(conn)
        else:
            self._all.discard(conn)

    def close(self) -> None:
        """Close every connection."""
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()


__all__ = ["ConnectionPool", "LineHandler", "StreamConnection", "host_port"]
