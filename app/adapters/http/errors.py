"""What can go wrong between the app and an HTTP server, in transport terms only.

Backends turn these into their own errors (with their server's name and advice); the transport
only says what happened on the wire and keeps what the server sent.
"""

from __future__ import annotations

import json
from typing import Any


class TransportError(Exception):
    """A request failed on the way to or from the server at `url`."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.message = message
        self.url = url


class UnsupportedUrl(TransportError):
    """The URL is not plain http://host[:port]."""


class ConnectRefused(TransportError):
    """Nothing accepted the connection (refused, unreachable, unknown host); `reason` is the OS's word."""

    def __init__(self, message: str, url: str, reason: str) -> None:
        super().__init__(message, url)
        self.reason = reason


class TlsFailed(ConnectRefused):
    """The connection was made but TLS could not be set up over it (an untrusted certificate, a host name it does
    not name, a server that does not speak TLS); `reason` is the handshake's word."""


class TimedOut(TransportError):
    """Something did not happen within `timeout_s` seconds."""

    def __init__(self, message: str, url: str, timeout_s: float) -> None:
        super().__init__(message, url)
        self.timeout_s = timeout_s


class ConnectTimeout(TimedOut):
    """The connection was not accepted within `timeout_s` seconds."""


class ReadTimeout(TimedOut):
    """The server sent nothing for `timeout_s` seconds while a reply was due."""


class ConnectionDropped(TransportError):
    """The connection closed before the reply was complete; `replied` is True once any of it arrived."""

    def __init__(self, message: str, url: str, replied: bool) -> None:
        super().__init__(message, url)
        self.replied = replied


class ProtocolViolation(TransportError):
    """The server's bytes are not valid HTTP/1.1 (or not HTTP at all)."""


class HttpStatusError(TransportError):
    """The server answered with an error status; `body` is its whole reply body."""

    def __init__(self, message: str, url: str, status: int, body: bytes) -> None:
        super().__init__(message, url)
        self.status = status
        self.body = body


def decoded_body(body: bytes) -> tuple[str, Any]:
    """An error reply's body as text and as the JSON it holds (None when it is not JSON)."""
    text = body.decode("utf-8", errors="replace")
    try:
        return text, json.loads(text)
    except ValueError:
        return text, None


__all__ = ["decoded_body", "ConnectRefused", "ConnectTimeout", "ConnectionDropped", "HttpStatusError", "ProtocolViolation",
           "ReadTimeout", "TimedOut", "TlsFailed", "TransportError", "UnsupportedUrl"]
