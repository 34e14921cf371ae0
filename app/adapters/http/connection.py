"""One HTTP/1.1 connection over a timestamping socket: every body line carries the time its last byte arrived.

h11 does the framing (status line, headers, chunked or sized bodies, keep-alive rules); the bytes
come from StampedSocket, which stamps each block with the kernel's receive time where it can.
Blocks are queued with their stamp and parsed in a later callback, so a line's time is when it
reached the machine, whatever the loop or another thread holding the GIL was doing meanwhile. A
request goes out in one send, stamped by the kernel where it can (else just before the send): a
reply's `sent_at_s` is when the request left, not when the caller asked for it (connecting,
building the request and waiting for the GIL are not the server's time). Pooling and the two
ways to read a reply are in streaming.py.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

import h11

from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, TlsFailed, UnsupportedUrl)
from app.adapters.http.timed_socket import StampedSocket
from app.adapters.http.tls_socket import TlsHandshakeFailed, TlsStampedSocket

LineHandler = Callable[[bytes, float], None]  # (line without its "\n", arrival time in seconds on the clock)
Headers = Sequence[tuple[str, str]]
MAX_HEAD_BYTES = 64 * 1024


def origin_of(base_url: str, *, https: bool = False) -> tuple[str, int]:
    """(host, port) of a plain http:// URL, or of an https:// one where `https` allows it (port 443 when none is
    given); UnsupportedUrl for anything else."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    try:
        port = parts.port  # urlsplit checks the port only when asked, with a ValueError
    except ValueError:
        port = -1
    schemes = ("http", "https") if https else ("http",)
    if parts.scheme not in schemes or not parts.hostname or port == -1 or port == 0:
        raise UnsupportedUrl(f"Streaming speaks plain http:// to a local server; cannot use {base_url!r}.", base_url)
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def is_https(base_url: str) -> bool:
    """True for an https:// URL."""
    return base_url.lower().startswith("https://")


def path_prefix(base_url: str) -> str:
    """The path a base URL puts before every request target ('' or '/prefix', no trailing slash)."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    return parts.path.rstrip("/")


def ended_cleanly(reply: Reply | None) -> bool:
    """True when the reply arrived whole (its connection may carry the next request)."""
    return (reply is not None and reply.done.done() and not reply.done.cancelled()
            and reply.done.exception() is None)


def _retrieved(future: asyncio.Future[None]) -> None:
    # A failure nobody waits for (the head of a callback-read reply) must not be logged as lost.
    if not future.cancelled():
        future.exception()


class Reply:
    """One request's reply as it arrives: status and headers, then body lines, then done."""

    def __init__(self, url: str, on_line: LineHandler) -> None:
        loop = asyncio.get_running_loop()
        self.url = url
        self.on_line = on_line
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.sent_at_s: float | None = None  # when the request went to the kernel (s, the clock)
        self.replied = False  # any byte of the reply arrived
        self.on_progress: Callable[[], None] | None = None  # after each parsed batch and at the end
        self.head: asyncio.Future[None] = loop.create_future()  # status < 300 known (or the failure)
        self.done: asyncio.Future[None] = loop.create_future()  # complete (or the failure)
        self.head.add_done_callback(_retrieved)
        self.done.add_done_callback(_retrieved)
        self._error_body = bytearray()
        self._partial = b""

    @property
    def is_error(self) -> bool:
        """True for a 3xx/4xx/5xx status, whose body is kept whole instead of split into lines."""
        return self.status >= 300

    def fail(self, exc: BaseException) -> None:
        """End the reply with exc (no effect once it ended)."""
        for future in (self.head, self.done):
            if not future.done():
                future.set_exception(exc)
        self._notify()

    def _body(self, data: bytes, t: float) -> None:
        if self.is_error:
            self._error_body += data
            return
        text = self._partial + data if self._partial else data
        start = 0
        while (end := text.find(b"\n", start)) >= 0:
            if end > start:
                self.on_line(text[start:end], t)
            start = end + 1
        self._partial = text[start:]

    def _finish(self, last_data_s: float) -> None:
        if self.done.done():
            return
        if self.is_error:
            self.fail(HttpStatusError(f"HTTP {self.status} from {self.url}", self.url, self.status,
                                      bytes(self._error_body)))
            return
        if self._partial.strip():  # a last line without its newline
            self.on_line(self._partial, last_data_s)
        self._partial = b""
        if not self.head.done():
            self.head.set_result(None)
        self.done.set_result(None)
        self._notify()

    def _notify(self) -> None:
        if self.on_progress is not None:
            self.on_progress()


