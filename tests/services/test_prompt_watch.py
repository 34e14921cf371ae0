"""Prompt replies handed to the watchdog against the stand-in Ollama on a real socket: a prompt it cut to fit its
context (as the real 0.32.15 does, without a word) comes back on the reply as a PROMPT_TRUNCATED event with
both numbers; events other feeds raised while the reply ran are on it too, those from before are not."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Sequence, Mapping

from app.backends.ollama.client import OllamaClient
from app.core.errors import ServerFault
from app.core.models import RunningModel
from app.core.replies import StreamChunk
from app.core.telemetry import GpuSample, GpuSlowdown
from app.core.watch.events import EventKind, Severity, Source
from app.services.prompts import (PromptOptions, PromptRequest, ReplyOutcome, ReplyWatch, run_burst, spoiled_note,
                                  stream_reply)
from app.services.watchdog import Watchdog
from tests.bounded import run_within
from tests.fakes.ollama.fake_ollama_infer import count_prompt_tokens

CONTEXT = 256
LONG_PROMPT = " ".join(f"Paragraph {i} says the cache holds every token the model has seen." for i in range(60))


def ticking_watchdog() -> Watchdog:
    """A watchdog whose clock moves one second per reading: every event and mark is at its own time."""
    ticks = itertools.count(1_000_000.0, 1.0)
    return Watchdog(subject="test", clock=lambda: next(ticks))


class Recorder:
    """A ReplySink that keeps the outcomes it heard and runs `during` on the first chunk."""

    def __init__(self, during=None) -> None:
        self.done: list[ReplyOutcome] = []
        self._during = during

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        if self._during is not None and (chunk.content or chunk.thinking):
            self._during()
            self._during = None

    def on_done(self, outcome: ReplyOutcome) -> None:
        self.done.append(outcome)


def reply(url: str, request: PromptRequest, watch_of, sink: Recorder | None = None) -> ReplyOutcome:
    async def body() -> ReplyOutcome:
        async with OllamaClient(url) as client, OllamaClient(url) as counter:
            return await stream_reply(client, request, sink=sink, watch=watch_of(counter))
    return run_within(body, timeout=60.0)


def test_a_prompt_the_server_cut_comes_back_with_a_truncation_event(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=4)
    dog = ticking_watchdog()
    sink = Recorder()
    request = PromptRequest("qwen3:14b", LONG_PROMPT, think=False)
    outcome = reply(fake.url, request, lambda counter: ReplyWatch(dog, counter, loaded=counter.ps), sink)
    assert outcome.ok and outcome.stats.prompt_tokens == CONTEXT // 2 + 2  # what the server kept
    (event,) = outcome.events
    assert event.kind is EventKind.PROMPT_TRUNCATED and event.severity is Severity.SEVERE
    assert event.subject == "qwen3:14b"
    (evidence,) = event.evidence
    assert evidence.source is Source.REPLY
    sent = evidence.figures["prompt_tokens_sent"]
    # counted piece by piece in the server's tokens, the template's counted once: the whole prompt, not the cut one
    whole = count_prompt_tokens([LONG_PROMPT])  # what the stand-in's tokenizer makes of the whole prompt
    assert abs(sent - whole) <= 0.05 * whole and sent > 3 * CONTEXT
    assert evidence.figures["prompt_tokens_used"] == CONTEXT // 2 + 2
    # the context read from the server's loaded models after the reply
    assert f"at a context of {CONTEXT} tokens per slot" in event.summary and "counted in the server's tokens" in event.summary
    assert outcome.spoiled_by == (event,)
    assert spoiled_note(outcome.events) == "Not a clean reply: prompt cut short (see the events)."
    assert sink.done == [outcome]  # the sink hears the reply once, with its events
    assert dog.events() == (event,)  # the app's watchdog keeps it for the dashboard and the history
    # every counting probe asked for one token and no load option (no reload at another context)
    probes = [r.json for r in fake.requests if r.path == "/api/chat" and r.json.get("stream") is False]
    assert probes and all(p["options"] == {"num_predict": 1} for p in probes)


def test_a_reply_sent_with_its_own_context_is_counted_at_that_context(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=4096, tokens_per_s=2000.0, answer_tokens=4)
    request = PromptRequest("qwen3:14b", LONG_PROMPT, think=False, options=PromptOptions(num_ctx=CONTEXT))
    outcome = reply(fake.url, request, lambda counter: ReplyWatch(ticking_watchdog(), counter))
    assert outcome.ok
    # the probes ask for the reply's num_ctx: a server that reloads on a new context loads nothing new to count
    probes = [r.json for r in fake.requests if r.path == "/api/chat" and r.json.get("stream") is False]
    assert probes and all(p["options"] == {"num_predict": 1, "num_ctx": CONTEXT} for p in probes)


def test_a_prompt_within_the_context_brings_no_event_and_is_counted_once(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=4096, tokens_per_s=2000.0, answer_tokens=4)
    dog = ticking_watchdog()
    request = PromptRequest("qwen3:14b", LONG_PROMPT, think=False)
    counts: list[int] = []

    async def body() -> list[ReplyOutcome]:
        async with OllamaClient(fake.url) as client, OllamaClient(fake.url) as counter:
            watch = ReplyWatch(dog, counter)
            out = [await stream_reply(client, request, watch=watch)]
            counts.append(sum(1 for r in fake.requests if r.json and r.json.get("stream") is False))
            out.append(await stream_reply(client, request, watch=watch))  # the same prompt again: no new probes
            counts.append(sum(1 for r in fake.requests if r.json and r.json.get("stream") is False))
            return out

    outcomes = run_within(body, timeout=60.0)
    assert all(o.ok and o.events == () and o.spoiled_by == () for o in outcomes)
    assert counts[0] > 0 and counts[1] == counts[0]
    assert spoiled_note(outcomes[0].events) == ""


def test_events_other_feeds_raised_during_the_reply_are_on_it_and_earlier_ones_are_not(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=200.0, answer_tokens=10)
    dog = ticking_watchdog()
    dog.gpu_present(True)
    spilled = RunningModel("qwen3:14b", "qwen3:14b", size_bytes=10 << 30, size_vram_bytes=8 << 30)
    (earlier,) = dog.feed_loaded([spilled])  # before the request: not this reply's
    hot = GpuSample(0.0, 1000.0, 24000.0, 900.0, 99.0, 350.0, 91.0, slowdowns=frozenset({GpuSlowdown.THERMAL}))
    sink = Recorder(during=lambda: dog.feed_gpu(hot))
    outcome = reply(fake.url, PromptRequest("qwen3:14b", "hi", think=False), lambda c: ReplyWatch(dog, c), sink)
    assert outcome.ok
    (seen,) = outcome.events
    assert seen.kind is EventKind.GPU_SLOWDOWN and seen.severity is Severity.SEVERE
    assert earlier.kind is EventKind.LAYERS_ON_CPU and earlier not in outcome.events
    assert spoiled_note(outcome.events) == "Not a clean reply: GPU slowing down (see the events)."


def test_without_a_counter_no_cut_is_claimed_and_a_stopped_reply_is_not_fed(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=CONTEXT, tokens_per_s=2000.0, answer_tokens=4)
    dog = ticking_watchdog()
    outcome = reply(fake.url, PromptRequest("qwen3:14b", LONG_PROMPT, think=False), lambda _c: ReplyWatch(dog))
    assert outcome.ok and outcome.events == () and dog.events() == ()

    slow = make_fake_ollama(tokens_per_s=20.0, answer_tokens=400)
    sink = Recorder()

    async def stopped() -> None:
        async with OllamaClient(slow.url) as client:
            task = asyncio.create_task(stream_reply(client, PromptRequest("qwen3:14b", "hi", think=False), sink=sink,
                                                    watch=ReplyWatch(dog, client)))
            while not slow.requests:
                await asyncio.sleep(0.01)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    run_within(stopped, timeout=30.0)
    (heard,) = sink.done
    assert heard.stopped and heard.events == ()
    assert not [r for r in slow.requests if r.json and r.json.get("stream") is False]  # nothing counted


class FailingCounter:
    """A prompt counter whose server fails every count (as a server that cannot load the model for a probe)."""

    counts_whole_prompts = True

    async def count_text(self, model: str, text: str, *, context: int | None = None) -> int:
        raise ServerFault("model failed to load")

    async def count_chat(self, model: str, messages: Sequence[Mapping[str, str]], *,
                         context: int | None = None) -> int:
        raise ServerFault("model failed to load")

    async def aclose(self) -> None:
        return None


def test_a_counter_that_fails_makes_no_claim_and_a_burst_feeds_each_reply(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=4)
    dog = ticking_watchdog()
    outcome = reply(fake.url, PromptRequest("qwen3:14b", LONG_PROMPT, think=False),
                    lambda _c: ReplyWatch(dog, FailingCounter()))
    assert outcome.ok and outcome.events == ()

    async def burst() -> list[ReplyOutcome]:
        async with OllamaClient(fake.url) as client, OllamaClient(fake.url) as counter:
            return await run_burst(client, PromptRequest("qwen3:14b", LONG_PROMPT, think=False,
                                                         options=PromptOptions(num_predict=2)),
                                   3, watch=ReplyWatch(dog, counter))

    outcomes = run_within(burst, timeout=60.0)
    assert len(outcomes) == 3
    for o in outcomes:
        assert any(e.kind is EventKind.PROMPT_TRUNCATED for e in o.events)
    cut = [e for e in dog.events() if e.kind is EventKind.PROMPT_TRUNCATED]
    assert len(cut) == 3 and all(not math.isnan(e.at) for e in cut)


class CuttingCounter:
    """Counts as a server that counts by running the text does, cutting like the real 0.32.15 (a prompt over the
    context keeps half of it and 2 tokens): one token per character here, as in text with many short tokens."""

    counts_whole_prompts = False

    def __init__(self, context: int) -> None:
        self.context = context
        self.asked: list[str] = []

    def _run(self, tokens: int) -> int:
        return tokens if tokens <= self.context else self.context // 2 + 2

    async def count_text(self, model: str, text: str, *, context: int | None = None) -> int:
        self.asked.append(text)
        return self._run(len(text) + 3) - 3

    async def count_chat(self, model: str, messages: Sequence[Mapping[str, str]], *,
                         context: int | None = None) -> int:
        return self._run(sum(len(m["content"]) for m in messages) + 3)

    async def aclose(self) -> None:
        return None


def test_a_piece_the_counter_may_have_cut_is_counted_again_in_halves() -> None:
    counter = CuttingCounter(context=CONTEXT)
    watch = ReplyWatch(ticking_watchdog(), counter)
    prompt = " ".join(["abcdefg"] * 200)  # 1,599 characters: 1,599 tokens to this counter
    counted = run_within(lambda: watch.count_prompt(PromptRequest("m", prompt), CONTEXT), timeout=10.0)
    # every piece whole, the template's 3 once (a split piece's leading space is not counted: never over the truth)
    assert len(prompt) + 3 - 16 <= counted <= len(prompt) + 3
    first, *rest = counter.asked
    assert CONTEXT // 2 < len(first) <= CONTEXT  # a piece of the context in characters first: cut
    # ... then the rest in smaller pieces until one counts under half the context, which go on at that size
    assert all(len(t) <= CONTEXT // 2 for t in rest) and max(len(t) for t in rest[-3:]) <= CONTEXT // 4
    assert len(counter.asked) < len(prompt) / (CONTEXT // 4) + 4  # no piece counted twice over
