"""Typed errors shared by every layer; each keeps the server's own message and says what to do."""

from __future__ import annotations

# Substrings servers and llama.cpp use when a load or allocation runs out of memory.
OOM_SUBSTRINGS: tuple[str, ...] = (
    "out of memory",
    "cudamalloc failed",
    "failed to allocate",
    "allocation failed",
    "not enough memory",
    "insufficient memory",
    "model requires more system memory",
    "memory layout cannot be allocated",
)


def is_oom_message(text: str) -> bool:
    """True when a server's or llama.cpp's message reports running out of memory."""
    low = text.lower()
    return any(s in low for s in OOM_SUBSTRINGS)


class DeckError(Exception):
    """An error a user can act on: `message` says what happened, `hint` what to do."""

    hint: str = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def user_text(self) -> str:
        """Message and hint in one line for a status bar or stderr."""
        return f"{self.message} — {self.hint}" if self.hint else self.message


class ServerError(DeckError):
    """An error from (or on the way to) the server."""

    status: int | None = None

    def __init__(self, message: str, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint)
        if status is not None:
            self.status = status


class ServerUnreachable(ServerError):
    hint = "Is the server running? Start it on the Server page or check host and port."


class ServerTimeout(ServerError):
    hint = "The server did not answer in time; it may be loading a large model or stuck."


class MalformedResponse(ServerError):
    hint = "The server sent something that is not its API; check that host:port is the server you meant."


class ModelNotFound(ServerError):
    status = 404
    hint = "Pull the model first (Models page) or check the name and tag."


class BadRequest(ServerError):
    status = 400
    hint = "The server refused the request as sent."


class AuthRefused(BadRequest):
    """The server refused the request's API key, or wanted one and got none (HTTP 401/403)."""

    status = 401
    hint = "Give the server's API key."


class ContextExceeded(BadRequest):
    """The server refused a prompt longer than a slot's context (its own sign, with both numbers where it gave them)."""

    def __init__(self, message: str, hint: str | None = None, status: int | None = None, *,
                 prompt_tokens: int | None = None, context_tokens: int | None = None) -> None:
        super().__init__(message, hint=hint, status=status)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens


class ServerFault(ServerError):
    status = 500
    hint = "See the server log for details."


class OutOfMemory(ServerFault):
    hint = "Lower context length or parallel requests, quantize the KV cache, or use a smaller quantization."


class QueueFull(ServerError):
    status = 503
    hint = "Too many requests are waiting; raise max queue or send fewer at once."


class StreamError(ServerError):
    """An in-band `{"error": ...}` line after a stream had started (HTTP status stays 200)."""

    hint = "The server failed mid-reply; see the server log."


class StreamDropped(StreamError):
    """The connection closed before the server finished its reply."""

    hint = "The connection closed mid-reply; the server may have crashed or been stopped. See its log."


class ReplyUnfinished(StreamError):
    """The server ended its reply properly (the HTTP response was complete, nothing was lost on the way) but without
    the final record that closes a reply: the server stopped there by itself. Not a dropped connection (see
    StreamDropped): that is a response cut off mid-body."""

    hint = ("The server ended the reply early without saying why; the connection was fine. Its log may say more; "
            "a reply without its final record has no figures and is counted as failed.")


class StreamOutOfMemory(StreamError, OutOfMemory):
    """An in-band error line that reports running out of memory."""


def error_for_status(status: int, message: str) -> ServerError:
    """Map an HTTP status and the server's `error` text to a typed error keeping the text."""
    if status == 404:
        return ModelNotFound(message, status=404)
    if status == 400:
        return BadRequest(message, status=400)
    if status == 503:
        return QueueFull(message, status=503)
    if status >= 500:
        if is_oom_message(message):
            return OutOfMemory(message, status=status)
        return ServerFault(message, status=status)
    return ServerError(message, status=status, hint="Unexpected HTTP status from the server.")


def error_for_stream_line(message: str) -> StreamError:
    """Map an in-band error line to a typed error."""
    if is_oom_message(message):
        return StreamOutOfMemory(message, status=200)
    return StreamError(message, status=200)


class EstimateError(DeckError):
    """A VRAM estimate cannot be made from the given model metadata or settings."""

    hint = "Check the model metadata and the settings you entered."


class TransportWords:
    """The errors every backend raises when the way to its server fails, in that server's name:
    nothing answered, the connection or a reply timed out, the connection closed early."""

    def __init__(self, server: str, connect_hint: str | None = None) -> None:
        self.server = server  # as the user knows it: the backend's display name
        self.connect_hint = connect_hint  # None: the generic "is the server running?" hint

    def connect_failed(self, url: str, reason: object) -> ServerUnreachable:
        """Nothing answered at url."""
        return ServerUnreachable(f"Cannot connect to {self.server} at {url}: {reason}", hint=self.connect_hint)

    def connect_timed_out(self, url: str, timeout_s: float) -> ServerTimeout:
        """The connection was not accepted within timeout_s seconds."""
        return ServerTimeout(f"Connecting to {self.server} at {url} timed out after {timeout_s:g} s")

    def read_timed_out(self, url: str, timeout_s: float) -> ServerTimeout:
        """A reply fell silent for timeout_s seconds."""
        return ServerTimeout(f"{self.server} at {url} sent nothing for {timeout_s:g} s")

    def dropped(self, url: str, replied: bool = True, reason: object = None) -> StreamDropped:
        """The connection closed before the reply was complete (or before any of it)."""
        how = "before the reply was complete" if replied else "before replying"
        return StreamDropped(f"Connection to {self.server} at {url} closed {how}" + (f": {reason}" if reason else ""),
                             status=200)