class HttpConnection:
    """One keep-alive HTTP/1.1 connection carrying one request at a time."""

    def __init__(self, url: str, host: str, port: int, clock: Callable[[], float], read_timeout_s: float) -> None:
        self.url = url
        self._host_header = f"{host}:{port}"
        self._clock = clock
        self._read_timeout_s = read_timeout_s
        self._loop = asyncio.get_running_loop()
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._sock: StampedSocket | TlsStampedSocket | None = None
        self._pending: deque[tuple[float, bytes]] = deque()
        self._parse_scheduled = False
        self._reply: Reply | None = None
        self._closed = False
        self._last_data_s = 0.0
        self._watchdog: asyncio.TimerHandle | None = None

    @classmethod
    async def open(cls, url: str, *, clock: Callable[[], float] = time.monotonic, connect_timeout_s: float = 3.0,
                   read_timeout_s: float = 300.0, tls: ssl.SSLContext | None = None) -> HttpConnection:
        """Connect to the server at url (ConnectRefused, ConnectTimeout, TlsFailed or UnsupportedUrl on failure).
        An https:// url is served over TLS with the `tls` context (see tls_socket.py); without one it is refused."""
        host, port = origin_of(url, https=tls is not None)
        conn = cls(url, host, port, clock, read_timeout_s)
        try:
            if is_https(url) and tls is not None:
                conn._sock = await TlsStampedSocket.connect(host, port, connect_timeout_s, clock, conn._data_received,
                                                            conn._connection_lost, context=tls)
            else:
                conn._sock = await StampedSocket.connect(host, port, connect_timeout_s, clock, conn._data_received,
                                                         conn._connection_lost)
        except TlsHandshakeFailed as exc:
            raise TlsFailed(f"Cannot talk TLS to {url}: {exc}", url, str(exc)) from exc
        except TimeoutError:
            raise ConnectTimeout(f"Connecting to {url} timed out after {connect_timeout_s:g} s", url,
                                 connect_timeout_s) from None
        except OSError as exc:
            # asyncio words a refusal "Connect call failed (…)": the errno's own text says why.
            errno = exc.errno if not isinstance(exc, socket.gaierror) else None
            reason = os.strerror(errno) if errno is not None and errno > 0 else exc.strerror or str(exc)
            raise ConnectRefused(f"Cannot connect to {url}: {reason}", url, reason) from exc
        return conn

    @property
    def kernel_stamps(self) -> bool:
        """True when lines carry the kernel's arrival time (Linux), False when the loop's."""
        return self._sock is not None and self._sock.kernel_stamps

    @property
    def send_stamps(self) -> bool:
        """True when a request's sent time is the kernel's transmit stamp (Linux), False when the loop's."""
        return self._sock is not None and self._sock.send_stamps

    @property
    def reusable(self) -> bool:
        """True when another request may be sent on this connection."""
        return (not self._closed and self._reply is None and self._sock is not None and not self._sock.closed
                and self._h11.our_state is h11.IDLE)

    def close(self) -> None:
        """Close the connection; a reply still due fails as dropped."""
        self._closed = True
        if self._sock is not None:
            self._sock.close()
        self._stop_watchdog()
        reply, self._reply = self._reply, None
        if reply is not None:
            reply.fail(ConnectionDropped(f"Connection to {self.url} was closed before the reply was complete",
                                         self.url, reply.replied))

    async def send(self, method: str, target: str, body: bytes, on_line: LineHandler,
                   headers: Headers = ()) -> Reply:
        """Write one request; the Reply returned fills in as the answer arrives (await its `done`)."""
        if not self.reusable or self._sock is None:
            raise ConnectionDropped(f"Connection to {self.url} is closed", self.url, False)
        fields = [("Host", self._host_header), *headers, ("Content-Length", str(len(body)))]
        wire = self._h11.send(h11.Request(method=method, target=target, headers=fields)) or b""
        if body:
            wire += self._h11.send(h11.Data(data=body)) or b""
        wire += self._h11.send(h11.EndOfMessage()) or b""
        reply = self._reply = Reply(self.url, on_line)
        self._last_data_s = self._clock()
        self._arm_watchdog()
        try:
            reply.sent_at_s = await self._sock.send(wire)
        except OSError as exc:
            self.close()
            raise ConnectionDropped(f"Connection to {self.url} closed while sending: {exc}", self.url,
                                    False) from exc
        except BaseException:
            self.close()
            raise
        return reply

    # ---- from the socket ------------------------------------------------------------------------
    def _data_received(self, data: bytes, t: float) -> None:
        # Queue with the arrival stamp, parse later: see the module docstring.
        self._pending.append((t, data))
        self._last_data_s = t
        if not self._parse_scheduled:
            self._parse_scheduled = True
            self._loop.call_soon(self._parse_pending)

    def _connection_lost(self, exc: BaseException | None) -> None:
        if self._parse_scheduled:
            self._parse_pending()
        reply = self._reply
        if reply is not None and not reply.done.done():
            try:
                self._h11.receive_data(b"")
                self._events(reply, self._last_data_s)  # a body that runs until the close ends here
            except h11.RemoteProtocolError:
                pass  # cut short: said below
            except Exception as handler_error:  # noqa: BLE001 - the line handler's verdict on the last line
                reply.fail(handler_error)
        if reply is not None and not reply.done.done():
            how = "before the reply was complete" if reply.replied else "before replying"
            reason = f": {exc}" if exc else ""
            reply.fail(ConnectionDropped(f"Connection to {self.url} closed {how}{reason}", self.url, reply.replied))
        self._reply = None
        self.close()

    # ---- parsing --------------------------------------------------------------------------------
    def _parse_pending(self) -> None:
        self._parse_scheduled = False
        while self._pending:
            t, data = self._pending.popleft()
            reply = self._reply
            if reply is None or reply.done.done():
                self.close()  # bytes nobody asked for: the connection can no longer be trusted
                return
            reply.replied = True
            try:
                self._h11.receive_data(data)
                self._events(reply, t)
            except h11.RemoteProtocolError as exc:
                reply.fail(ProtocolViolation(f"{self.url} broke HTTP/1.1: {exc}", self.url))
                self.close()
                return
            except Exception as exc:  # noqa: BLE001 - a line handler's verdict (or bug) ends this request
                reply.fail(exc)
                self.close()
                return
            reply._notify()

    def _events(self, reply: Reply, t: float) -> None:
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Response):
                reply.status, reply.headers = event.status_code, list(event.headers)
                if not reply.is_error and not reply.head.done():
                    reply.head.set_result(None)
            elif isinstance(event, h11.Data):
                reply._body(bytes(event.data), t)
            elif isinstance(event, h11.EndOfMessage):
                self._complete(reply)
                return
            elif isinstance(event, h11.ConnectionClosed):
                return

    def _complete(self, reply: Reply) -> None:
        self._stop_watchdog()
        self._reply = None
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
        else:
            self.close()
        reply._finish(self._last_data_s)

    def _arm_watchdog(self) -> None:
        due = self._last_data_s + self._read_timeout_s - self._clock()
        self._watchdog = self._loop.call_later(max(0.0, due), self._check_silence)

    def _stop_watchdog(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _check_silence(self) -> None:
        reply = self._reply
        if reply is None or reply.done.done():
            return
        if self._clock() - self._last_data_s >= self._read_timeout_s:
            self._reply = None
            reply.fail(ReadTimeout(f"{self.url} sent nothing for {self._read_timeout_s:g} s", self.url,
                                   self._read_timeout_s))
            self.close()
            return
        self._arm_watchdog()


__all__ = ["HttpConnection", "LineHandler", "Reply", "ended_cleanly", "is_https", "origin_of", "path_prefix"]
