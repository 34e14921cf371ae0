"""Send test prompts and measure their replies: one reply, N copies at once, or thinking vs not.

Coroutines for the asyncio loop thread. Each chunk goes to a sink as it arrives (the GUI buffers
it and paints at its own pace) and to the shared TokenMeter (the dashboard's tokens/s); every
reply ends with exactly one `on_done`, also when it fails or is stopped. Stopping is cancelling
the task: the HTTP stream closes at once and the outcome says `stopped`.

A reply's clock starts when its request went out (the transport's stamp on every chunk), not when
it was asked for: connecting, building the request and waiting for the loop or the GIL are not the
server's time. Only a reply that fails before any line falls back to the time it was asked for.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from app.core.errors import DeckError
from app.core.ports.inference import ChatStreaming
from app.core.replies import StreamChunk
from app.core.console.reply_stats import ReplyMeter, ReplyStats
from app.core.throughput import TokenMeter

MAX_BURST = 32


@dataclass(frozen=True)
class PromptOptions:
    """Per-request model options; None leaves each to the model's default."""

    num_predict: int | None = None  # max tokens to generate
    temperature: float | None = None
    seed: int | None = None
    num_ctx: int | None = None  # context tokens; a new value reloads the model

    def to_api(self) -> dict[str, Any] | None:
        """The `options` object of the request, or None when nothing is set."""
        options = {k: v for k, v in (("num_predict", self.num_predict), ("temperature", self.temperature),
                                     ("seed", self.seed), ("num_ctx", self.num_ctx)) if v is not None}
        return options or None


@dataclass(frozen=True)
class PromptRequest:
    """One chat turn: the prompt, earlier turns, thinking mode (True/False/level, None = omit)."""

    model: str
    prompt: str
    think: bool | str | None = None
    system: str = ""
    options: PromptOptions = field(default_factory=PromptOptions)
    history: tuple[dict[str, str], ...] = ()  # earlier {"role", "content"} messages, oldest first

    def messages(self) -> list[dict[str, str]]:
        """The `messages` array: system prompt, earlier turns, this prompt."""
        out = [{"role": "system", "content": self.system}] if self.system.strip() else []
        out += [dict(m) for m in self.history]
        out.append({"role": "user", "content": self.prompt})
        return out

    def with_think(self, think: bool | str | None) -> PromptRequest:
        """The same request in another thinking mode."""
        return replace(self, think=think)


@dataclass(frozen=True)
class ReplyOutcome:
    """How one reply ended: its figures, its text, and the error or stop that ended it early."""

    index: int
    stats: ReplyStats
    thinking: str
    content: str
    error: DeckError | None = None
    stopped: bool = False

    @property
    def ok(self) -> bool:
        """True when the server finished the reply."""
        return self.error is None and not self.stopped and self.stats.finished


class ReplySink(Protocol):
    """Receives a reply as it streams (called on the loop thread)."""

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        """One stream line of reply `index`."""

    def on_done(self, outcome: ReplyOutcome) -> None:
        """Reply `outcome.index` is over (finished, failed or stopped)."""


async def stream_reply(client: ChatStreaming, request: PromptRequest, *, index: int = 0, sink: ReplySink | None = None,
                       meter: TokenMeter | None = None) -> ReplyOutcome:
    """Stream one reply to the end and return its outcome (errors are returned, not raised;
    cancelling raises CancelledError after the sink heard `stopped`)."""
    thinking: list[str] = []
    content: list[str] = []
    error: DeckError | None = None
    stopped = False
    if meter is not None:
        meter.begin()
    asked = time.monotonic()  # the clock StreamChunk.t_monotonic uses; the first chunk brings the sent time
    counter = ReplyMeter(asked)
    try:
        async for chunk in client.chat(request.model, request.messages(), think=request.think,
                                       options=request.options.to_api()):
            n_thinking, n_answer = counter.add(chunk)
            if chunk.thinking:
                thinking.append(chunk.thinking)
            if chunk.content:
                content.append(chunk.content)
            if meter is not None and (n_thinking or n_answer):
                meter.add(n_thinking + n_answer, chunk.t_monotonic)
            if sink is not None:
                sink.on_chunk(index, chunk)
    except asyncio.CancelledError:
        stopped = True
        raise
    except DeckError as exc:
        error = exc
    except Exception as exc:  # noqa: BLE001 - the reply must still end with on_done
        error = DeckError(f"Unexpected failure while streaming: {exc!r}")
    finally:
        if meter is not None:
            meter.end()
        outcome = ReplyOutcome(index, counter.snapshot(time.monotonic()), "".join(thinking), "".join(content),
                               error, stopped)
        if sink is not None:
            sink.on_done(outcome)
    return outcome


async def run_burst(client: ChatStreaming, request: PromptRequest, copies: int, *, sink: ReplySink | None = None,
                    meter: TokenMeter | None = None) -> list[ReplyOutcome]:
    """Send `copies` identical requests at once (1..MAX_BURST) and wait for all of them."""
    if not 1 <= copies <= MAX_BURST:
        raise ValueError(f"copies must be 1..{MAX_BURST}, got {copies}")
    return list(await asyncio.gather(*(stream_reply(client, request, index=i, sink=sink, meter=meter)
                                       for i in range(copies))))


async def run_ab(client: ChatStreaming, request: PromptRequest, think: bool | str = True, *, sink: ReplySink | None = None,
                 meter: TokenMeter | None = None) -> tuple[ReplyOutcome, ReplyOutcome]:
    """The same prompt with thinking (index 0) and without (index 1), one after the other so
    neither waits in the other's queue."""
    with_thinking = await stream_reply(client, request.with_think(think), index=0, sink=sink, meter=meter)
    without = await stream_reply(client, request.with_think(False), index=1, sink=sink, meter=meter)
    return with_thinking, without


__all__ = ["MAX_BURST", "PromptOptions", "PromptRequest", "ReplyOutcome", "ReplySink", "run_ab", "run_burst",
           "stream_reply"]
