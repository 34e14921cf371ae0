"""Send test prompts and measure their replies: one reply, N copies at once, or thinking vs not.

Coroutines for the asyncio loop thread. Each chunk goes to a sink as it arrives (the GUI buffers
it and paints at its own pace) and to the shared TokenMeter (the dashboard's tokens/s); every
reply ends with exactly one `on_done`, also when it fails or is stopped. Stopping is cancelling
the task: the HTTP stream closes at once and the outcome says `stopped`.

A reply's clock starts when its request went out (the transport's stamp on every chunk), not when
it was asked for: connecting, building the request and waiting for the loop or the GIL are not the
server's time. Only a reply that fails before any line falls back to the time it was asked for.

Given a ReplyWatch, each finished reply is also handed to the server's watchdog (its prompt counted in the
server's own tokens, so a prompt the server cut shows) and carries the events seen while it ran.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from app.core.bench.prompt_maker import corpus_chunks
from app.core.errors import ContextExceeded, DeckError
from app.core.models import RunningModel
from app.core.ports.inference import ChatStreaming, PromptTokenCounter
from app.core.replies import FinalFigures, StreamChunk
from app.core.watch.events import WatchEvent, spoiling
from app.core.watch.signals import ReplyFacts
from app.services.watchdog import Watchdog
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
    final: FinalFigures | None = field(default=None, compare=False)  # the server's final record, when it came
    events: tuple[WatchEvent, ...] = ()  # what the watchdog saw from the request's start to the reply's end

    @property
    def ok(self) -> bool:
        """True when the server finished the reply."""
        return self.error is None and not self.stopped and self.stats.finished

    @property
    def spoiled_by(self) -> tuple[WatchEvent, ...]:
        """The events that make this reply not the setting's own (a cut prompt, a cold load, a spill…)."""
        return spoiling(self.events)


class ReplySink(Protocol):
    """Receives a reply as it streams (called on the loop thread)."""

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        """One stream line of reply `index`."""

    def on_done(self, outcome: ReplyOutcome) -> None:
        """Reply `outcome.index` is over (finished, failed or stopped)."""


async def stream_reply(client: ChatStreaming, request: PromptRequest, *, index: int = 0, sink: ReplySink | None = None,
                       meter: TokenMeter | None = None, watch: ReplyWatch | None = None) -> ReplyOutcome:
    """Stream one reply to the end and return its outcome (errors are returned, not raised;
    cancelling raises CancelledError after the sink heard `stopped`). With `watch`, the outcome the sink
    hears carries the events seen while it ran."""
    started = watch.now() if watch is not None else 0.0
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
                               error, stopped, final=counter.final)
        if sink is not None and (stopped or watch is None):
            sink.on_done(outcome)
    if watch is None:
        return outcome
    try:
        outcome = await watch.finish(outcome, request, started)
    finally:  # also when stopped while the prompt is counted: the reply is over either way
        if sink is not None:
            sink.on_done(outcome)
    return outcome


async def run_burst(client: ChatStreaming, request: PromptRequest, copies: int, *, sink: ReplySink | None = None,
                    meter: TokenMeter | None = None, watch: ReplyWatch | None = None) -> list[ReplyOutcome]:
    """Send `copies` identical requests at once (1..MAX_BURST) and wait for all of them."""
    if not 1 <= copies <= MAX_BURST:
        raise ValueError(f"copies must be 1..{MAX_BURST}, got {copies}")
    return list(await asyncio.gather(*(stream_reply(client, request, index=i, sink=sink, meter=meter, watch=watch)
                                       for i in range(copies))))


async def run_ab(client: ChatStreaming, request: PromptRequest, think: bool | str = True, *, sink: ReplySink | None = None,
                 meter: TokenMeter | None = None, watch: ReplyWatch | None = None) -> tuple[ReplyOutcome, ReplyOutcome]:
    """The same prompt with thinking (index 0) and without (index 1), one after the other so
    neither waits in the other's queue."""
    with_thinking = await stream_reply(client, request.with_think(think), index=0, sink=sink, meter=meter,
                                       watch=watch)
    without = await stream_reply(client, request.with_think(False), index=1, sink=sink, meter=meter, watch=watch)
    return with_thinking, without


# Pieces a prompt is counted in where the server counts by running the text (and so cuts a piece longer than its
# context as it would cut the request): as many characters as the context has tokens (a quarter of it in tokens
# for English text), within these bounds; PIECE_CHARS where the context is not known. A piece that counts half
# the context or more may have been cut (a server keeps about half when it shifts): it is counted again in halves.
PIECE_CHARS = 400
PIECE_CHARS_MIN = 48
PIECE_CHARS_MAX = 4000
_COUNTS_KEPT = 4096  # piece counts kept per watch (a page sends the same long prompt again and again)


