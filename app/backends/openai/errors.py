"""An OpenAI-compatible server's failures as the app's typed errors, decided here and nowhere else.

Error bodies come in the shapes these servers send:
- `{"error": {"message", "type", "code", "param"}}`: OpenAI's own, llama-server's, Ollama's /v1, SGLang's
  and vLLM's since 0.10;
- `{"object": "error", "message", "type", "code"}`: vLLM's ErrorResponse before 0.10 (top level);
- `{"error": "text"}` or `{"detail": "text"}`: proxies, TGI, FastAPI defaults;
and in-band `data: {"error": …}` events once a stream started. 401/403 is AuthRefused whose hint says
how to give the key (the key itself is never in a message); 404 is ModelNotFound naming GET /v1/models.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.adapters.http import translate
from app.adapters.http.errors import TlsFailed, TransportError, decoded_body
from app.adapters.secrets import KEY_ENV
from app.core.errors import (AuthRefused, BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, QueueFull,
                             ReplyUnfinished, ServerError, ServerFault, ServerUnreachable, StreamError, StreamOutOfMemory,
                             TransportWords, is_oom_message, OutOfMemory)

SERVER = "the OpenAI-compatible server"
CONNECT_HINT = ("Is the server running and is this its address? Give --url as the base the server's API is under "
                "(http://HOST:PORT or https://HOST/v1); ollama-deck attaches to it and does not start it.")
MALFORMED_HINT = ("The server sent something that is not the OpenAI chat API; check that --url points at an "
                  "OpenAI-compatible server (it should answer GET /v1/models).")
AUTH_HINT = ("Give the server's API key: --api-key-env VAR names an environment variable holding it (add "
             f"--save-api-key to keep it in the desktop's secret store for this URL), or set {KEY_ENV}.")
TLS_HINT = ("The server's certificate is checked against the system's CAs and must name the host in --url. For a "
            "server with a private CA or a self-signed certificate, give its CA certificate with --ca-bundle FILE "
            "(PEM); checking is never switched off.")
MODEL_HINT = "Use a model id the server lists (GET /v1/models, the Prompt page's model list)."
STREAM_HINT = "The server failed mid-reply; see its log."
CONTEXT_WORDS = ("maximum context length", "context length", "exceeds the available context")

_WORDS = TransportWords(SERVER, CONNECT_HINT)


def malformed(message: str, status: int | None = None) -> MalformedResponse:
    """The server's bytes are not the OpenAI API."""
    return MalformedResponse(message, hint=MALFORMED_HINT, status=status)


def missing_done(url: str) -> ReplyUnfinished:
    """A stream whose HTTP response ended properly but without its final `data: [DONE]` event."""
    return ReplyUnfinished(f"{SERVER} at {url} ended the reply without its final record (`data: [DONE]`)", status=200)


def error_for_object(status: int, error: Mapping[str, Any], url: str = "") -> ServerError:
    """The typed error for an error object (message, type, code), keeping the server's message."""
    message = str(error.get("message") or "(no message)")
    kind = str(error.get("type") or "")
    where = f"{SERVER} at {url}" if url else SERVER
    text = f"{where}: {message}"
    if status in (401, 403) or kind in ("authentication_error", "AuthenticationError", "permission_error"):
        what = "refused the API key" if status != 403 else "refused access with the API key"
        return AuthRefused(f"{where} {what} (HTTP {status or 401}: {message})", hint=AUTH_HINT,
                           status=status or 401)
    if status == 404 or kind in ("not_found_error", "NotFoundError"):
        return ModelNotFound(text, hint=MODEL_HINT, status=404)
    low = message.lower()
    if kind == "exceed_context_size_error" or any(words in low for words in CONTEXT_WORDS):
        return ContextExceeded(text, hint="Shorten the prompt or the conversation; the server's context is fixed "
                               "where it was started.", status=status)
    if is_oom_message(message):
        return OutOfMemory(text, status=status)
    if status == 429 or (status == 503 and "overload" in low):
        return QueueFull(text, status=status)
    if 400 <= status < 500:
        return BadRequest(text, status=status)
    return ServerFault(text, status=status)


def error_from_body(status: int, body: bytes, url: str) -> ServerError:
    """The typed error for an HTTP error reply, keeping the server's message."""
    text, decoded = decoded_body(body)
    if isinstance(decoded, dict):
        error = decoded.get("error")
        if isinstance(error, dict):
            return error_for_object(status, error, url)
        if isinstance(error, str):
            return error_for_object(status, {"message": error}, url)
        if decoded.get("object") == "error" or isinstance(decoded.get("message"), str):
            return error_for_object(status, decoded, url)  # vLLM before 0.10: the error at the top level
        if isinstance(decoded.get("detail"), str):
            return error_for_object(status, {"message": decoded["detail"]}, url)
    if status in (401, 403, 404):  # a proxy's or framework's page: the status says enough
        return error_for_object(status, {"message": text.strip()[:120] or f"HTTP {status}"}, url)
    return malformed(f"HTTP {status} from {url} without an OpenAI error JSON: {text.strip()[:120]!r}", status)


def error_for_event(error: Any) -> StreamError:
    """The typed error for an in-band `data: {"error": …}` event (the status stayed 200)."""
    message = str(error.get("message") if isinstance(error, dict) else error)
    if is_oom_message(message):
        return StreamOutOfMemory(f"{SERVER}: {message}", status=200)
    return StreamError(f"{SERVER}: {message}", hint=STREAM_HINT, status=200)


class _Translator(translate.ErrorTranslator):
    """The shared translation, with a TLS failure's own advice (a certificate not trusted, a name not on it)."""

    def for_transport(self, exc: TransportError) -> ServerError:
        if isinstance(exc, TlsFailed):
            return ServerUnreachable(f"{SERVER} at {exc.url.rstrip('/')} could not be reached over TLS: {exc.reason}",
                                     hint=TLS_HINT)
        return super().for_transport(exc)


_TRANSLATE = _Translator(_WORDS, error_from_body, malformed)
error_for_transport = _TRANSLATE.for_transport
translated_errors = _TRANSLATE.translated


__all__ = ["AUTH_HINT", "SERVER", "error_for_event", "error_for_object", "error_for_transport", "error_from_body",
           "malformed", "missing_done", "translated_errors"]
