"""A streaming-transport failure as the app's typed error, in one backend's words: the way every
backend maps what happened on the wire (app.adapters.http.errors) onto app.core.errors. What a
server said in an error body is the backend's to read (`from_body`)."""

from __future__ import annotations

from collections.abc import Callable

from app.adapters.http.errors import (ConnectionDropped, ConnectRefused, ConnectTimeout, HttpStatusError,
                                      ProtocolViolation, ReadTimeout, TransportError, UnsupportedUrl)
from app.core.errors import MalformedResponse, OllamaConnectError, OllamaError, TransportWords


def error_for_transport(exc: TransportError, words: TransportWords,
                        from_body: Callable[[int, bytes, str], OllamaError],
                        malformed: Callable[[str], OllamaError] = MalformedResponse) -> OllamaError:
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
        return OllamaConnectError(f"Streaming replies needs plain http:// to a local server; cannot use {url!r}.",
                                  hint="Give the server's address as http://host:port.")
    if isinstance(exc, ProtocolViolation):
        return malformed(f"{words.server} at {url} did not answer valid HTTP: {exc.message}")
    return OllamaConnectError(f"HTTP failure talking to {words.server} at {url}: {exc.message}",
                              hint=words.connect_hint)


__all__ = ["error_for_transport"]
