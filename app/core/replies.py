"""A streamed reply in neutral terms: its lines as they arrived, and its final figures.

Every backend's parser builds these, so the console and the load generator measure replies the
same way whatever the server: counts in tokens, durations in milliseconds, times in seconds on
the client's monotonic clock. What the server itself sent is kept beside them (`raw`), unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping


@dataclass(frozen=True)
class ChatRequest:
    """One chat request in neutral terms; each backend writes it in its own wire format."""

    model: str
    messages: tuple[Mapping[str, str], ...]  # {"role": ..., "content": ...}, oldest first
    think: bool | str | None = None  # None: the model decides
    seed: int | None = None
    max_tokens: int | None = None  # output cap in tokens; None: the server's default


@dataclass(frozen=True)
class FinalFigures:
    """A finished reply's figures as the server reported them; None where it did not say."""

    done_reason: str | None = None  # "stop", "length", "load", … as the server names it
    # The server's prompt count: the tokens it evaluated where it tells those from its cache apart
    # (cached_prompt_tokens), else every prompt token it used (a server may count its cached ones in).
    prompt_tokens: int | None = None
    output_tokens: int | None = None  # generated tokens, thinking included
    prompt_ms: float | None = None  # prompt processing time
    decode_ms: float | None = None  # generation time
    load_ms: float | None = None  # loading the model for this request
    total_ms: float | None = None  # the whole request on the server
    cached_prompt_tokens: int | None = None  # prompt tokens taken from the server's cache (None: not said)
    busy_ms: float | None = None  # the server's time from starting the prompt to the last token (None: not said)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the server's final record

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Generation rate in tokens/s (output_tokens / decode_ms), None when unknown."""
        if not self.output_tokens or not self.decode_ms:
            return None
        return self.output_tokens / self.decode_ms * 1e3

    @property
    def prompt_tokens_per_s(self) -> float | None:
        """Prompt tokens counted over the prompt time in tokens/s, None when unknown (cached tokens included where
        the server counts them in: see prompt_tokens)."""
        if not self.prompt_tokens or not self.prompt_ms:
            return None
        return self.prompt_tokens / self.prompt_ms * 1e3


@dataclass(frozen=True)
class StreamChunk:
    """One line of a streamed reply; times in seconds on the client's monotonic clock.

    t_monotonic is when the line's last byte arrived; request_sent_s is when the request that asked
    for it went out (the same for every line of a reply; None when the transport cannot say)."""

    content: str
    thinking: str
    done: bool
    t_monotonic: float
    final: FinalFigures | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    request_sent_s: float | None = None


__all__ = ["FinalFigures", "StreamChunk"]
