"""llama-server's failures as the app's typed errors, decided here and nowhere else.

Whatever way a request to llama-server fails, its error is made in this module:
- the streaming transport's errors (app.adapters.http.errors) for streamed chats;
- httpx's, for the plain requests (/props, /v1/models, /health);
- an error reply's body, `{"error": {"code", "message", "type"}}` (llama.cpp's
  format_error_response), whose `type` and status pick the class and keep the server's text;
- an in-band `data: {"error": …}` event, which is how llama-server fails once a stream started.

Choices: `exceed_context_size_error` (400: "request (N tokens) exceeds the available context size
(M tokens)") is BadRequest whose hint names both numbers; 503 `unavailable_error` "Loading model"
is ServerFault telling the user to wait for /health; a refused connection is ServerUnreachable
naming the URL; a connection that closes mid-reply is StreamDropped, and a reply that ends properly without its
`data: [DONE]` is ReplyUnfinished, as for Ollama.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


from app.adapters.http import translate
from app.adapters.http.errors import decoded_body
from app.core.errors import (BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, ServerError,
                             OutOfMemory, QueueFull, ReplyUnfinished, ServerFault, StreamError,
                             StreamOutOfMemory, TransportWords, is_oom_message)

SERVER = "llama-server"
CONNECT_HINT = "Is llama-server running? Start it on the Server page or check host and port."
MALFORMED_HINT = "The server sent something that is not llama-server's API; check that host:port is llama-server."
LOADING_HINT = "llama-server is still loading its model; wait until its /health answers ok, then try again."
AUTH_HINT = "This llama-server was started with --api-key; ollama-deck does not send one. Start it without."
STREAM_HINT = "llama-server failed mid-reply; see its log."


# llama-server's words for a failed connection, a timeout and a connection closed early.
_WORDS = TransportWords(SERVER, CONNECT_HINT)
connect_failed = _WORDS.connect_failed
connect_timed_out = _WORDS.connect_timed_out
read_timed_out = _WORDS.read_timed_out
dropped = _WORDS.dropped


def missing_done(url: str) -> ReplyUnfinished:
    """A stream whose HTTP response ended properly but without llama-server's final `data: [DONE]` event."""
    return ReplyUnfinished(f"{SERVER} at {url} ended the reply without its final record (`data: [DONE]`)", status=200)


def malformed(message: str, status: int | None = None) -> MalformedResponse:
    """The server's bytes are not what llama-server sends."""
    return MalformedResponse(message, hint=MALFORMED_HINT, status=status)


def _context_hint(error: Mapping[str, Any]) -> str:
    n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
    if isinstance(n_prompt, int) and isinstance(n_ctx, int):
        return (f"The prompt is {n_prompt} tokens but each slot holds {n_ctx} (context ÷ parallel); shorten the "
                "prompt or the conversation, or raise the context length / lower parallel on the Server page.")
    return ("The prompt does not fit in a slot's context (context ÷ parallel); shorten it or raise the context "
            "length on the Server page.")


def error_for_object(status: int, error: Mapping[str, Any]) -> ServerError:
    """The typed error for llama-server's `error` object (its code/type/message), keeping its message."""
    message = str(error.get("message") or "(no message)")
    kind = str(error.get("type") or "")
    text = f"{SERVER}: {message}"
    if kind == "exceed_context_size_error":
        n_prompt, n_ctx = error.get("n_prompt_tokens"), error.get("n_ctx")
        return ContextExceeded(text, hint=_context_hint(error), status=status,
                               prompt_tokens=n_prompt if isinstance(n_prompt, int) else None,
                               context_tokens=n_ctx if isinstance(n_ctx, int) else None)
    if kind == "unavailable_error" or (status == 503 and "loading" in message.lower()):
        return ServerFault(text, hint=LOADING_HINT, status=status)
    if kind == "authentication_error" or status == 401:
        return BadRequest(text, hint=AUTH_HINT, status=status)
    if kind == "not_found_error" or status == 404:
        return ModelNotFound(text, hint="llama-server serves the model it was started with; pick that one or "
                             "restart it with another model file.", status=status)
    if is_oom_message(message):
        return OutOfMemory(text, status=status)
    if kind in ("invalid_request_error", "not_supported_error", "permission_error") or 400 <= status < 500:
        return BadRequest(text, status=status)
    if status == 503:
        return QueueFull(text, status=status)
    return ServerFault(text, status=status)


def error_from_body(status: int, body: bytes, url: str) -> ServerError:
    """The typed error for an HTTP error reply, keeping llama-server's `error.message`."""
    text, decoded = decoded_body(body)
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if isinstance(error, dict):
        return error_for_object(status, error)
    if isinstance(error, str):  # some proxies and older builds send a bare string
        return error_for_object(status, {"message": error})
    return malformed(f"HTTP {status} from {url} without llama-server's error JSON: {text.strip()[:120]!r}", status)


def error_for_event(error: Any) -> StreamError:
    """The typed error for an in-band `data: {"error": …}` event (the status stayed 200)."""
    message = str(error.get("message") if isinstance(error, dict) else error)
    if is_oom_message(message):
        return StreamOutOfMemory(f"{SERVER}: {message}", status=200)
    return StreamError(f"{SERVER}: {message}", hint=STREAM_HINT, status=200)


# Every way a request to llama-server fails, as the app's errors (see adapters/http/translate.py).
_TRANSLATE = translate.ErrorTranslator(_WORDS, error_from_body, malformed)
error_for_transport = _TRANSLATE.for_transport
error_for_httpx = _TRANSLATE.for_httpx
require_streamable = _TRANSLATE.require_streamable
translated_errors = _TRANSLATE.translated


__all__ = ["SERVER", "connect_failed", "dropped", "error_for_event", "error_for_httpx", "error_for_object",
           "error_for_transport", "error_from_body", "malformed", "missing_done", "require_streamable",
           "translated_errors"]
