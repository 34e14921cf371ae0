"""A backend client's two ways to its server, both made on first use: pooled streaming connections
(HttpStreams, which stamp each line's arrival) and an httpx.AsyncClient for plain requests."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Self

import httpx

from app.adapters.http.streaming import HttpStreams


class ServerConnections:
    """One base URL's connections: short connect, long read timeout (seconds), times on `clock`."""

    def __init__(self, base_url: str, *, connect_timeout_s: float, read_timeout_s: float,
                 stream_headers: tuple[tuple[str, str], ...], transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic, headers: tuple[tuple[str, str], ...] = (),
                 tls: ssl.SSLContext | None = None) -> None:
        """headers: sent on every request, plain and streamed (e.g. Authorization); tls: the context for an
        https:// base URL (its CA bundle and checks), None for plain http only."""
        self.base_url = base_url
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._stream_headers = stream_headers
        self._transport = transport
        self._clock = clock
        self._headers = headers
        self._tls = tls
        self._httpx: httpx.AsyncClient | None = None
        self._streams: HttpStreams | None = None

    @property
    def http(self) -> httpx.AsyncClient:
        """The plain-request client. Made on first use: building one costs milliseconds (its TLS
        context), which a load generator that only streams never needs to pay."""
        if self._httpx is None:
            timeout = httpx.Timeout(connect=self.connect_timeout_s, read=self.read_timeout_s,
                                    write=self.read_timeout_s, pool=self.read_timeout_s)
            # trust_env=False: a desktop's HTTP(S)_PROXY must not reroute calls to a local server.
            self._httpx = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=self._transport,
                                            trust_env=False, headers=dict(self._headers),
                                            verify=self._tls if self._tls is not None else True)
        return self._httpx

    @property
    def streams(self) -> HttpStreams:
        """The pooled streaming connections."""
        if self._streams is None:
            self._streams = HttpStreams(self.base_url, clock=self._clock, connect_timeout_s=self.connect_timeout_s,
                                        read_timeout_s=self.read_timeout_s,
                                        headers=(*self._stream_headers, *self._headers), tls=self._tls)
        return self._streams

    async def aclose(self) -> None:
        """Close both (they are made again if used later)."""
        if self._streams is not None:
            self._streams.close()
            self._streams = None
        if self._httpx is not None:
            await self._httpx.aclose()
            self._httpx = None


class ConnectedClient:
    """What every backend's client shares: its base URL and timeouts (seconds), its ServerConnections,
    and closing them (also as an async context manager)."""

    STREAM_HEADERS: tuple[tuple[str, str], ...] = ()  # extra headers on every streamed request

    def __init__(self, base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None, clock: Callable[[], float] = time.monotonic,
                 headers: tuple[tuple[str, str], ...] = (), tls: ssl.SSLContext | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self._connections = ServerConnections(self.base_url, connect_timeout_s=connect_timeout_s,
                                              read_timeout_s=read_timeout_s, stream_headers=self.STREAM_HEADERS,
                                              transport=transport, clock=clock, headers=headers, tls=tls)

    @property
    def _http(self) -> httpx.AsyncClient:
        return self._connections.http

    def _stream_pool(self) -> HttpStreams:
        return self._connections.streams

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._connections.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["ConnectedClient", "ServerConnections"]
