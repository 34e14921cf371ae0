"""Ollama's failures as the app's typed errors, decided here and nowhere else, and its NDJSON lines.

Whatever way a request to Ollama fails, its error is made in this module:
- the streaming transport's errors (app.adapters.http.errors): chat, generate, pull, create;
- httpx's, for the plain requests (version, tags, ps, show, delete, load) that stay on httpx;
- an error reply's body: `{"error": …}` keeps Ollama's own text, its status picks the type;
- an in-band `{"error": …}` line, which is how Ollama fails once a stream has started (status 200).

Choices: a refused connection is ServerUnreachable naming the URL; connect and read timeouts are
ServerTimeout; a connection that closes before a reply is complete (the server crashed or was
stopped mid-stream) is StreamDropped; a reply Ollama ended properly (the chunked body's terminator came) without
its final `done: true` record is ReplyUnfinished. Both are StreamErrors, so callers that handle mid-reply
failures get the in-band, the dropped and the unfinished kind.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from app.adapters.http import translate
from app.adapters.http.errors import decoded_body
from app.backends.ollama.wire import malformed
from app.core.errors import (ReplyUnfinished, ServerError, StreamDropped, TransportWords,
                             error_for_status, error_for_stream_line)

# Headers every streamed request to Ollama carries.
STREAM_HEADERS = (("User-Agent", "ollama-deck"), ("Accept", "application/x-ndjson"),
                  ("Content-Type", "application/json"))


# Ollama's words for a failed connection, a timeout and a connection closed early.
_WORDS = TransportWords("Ollama")
connect_failed = _WORDS.connect_failed
connect_timed_out = _WORDS.connect_timed_out
read_timed_out = _WORDS.read_timed_out
dropped = _WORDS.dropped


def missing_final_line(url: str) -> ReplyUnfinished:
    """A stream whose HTTP response ended properly but without Ollama's final `done: true` record."""
    return ReplyUnfinished(f"Ollama at {url} ended the reply without its final record (`done: true`)", status=200)




def error_from_body(status: int, body: bytes, url: str) -> ServerError:
    """The typed error for an HTTP error reply, keeping Ollama's `{"error"}` text."""
    text, decoded = decoded_body(body)
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        return error_for_status(status, decoded["error"])
    return malformed(f"HTTP {status} from {url} without Ollama's error JSON: {text.strip()[:120]!r}",
                     status=status)


def decode_line(line: bytes | str, url: str) -> dict[str, Any]:
    """One NDJSON line as a dict; an in-band `{"error"}` line raises its typed error."""
    try:
        obj = json.loads(line)
    except ValueError:
        text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
        raise malformed(f"Ollama at {url} sent a line that is not JSON: {text.strip()[:120]!r}") from None
    if not isinstance(obj, dict):
        raise malformed(f"Ollama at {url} sent JSON that is not an object: {str(obj)[:120]!r}")
    error = obj.get("error")
    if error is not None:
        raise error_for_stream_line(str(error))
    return obj


async def raise_for_error(response: httpx.Response, url: str) -> None:
    """Raise the typed error when a plain reply is not 2xx."""
    if response.status_code >= 400:
        body = await response.aread()
        raise error_from_body(response.status_code, body, url)


# Every way a request to Ollama fails, as the app's errors (see adapters/http/translate.py).
_TRANSLATE = translate.ErrorTranslator(_WORDS, error_from_body)
error_for_transport = _TRANSLATE.for_transport
error_for_httpx = _TRANSLATE.for_httpx
require_streamable = _TRANSLATE.require_streamable
translated_errors = _TRANSLATE.translated

__all__ = ["STREAM_HEADERS", "StreamDropped", "connect_failed", "connect_timed_out", "decode_line", "dropped",
           "error_for_httpx", "error_for_transport", "error_from_body", "missing_final_line", "raise_for_error",
           "read_timed_out", "require_streamable", "translated_errors"]
