"""A streaming-transport failure as the app's typed error, in one backend's words: the way every
backend maps what happened on the wire (app.adapters.http.errors) onto app.core.errors. What a
server said in an error body is the backend's to read (`from_body`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import httpx

from app.adapters.http.connection import origin_of
from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, TransportError, UnsupportedUrl)
from app.core.errors import MalformedResponse, ServerUnreachable, ServerError, TransportWords


def error_for_transport(exc: TransportError, words: TransportWords,
                        from_body: Callable[[int, bytes, str], ServerError],
                        malformed: Callable[[str], ServerError] = MalformedResponse) -> ServerError:
    """The typed error for a streaming-transport failure (`from_body(status, body, url)` reads an error reply)."""
    url = exc.url.rstrip("/")
    if isinstance(exc, HttpStatusError):
        return from_body(exc.status, exc.body, url)
    if isinstance(exc, ConnectTimeout):
        return words.connect_timed_out(url, exc.timeout_s)
    if isinstance(exc, ConnectRefused):
        return words.connect_failed(url, exc.reason)
    if isinstance(exc, ReadTimeout):
        return words.read_timed_out(url, exc.timeout_s)
    if isinstance(exc, ConnectionDropped):
        return words.dropped(url, exc.replied)
    if isinstance(exc, UnsupportedUrl):
        return ServerUnreachable(f"Streaming replies needs plain http:// to a local server; cannot use {url!r}.",
                                  hint="Give the server's address as http://host:port.")
    if isinstance(exc, ProtocolViolation):
        return malformed(f"{words.server} at {url} did not answer valid HTTP: {exc.message}")
    return ServerUnreachable(f"HTTP failure talking to {words.server} at {url}: {exc.message}",
                              hint=words.connect_hint)


def error_for_httpx(exc: httpx.HTTPError, url: str, connect_timeout_s: float, read_timeout_s: float,
                    words: TransportWords) -> ServerError:
    """The typed error for an httpx failure of a plain request (timeouts in seconds)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return words.connect_timed_out(url, connect_timeout_s)
    if isinstance(exc, httpx.ConnectError):
        return words.connect_failed(url, exc)
    if isinstance(exc, httpx.TimeoutException):
        return words.read_timed_out(url, read_timeout_s)
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return words.dropped(url, True, exc)
    return ServerUnreachable(f"HTTP failure talking to {words.server} at {url}: {exc}", hint=words.connect_hint)


class ErrorTranslator:
    """One backend's translation of every way a request fails into the app's typed errors."""

    def __init__(self, words: TransportWords, from_body: Callable[[int, bytes, str], ServerError],
                 malformed: Callable[[str], ServerError] = MalformedResponse) -> None:
        self.words = words
        self._from_body = from_body
        self._malformed = malformed

    def for_transport(self, exc: TransportError) -> ServerError:
        """The typed error for a streaming-transport failure."""
        return error_for_transport(exc, self.words, self._from_body, self._malformed)

    def for_httpx(self, exc: httpx.HTTPError, url: str, connect_timeout_s: float, read_timeout_s: float) -> ServerError:
        """The typed error for an httpx failure of a plain request."""
        return error_for_httpx(exc, url, connect_timeout_s, read_timeout_s, self.words)

    def require_streamable(self, url: str) -> None:
        """ServerUnreachable now when url cannot carry streamed replies (not plain http://)."""
        try:
            origin_of(url)
        except TransportError as exc:
            raise self.for_transport(exc) from exc

    @contextlib.contextmanager
    def translated(self, url: str, connect_timeout_s: float, read_timeout_s: float) -> Iterator[None]:
        """Re-raise transport and httpx failures as the project's typed errors (keeping the cause)."""
        try:
            yield
        except TransportError as exc:
            raise self.for_transport(exc) from exc
        except httpx.HTTPError as exc:
            raise self.for_httpx(exc, url, connect_timeout_s, read_timeout_s) from exc


__all__ = ["ErrorTranslator", "error_for_httpx", "error_for_transport"]
