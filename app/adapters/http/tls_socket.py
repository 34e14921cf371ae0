"""TLS over the stamped socket: https for the streaming transport, with every decrypted block still
carrying the kernel's arrival time.

The stdlib `ssl` module runs over two memory buffers (ssl.MemoryBIO and SSLObject) instead of owning
the socket, so the bytes still come through StampedSocket (timed_socket.py) with their receive stamps:
each block of ciphertext read from the socket is fed to the TLS object, and whatever plaintext that
block completes is handed on with that block's stamp. Sends are encrypted first and go out in one
stamped send, as plain ones do.

What the times then measure, precisely:
- A line's time is the stamp of the socket read that brought the end of the TLS record holding the line's
  end: SO_TIMESTAMPNS on a TCP socket gives, for each recvmsg, the kernel's software receive time of the
  last segment (skb; one GRO-merged skb may hold several segments) that read took, as it does for plain
  http. TLS hands out nothing before a record is whole and authenticated, so a token counts as arrived
  when its whole record has; a server streaming SSE flushes one small record per event, so in practice that
  is the segment that carried the token. The stamp is taken by the kernel before the app reads anything: it
  does NOT include decrypting the record (that happens afterwards in user space and shifts no stamp). Where
  kernel stamps are off (not Linux, or another clock), the time is taken when the read returned, before
  decryption too.
- A request's sent time is the kernel's transmit stamp of its encrypted bytes (the whole request, in one
  record or a few, in one send), as for plain http.
- The handshake happens when a connection opens, before any request: it is in neither figure. A pooled
  connection pays it once.
Certificates are checked with the default verification (ssl.create_default_context: the system's CA
store, the host name checked against the certificate, sent for SNI); a context with another CA bundle
may be given (see `client_context`).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from app.adapters.http.timed_socket import RECV_BYTES, ClosedHandler, DataHandler, StampedSocket


def client_context(ca_bundle: str | None = None) -> ssl.SSLContext:
    """A client TLS context with default verification; `ca_bundle` (a PEM file) trusts those CAs instead of the
    system's (a server with a private CA or a self-signed certificate)."""
    return ssl.create_default_context(cafile=ca_bundle)


class TlsHandshakeFailed(OSError):
    """The TLS handshake failed (a certificate not trusted, a name that does not match, a server without TLS)."""


class TlsStampedSocket:
    """A StampedSocket carrying TLS; the same interface (send, close, closed, kernel_stamps, send_stamps)."""

    def __init__(self, context: ssl.SSLContext, server_hostname: str, on_data: DataHandler,
                 on_closed: ClosedHandler) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                     server_hostname=server_hostname)
        self._on_data = on_data
        self._on_closed = on_closed
        self._raw: StampedSocket | None = None
        self._handshaken = False
        self._progress: asyncio.Event = asyncio.Event()
        self._lost: BaseException | None = None
        self._ended = False
        self._flushes: set[asyncio.Task[float | None]] = set()

    @classmethod
    async def connect(cls, host: str, port: int, timeout_s: float, clock: Callable[[], float], on_data: DataHandler,
                      on_closed: ClosedHandler, *, context: ssl.SSLContext) -> TlsStampedSocket:
        """Connect and complete the handshake within timeout_s (OSError, TlsHandshakeFailed or TimeoutError)."""
        tls = cls(context, host, on_data, on_closed)
        tls._raw = await StampedSocket.connect(host, port, timeout_s, clock, tls._raw_data, tls._raw_closed)
        try:
            await asyncio.wait_for(tls._handshake(), timeout_s)
        except BaseException:
            tls.close()
            raise
        return tls

    async def _handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if self._ended:
                    raise TlsHandshakeFailed(f"the server closed the connection during the TLS handshake"
                                             f"{': ' + str(self._lost) if self._lost else ''}") from None
                self._progress.clear()
                await self._progress.wait()
                continue
            except ssl.SSLError as exc:
                reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
                raise TlsHandshakeFailed(f"TLS handshake failed: {reason}") from exc
            await self._flush()
            self._handshaken = True
            return

    async def _flush(self) -> float | None:
        data = self._outgoing.read()
        if data and self._raw is not None:
            return await self._raw.send(data)
        return None

    @property
    def kernel_stamps(self) -> bool:
        """True when blocks carry the kernel's arrival time."""
        return self._raw is not None and self._raw.kernel_stamps

    @property
    def send_stamps(self) -> bool:
        """True when sends are timed by the kernel."""
        return self._raw is not None and self._raw.send_stamps

    @property
    def closed(self) -> bool:
        """True once either side closed the connection."""
        return self._raw is None or self._raw.closed or self._ended

    async def send(self, data: bytes) -> float:
        """Encrypt and send all of data; returns when it left (see StampedSocket.send)."""
        if self._raw is None:
            raise OSError("not connected")
        try:
            self._tls.write(data)
        except ssl.SSLError as exc:
            raise OSError(f"TLS refused to send: {exc}") from exc
        sent = await self._flush()
        return sent if sent is not None else 0.0

    def close(self) -> None:
        """Close the socket (no on_closed call); a close_notify is not awaited."""
        self._ended = True
        if self._raw is not None:
            self._raw.close()

    def _raw_data(self, data: bytes, t: float) -> None:
        self._incoming.write(data)
        if not self._handshaken:
            self._progress.set()
            return
        plain = bytearray()
        try:
            while True:
                plain += self._tls.read(RECV_BYTES)
        except ssl.SSLWantReadError:
            pass  # the rest of a record is still on its way
        except ssl.SSLZeroReturnError:  # the server's close_notify: the stream ended
            self._deliver(plain, t)
            self._end(None)
            return
        except ssl.SSLError as exc:
            self._end(exc)
            return
        self._deliver(plain, t)
        if self._outgoing.pending:  # e.g. an answer to a key update
            task = asyncio.get_running_loop().create_task(self._flush())
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    def _deliver(self, plain: bytearray, t: float) -> None:
        if plain:
            self._on_data(bytes(plain), t)

    def _raw_closed(self, exc: BaseException | None) -> None:
        self._lost = exc
        if not self._handshaken:
            self._ended = True
            self._progress.set()
            return
        self._end(exc)

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        if self._raw is not None:
            self._raw.close()
        self._on_closed(exc)


__all__ = ["TlsHandshakeFailed", "TlsStampedSocket", "client_context"]
