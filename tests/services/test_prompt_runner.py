"""Prompt runs against the stand-in Ollama on a real socket: one reply, bursts, A/B, errors, Stop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from app.backends.ollama.client import OllamaClient
from app.services.prompts import (PromptOptions, PromptRequest, ReplyOutcome, run_ab, run_burst,
                                        stream_reply)
from app.core.errors import BadRequest, ModelNotFound, StreamError
from app.core.replies import StreamChunk
from app.core.console.reply_stats import summarize_burst, thinking_cost
from app.core.throughput import TokenMeter

WAIT_S = 10.0


class Recorder:
    """A ReplySink that keeps what it heard and can signal the first chunk."""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, StreamChunk]] = []
        self.done: list[ReplyOutcome] = []
        self.first_chunk = threading.Event()

    def on_chunk(self, index: int, chunk: StreamChunk) -> None:
        self.chunks.append((index, chunk))
        if chunk.content or chunk.thinking:
            self.first_chunk.set()

    def on_done(self, outcome: ReplyOutcome) -> None:
        self.done.append(outcome)


def run(coro):
    return asyncio.run(coro)


async def _with_client(url: str, body):
    async with OllamaClient(url) as client:
        return await body(client)


def test_a_thinking_reply_is_measured_against_the_servers_pacing(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=250.0, thinking_tokens=12, answer_tokens=30)
    sink, meter = Recorder(), TokenMeter()
    request = PromptRequest("qwen3:14b", "Why is decode memory-bound?", think=True)
    outcome = run(_with_client(fake.url, lambda c: stream_reply(c, request, sink=sink, meter=meter)))
    stats = outcome.stats
    assert outcome.ok and outcome.error is None
    assert (stats.thinking_tokens, stats.answer_tokens, stats.output_tokens) == (12, 30, 42)
    assert stats.decode_tokens_per_s == pytest.approx(250.0, rel=0.03)
    assert stats.done_reason == "stop" and stats.prompt_tokens and stats.prompt_tokens_per_s
    assert 0 < stats.ttft_ms < stats.first_answer_ms <= stats.wall_ms
    # 12 thinking tokens at 250 tokens/s come before the first answer token.
    assert stats.first_answer_ms - stats.ttft_ms >= 11 / 250 * 1e3 * 0.97
    assert outcome.thinking.startswith("Okay,") and outcome.content.startswith("Local")
    assert sink.done == [outcome] and len(sink.chunks) == 43
    assert meter.in_flight == 0 and meter.total_tokens == 42
    assert fake.requests[-1].json["think"] is True and fake.requests[-1].json["stream"] is True


def test_a_non_thinking_reply_with_options_and_history(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0, answer_tokens=30)
    request = PromptRequest("qwen3:14b", "And now?", think=False, system="Be brief.",
                            options=PromptOptions(num_predict=10, temperature=0.2, seed=7, num_ctx=8192),
                            history=({"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}))
    outcome = run(_with_client(fake.url, lambda c: stream_reply(c, request)))
    assert outcome.stats.thinking_tokens == 0 and outcome.stats.answer_tokens == 10
    assert outcome.stats.done_reason == "length"
    body = fake.requests[-1].json
    assert body["think"] is False
    assert body["options"] == {"num_predict": 10, "temperature": 0.2, "seed": 7, "num_ctx": 8192}
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "user"]


def test_think_is_left_out_when_not_set(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0)
    run(_with_client(fake.url, lambda c: stream_reply(c, PromptRequest("llama3.2:3b", "hi", think=None))))
    assert "think" not in fake.requests[-1].json and "options" not in fake.requests[-1].json


@pytest.mark.parametrize("model, think, error_type, text", [
    ("nope:1b", False, ModelNotFound, "model 'nope:1b' not found"),
    ("llama3.2:3b", True, BadRequest, '"llama3.2:3b" does not support thinking'),
])
def test_refusals_are_returned_with_ollamas_message(make_fake_ollama, model, think, error_type, text) -> None:
    fake = make_fake_ollama()
    sink, meter = Recorder(), TokenMeter()
    outcome = run(_with_client(fake.url, lambda c: stream_reply(c, PromptRequest(model, "hi", think=think),
                                                                sink=sink, meter=meter)))
    assert isinstance(outcome.error, error_type) and outcome.error.message == text
    assert not outcome.ok and sink.done == [outcome] and meter.in_flight == 0


def test_an_in_band_error_keeps_what_streamed_before_it(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0)
    fake.fail_next("midstream_error", path="/api/chat", after_chunks=5)
    outcome = run(_with_client(fake.url, lambda c: stream_reply(c, PromptRequest("qwen3:14b", "hi", think=False))))
    assert isinstance(outcome.error, StreamError)
    assert outcome.error.message == "an error was encountered while running the model: unexpected EOF"
    assert outcome.stats.answer_tokens == 5 and not outcome.stats.finished


def test_cancelling_stops_the_stream_at_once_and_reports_stopped(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=100.0, answer_tokens=500)  # 5 s if left alone
    sink, meter = Recorder(), TokenMeter()

    async def body(client):
        task = asyncio.ensure_future(stream_reply(client, PromptRequest("qwen3:14b", "long", think=False),
                                                  sink=sink, meter=meter))
        while not sink.first_chunk.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(_with_client(fake.url, body))
    [outcome] = sink.done
    assert outcome.stopped and outcome.error is None and not outcome.ok
    assert 1 <= outcome.stats.answer_tokens < 500
    assert meter.in_flight == 0
    record = fake.requests[-1]
    assert record.finished.wait(WAIT_S) and record.outcome == "client_gone"


def test_a_burst_queues_beyond_the_servers_slots(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=400.0, answer_tokens=40, num_parallel=2)  # 0.1 s per reply
    meter = TokenMeter()
    request = PromptRequest("qwen3:14b", "same prompt", think=False)
    outcomes = run(_with_client(fake.url, lambda c: run_burst(c, request, 6, meter=meter)))
    assert [o.index for o in outcomes] == list(range(6)) and all(o.ok for o in outcomes)
    summary = summarize_burst([o.stats for o in outcomes])
    assert summary.completed == 6 and summary.output_tokens == 240
    # Two slots: three waves of two; the last wave waited about two replies' time for its first token.
    assert summary.ttft_spread_ms >= 2 * 100 * 0.9
    assert summary.mean_decode_tokens_per_s == pytest.approx(400.0, rel=0.03)
    assert 1.2 < summary.speedup <= 2.1
    assert meter.in_flight == 0 and meter.total_tokens == 240


def test_burst_size_is_bounded() -> None:
    with pytest.raises(ValueError, match="1..32"):
        run(run_burst(None, PromptRequest("m", "p"), 33))


def test_ab_runs_both_modes_one_after_the_other(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=500.0, thinking_tokens=20, answer_tokens=25)
    sink = Recorder()
    with_thinking, without = run(_with_client(fake.url, lambda c: run_ab(c, PromptRequest("qwen3:14b", "2+2?",
                                                                                           think=False), sink=sink)))
    assert (with_thinking.index, without.index) == (0, 1)
    assert with_thinking.stats.thinking_tokens == 20 and without.stats.thinking_tokens == 0
    assert [r.json["think"] for r in fake.requests if r.path == "/api/chat"] == [True, False]
    cost = thinking_cost(with_thinking.stats, without.stats)
    assert cost.extra_tokens == 20
    assert cost.extra_first_answer_ms == pytest.approx(20 / 500 * 1e3, rel=0.5)
    assert [o.index for o in sink.done] == [0, 1]
