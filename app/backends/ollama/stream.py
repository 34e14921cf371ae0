"""HTTP plumbing for the Ollama client: httpx failures to typed errors, error bodies, NDJSON lines.

Error choices: a refused connection is OllamaConnectError naming the URL; connect and read
timeouts are OllamaTimeout; a connection that closes before a reply is complete (the server
crashed or was stopped mid-stream) is StreamDropped, a StreamError, so callers that handle
mid-reply failures get both the in-band and the dropped kind.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any
from collections.abc import AsyncIterator, Iterator

import httpx

from app.core.errors import (MalformedResponse, OllamaConnectError, OllamaError, OllamaTimeout,
                             StreamError, error_for_status, error_for_stream_line)


class StreamDropped(StreamError):
    """The connection closed before Ollama finished its reply."""

    hint = "The connection closed mid-reply; the server may have crashed or been stopped. See its log."


@contextlib.contextmanager
def translated_errors(url: str, connect_timeout_s: float, read_timeout_s: float) -> Iterator[None]:
    """Re-raise httpx transport failures as the project's typed errors (keeping the cause)."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise OllamaTimeout(f"Connecting to Ollama at {url} timed out after {connect_timeout_s:g} s") from exc
    except httpx.ConnectError as exc:
        raise OllamaConnectError(f"Cannot connect to Ollama at {url}: {exc}") from exc
    except httpx.TimeoutException as exc:
        raise OllamaTimeout(f"Ollama at {url} sent nothing for {read_timeout_s:g} s") from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        raise StreamDropped(f"Connection to Ollama at {url} closed before the reply was complete: {exc}",
                            status=200) from exc
    except httpx.HTTPError as exc:
        raise OllamaConnectError(f"HTTP failure talking to Ollama at {url}: {exc}") from exc


def error_from_body(status: int, body: bytes, url: str) -> OllamaError:
    """The typed error for an HTTP error reply, keeping Ollama's `{"error"}` text."""
    text = body.decode("utf-8", errors="replace")
    try:
        decoded = json.loads(text)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        return error_for_status(status, decoded["error"])
    return MalformedResponse(f"HTTP {status} from {url} without Ollama's error JSON: {text.strip()[:120]!r}",
                             status=status)


def decode_line(line: str, url: str) -> dict[str, Any]:
    """One NDJSON line as a dict; an in-band `{"error"}` line raises its typed error."""
    try:
        obj = json.loads(line)
    except ValueError:
        raise MalformedResponse(f"Ollama at {url} sent a line that is not JSON: {line.strip()[:120]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedResponse(f"Ollama at {url} sent JSON that is not an object: {line.strip()[:120]!r}")
    error = obj.get("error")
    if error is not None:
        raise error_for_stream_line(str(error))
    return obj


async def raise_for_error(response: httpx.Response, url: str) -> None:
    """Raise the typed error when the reply is not 2xx."""
    if response.status_code >= 400:
        body = await response.aread()
        raise error_from_body(response.status_code, body, url)


async def ndjson_objects(response: httpx.Response, url: str) -> AsyncIterator[tuple[dict[str, Any], float]]:
    """Each JSON line of a streamed reply with its monotonic receive time (s)."""
    async for line in response.aiter_lines():
        if not line.strip():
            continue
        received = time.monotonic()
        yield decode_line(line, url), received