class ReplyWatch:
    """Hands finished replies to a watchdog and gives each the events seen while it ran.

    Each reply's prompt is counted in the server's own tokens by `counter` (the backend's prompt counter,
    None where it has none: then no cut can be claimed): whole where the server counts any length, else piece
    by piece (each piece shorter than the context, so the count is not cut as the request may have been)
    plus the chat template's tokens — earlier turns' template tokens are left out, so the count can fall short
    of the truth, never over it. `loaded` reads the server's loaded models (where it lists them) for the context
    per slot the reply ran at. Runs on the event loop; the counter is used from there only."""

    def __init__(self, watchdog: Watchdog, counter: PromptTokenCounter | None = None, *,
                 loaded: Callable[[], Awaitable[Sequence[RunningModel]]] | None = None) -> None:
        self.watchdog = watchdog
        self._counter = counter
        self._loaded = loaded
        self._pieces: dict[tuple[str, str], int] = {}
        self._templates: dict[tuple[str, str], int] = {}

    def now(self) -> float:
        """The watchdog's wall clock: mark a request's start with it."""
        return self.watchdog.now()

    async def finish(self, outcome: ReplyOutcome, request: PromptRequest, started: float, *,
                     context_per_slot: int | None = None) -> ReplyOutcome:
        """Feed the watchdog this reply's facts and return the outcome with the events from `started` (the
        watchdog's clock when the request went out) to now, those other feeds raised meanwhile included. A
        stopped reply is not fed (its figures are not the server's)."""
        end = self.watchdog.now()
        if outcome.stopped:
            return replace(outcome, events=self.watchdog.between(started, end))
        error = outcome.error
        if context_per_slot is None and isinstance(error, ContextExceeded):
            context_per_slot = error.context_tokens
        if context_per_slot is None and self._loaded is not None:
            try:
                context_per_slot = loaded_context(await self._loaded(), request.model)
            except DeckError:
                context_per_slot = None
        sent: int | None = None
        final = outcome.final
        if self._counter is not None and error is None and final is not None and final.prompt_tokens is not None:
            try:
                sent = await self.count_prompt(request, context_per_slot)
            except Exception:  # noqa: BLE001 - a counter that fails makes no claim; the reply stands
                sent = None
        ttft = outcome.stats.ttft_ms / 1e3 if outcome.stats.ttft_ms is not None else None
        facts = ReplyFacts.of(final, model=request.model, at=end, prompt_sent=sent, prompt_counted=sent is not None,
                              ttft_s=ttft, refused_too_long=isinstance(error, ContextExceeded),
                              context_per_slot=context_per_slot)
        self.watchdog.feed_reply(facts)
        return replace(outcome, events=self.watchdog.between(started, max(end, self.watchdog.now())))

    async def count_prompt(self, request: PromptRequest, context_per_slot: int | None = None) -> int:
        """The request's prompt tokens as the server counts them (see the class); raises the counter's errors."""
        counter = self._counter
        if counter is None:
            raise DeckError("No prompt counter for this server")
        ctx = request.options.num_ctx  # the reply's own context, so counting reloads nothing
        if counter.counts_whole_prompts:
            return await counter.count_chat(request.model, request.messages(), context=ctx)
        key = (request.model, request.system)
        if key not in self._templates:
            messages = ([{"role": "system", "content": request.system}] if request.system.strip() else []) \
                + [{"role": "user", "content": ""}]
            self._templates[key] = await counter.count_chat(request.model, messages, context=ctx)
        template = total = self._templates[key]
        chars = PIECE_CHARS if not context_per_slot else \
            max(PIECE_CHARS_MIN, min(PIECE_CHARS_MAX, context_per_slot))
        # Past this a piece may have been cut: the rest is counted in halves (no limit where the context is unknown).
        suspect = context_per_slot // 2 - template if context_per_slot else None
        for message in (*request.history, {"content": request.prompt}):
            pieces = deque(corpus_chunks(message.get("content", ""), chars))
            while pieces:
                piece = pieces.popleft()
                count = await self._count_piece(counter, request.model, piece, ctx)
                if suspect is not None and count >= suspect and len(piece) > PIECE_CHARS_MIN:
                    chars = max(PIECE_CHARS_MIN, len(piece) // 2)  # smaller pieces from here on
                    pieces = deque(corpus_chunks(piece + "".join(pieces), chars))
                    continue
                total += count
        return total

    async def _count_piece(self, counter: PromptTokenCounter, model: str, piece: str, context: int | None) -> int:
        key = (model, piece)
        if key not in self._pieces:
            if len(self._pieces) >= _COUNTS_KEPT:
                self._pieces.clear()
            self._pieces[key] = await counter.count_text(model, piece, context=context)
        return self._pieces[key]


def loaded_context(models: Sequence[RunningModel] | None, model: str) -> int | None:
    """The context per slot `model` is loaded with, where the server's list of loaded models says."""
    for m in models or ():
        if model in (m.name, m.model) or m.name == f"{model}:latest":
            return m.context_length
    return None


def spoiled_note(events: Sequence[WatchEvent], *, pointer: str = " (see the events)") -> str:
    """A line saying a reply is not the setting's own, naming why ("" when nothing spoiled it); `pointer` says
    where the events are."""
    kinds = list(dict.fromkeys(e.kind.label for e in spoiling(events)))
    if not kinds:
        return ""
    return f"Not a clean reply: {', '.join(kinds)}{pointer}."


__all__ = ["MAX_BURST", "PIECE_CHARS", "PromptOptions", "PromptRequest", "ReplyOutcome", "ReplySink", "ReplyWatch",
           "loaded_context", "run_ab", "run_burst", "spoiled_note", "stream_reply"]
