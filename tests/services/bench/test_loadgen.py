"""The load generator against the stand-in Ollama server (real sockets, real streams) and its streaming
transport with Ollama's error mapping against byte-exact replies; measured figures are checked against
the stand-in's known pacing."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from app.adapters.http.connection import HttpConnection
from app.adapters.http.streaming import HttpStreams
from app.backends.ollama.client import load_client
from app.services.bench.loadgen import LoadGenerator, error_kind_of
from app.backends.ollama.stream import StreamDropped, translated_errors
from app.core.bench.stats import summarize
from app.core.errors import ModelNotFound, ServerUnreachable, ServerTimeout, OutOfMemory, StreamError
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.throughput import TokenMeter
from tests.fakes.ollama.fake_ollama_infer import count_prompt_tokens
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.raw_http import Handler, chunk, read_request, serving

PROMPT = BenchPrompt("fixed", "x" * 200)  # 57 prompt tokens for the stand-in's tokenizer
PROMPT_TOKENS = count_prompt_tokens([PROMPT.text])
PACING = dict(tokens_per_s=200.0, prompt_tokens_per_s=1000.0, answer_tokens=20, thinking_tokens=0)


def plan(**kw) -> LoadPlan:
    values = dict(model="qwen3:0.6b", prompts=(PROMPT,), num_predict=None, think=False, requests=4)
    values.update(kw)
    return LoadPlan(**values)


def run(url: str, p: LoadPlan, **kw):
    async def go():
        async with LoadGenerator(url, load_client, **kw) as generator:
            return await generator.run(p)

    return asyncio.run(go())


# ---- measuring against known pacing ---------------------------------------------------------------------
# The stand-in writes token i no earlier than i / rate after its prompt time, so every figure the generator
# measures has a floor set by the pacing, whatever else the machine is doing; how close the figures come
# to the pacing on an idle machine is measured by benchmarks/bench_loadgen_pacing.py, not asserted here.
SLACK_S = 0.001  # the client's receive stamps and the server's clock are one monotonic clock, read apart


def test_measured_figures_never_beat_the_servers_pacing(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=2, **PACING)
    result = run(fake.url, plan(concurrency=2, requests=8))
    stats = summarize(result.records)
    assert stats.requests_ok == 8 and stats.output_tokens == 160
    assert all(r.prompt_tokens == PROMPT_TOKENS and r.done_reason == "stop" for r in result.records)
    assert all(r.output_chunks == 20 and len(r.itl_s) == 19 for r in result.records)
    prefill = PROMPT_TOKENS / 1000.0
    for r in result.records:
        # First token: the prompt, then one decode step; the whole reply: the prompt, then 20 steps.
        assert r.ttft_s >= prefill + 1 / 200.0 - SLACK_S
        assert r.e2e_s >= prefill + 20 / 200.0 - SLACK_S
        assert r.server_decode_tokens_per_s <= 200.0 * (1 + 1e-6)  # the server's own eval_count / eval_duration
        assert r.prompt_eval_s >= prefill - 1e-6
        assert r.sent_s <= r.first_token_s <= r.end_s
    # Two clients in lockstep: no more than two requests' tokens per paced request time.
    assert stats.output_tokens_per_s <= 2 * 20 / (prefill + 20 / 200.0) * (1 + 1e-3)
    assert stats.ttft_ms.mean == pytest.approx(1e3 * sum(r.ttft_s for r in result.records) / 8)
    assert stats.tpot_ms.p50 > 0 and stats.itl_ms.p50 > 0


def test_warm_up_requests_are_sent_but_not_counted(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=2, **PACING)
    result = run(fake.url, plan(concurrency=2, requests=3, warmup_requests=2))
    chats = [r for r in fake.requests if r.path == "/api/chat"]
    assert len(chats) == 5 and len(result.warmup) == 2 and len(result.records) == 3
    assert all(r.warmup for r in result.warmup) and not any(r.warmup for r in result.records)
    assert [r.index for r in result.records] == [0, 1, 2]
    seeds = [r.json["options"]["seed"] for r in chats]
    assert len(set(seeds)) == 5  # warm-up requests do not repeat the measured ones


def test_clients_beyond_parallel_queue_in_the_server_and_ttft_shows_it(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=1, **PACING)
    result = run(fake.url, plan(concurrency=3, requests=3, warmup_requests=1))  # loads the model first
    one = PROMPT_TOKENS / 1000.0 + 20 / 200.0  # one whole request
    first = PROMPT_TOKENS / 1000.0 + 1 / 200.0
    assert [r.ok for r in result.records] == [True] * 3
    # One slot: the k-th request served starts after k whole requests, so its first token cannot come sooner.
    sent = min(r.sent_s for r in result.records)
    firsts = sorted(r.first_token_s for r in result.records)
    for k, at in enumerate(firsts):
        assert at - sent >= k * one + first - SLACK_S
    assert max(r.ttft_s for r in result.records) >= 2 * one + first - (max(r.sent_s for r in result.records) - sent) \
        - SLACK_S
    assert max(r.end_s for r in result.records) - sent >= 3 * one - SLACK_S


def test_thinking_tokens_count_and_the_first_answer_token_comes_after_them(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=1, tokens_per_s=500.0, prompt_tokens_per_s=5000.0, answer_tokens=5,
                            thinking_tokens=10)
    result = run(fake.url, plan(model="qwen3:14b", think=True, requests=2, warmup_requests=0))
    prefill = count_prompt_tokens([PROMPT.text]) / 5000.0
    for r in result.records:
        assert r.output_tokens == 15 and r.output_chunks == 15
        # The first answer token is the 11th: after the prompt and 11 paced steps, and after the first token.
        assert r.first_answer_s - r.sent_s >= prefill + 11 / 500.0 - SLACK_S
        assert r.first_token_s < r.first_answer_s <= r.end_s
    assert all(r.json["think"] is True for r in fake.requests if r.path == "/api/chat")


def test_num_predict_caps_the_output(make_fake_ollama):
    fake = make_fake_ollama(**PACING)
    result = run(fake.url, plan(num_predict=7, requests=2))
    assert [r.output_tokens for r in result.records] == [7, 7]
    assert {r.done_reason for r in result.records} == {"length"}


def test_duration_stop_rule_lets_requests_in_flight_finish(make_fake_ollama):
    """The time is up when the third request ends (the clock is moved past the duration then): the client
    that ended it sends no more, and the other one's request in flight finishes and counts: four in all."""
    fake = make_fake_ollama(num_parallel=2, tokens_per_s=1000.0, prompt_tokens_per_s=100000.0, answer_tokens=10)
    shift = 0.0
    clock = lambda: time.monotonic() + shift  # noqa: E731
    # A step well under the connections' read timeout (300 s), which reads the same clock.
    p = plan(concurrency=2, requests=None, duration_s=30.0, warmup_requests=0)

    def ended(record) -> None:
        nonlocal shift
        if len(done) == 2:
            shift = p.duration_s + 1.0  # the duration has passed
        done.append(record)

    async def go():
        async with LoadGenerator(fake.url, load_client, clock=clock) as generator:
            return await generator.run(p, on_request=ended)

    done: list = []
    result = asyncio.run(go())
    assert result.stop_rule == "duration"
    assert len(result.records) == 4 and all(r.ok and r.output_tokens == 10 for r in result.records)
    assert len([r for r in fake.requests if r.path == "/api/chat"]) == 4  # nothing went out after the time was up


def test_open_loop_arrivals_are_poisson_seeded_and_the_cap_queues_on_the_client(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=4, tokens_per_s=1000.0, prompt_tokens_per_s=100000.0, answer_tokens=20)
    p = plan(mode="open", rate_rps=200.0, concurrency=1, requests=6, warmup_requests=0, seed=7)
    first, second = run(fake.url, p), run(fake.url, p)
    arrivals = [r.scheduled_s for r in first.records]
    assert arrivals == pytest.approx([r.scheduled_s for r in second.records], abs=1e-9)  # same seed, same arrivals
    assert arrivals[0] == 0.0 and arrivals == sorted(arrivals)
    # One in flight at a time, ~20 ms each, arrivals every ~5 ms: later ones wait on the client, and it counts.
    assert first.records[-1].queue_s > 0.02
    assert first.records[-1].ttft_s >= first.records[-1].queue_s


def test_a_requests_clock_starts_when_it_went_out_and_an_arrivals_when_it_was_due(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=2, **PACING)
    closed = run(fake.url, plan(concurrency=2, requests=4, warmup_requests=0))
    # Closed loop, fresh connections: connecting is not the server's time, so the clock starts at the send.
    assert all(r.scheduled_s == r.sent_s < r.first_token_s for r in closed.records)
    p = plan(mode="open", rate_rps=200.0, concurrency=1, requests=4, warmup_requests=0, seed=7)
    opened = run(fake.url, p)
    assert all(r.scheduled_s <= r.sent_s < r.first_token_s for r in opened.records)


def test_the_token_meter_sees_every_token_and_every_request_ends(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=2, **PACING)
    meter = TokenMeter()
    result = run(fake.url, plan(concurrency=2, requests=2, warmup_requests=0), meter=meter)
    assert meter.total_tokens == sum(r.output_chunks for r in result.records) == 40
    assert meter.in_flight == 0


# ---- failures are outcomes, not crashes ------------------------------------------------------------------


@pytest.mark.parametrize("kind, after, expected", [
    ("oom", 0, "oom"), ("queue_full", 0, "queue_full"), ("server_error", 0, "server"),
    ("midstream_error", 3, "server"), ("drop", 3, "dropped"), ("malformed", 0, "malformed"),
])
def test_each_failure_is_recorded_with_its_kind_and_the_rest_carry_on(make_fake_ollama, kind, after, expected):
    fake = make_fake_ollama(num_parallel=1, tokens_per_s=2000.0, prompt_tokens_per_s=100000.0, answer_tokens=10)
    fake.fail_next(kind, path="/api/chat", after_chunks=after)
    result = run(fake.url, plan(requests=3, warmup_requests=0))
    failed = [r for r in result.records if not r.ok]
    assert len(failed) == 1 and failed[0].error_kind == expected and failed[0].error
    assert sum(r.ok for r in result.records) == 2


def test_an_unknown_model_and_a_missing_server_are_recorded(make_fake_ollama):
    fake = make_fake_ollama()
    result = run(fake.url, plan(model="nope:1b", requests=1, warmup_requests=0))
    assert result.records[0].error_kind == "not_found" and "not found" in result.records[0].error
    result = run(f"http://127.0.0.1:{free_port()}", plan(requests=1, warmup_requests=0))
    assert result.records[0].error_kind == "connect"


def test_cancelling_stops_every_stream_at_once(make_fake_ollama):
    fake = make_fake_ollama(num_parallel=2, tokens_per_s=20.0, answer_tokens=1000)
    meter = TokenMeter()

    async def go():
        generator = LoadGenerator(fake.url, load_client, meter=meter)
        task = asyncio.ensure_future(generator.run(plan(concurrency=2, requests=4, warmup_requests=0)))
        while meter.total_tokens < 4:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await generator.aclose()

    asyncio.run(go())
    assert meter.in_flight == 0
    chats = [r for r in fake.requests if r.path == "/api/chat"]
    for r in chats:
        assert r.finished.wait(5)
    assert {r.outcome for r in chats} == {"client_gone"}


def test_error_kinds():
    assert error_kind_of(OutOfMemory("x")) == "oom"
    assert error_kind_of(TimeoutError()) == "timeout"
    assert error_kind_of(ModelNotFound("x")) == "not_found"
    assert error_kind_of(ValueError("x")) == "other"


# ---- the HTTP client, byte for byte ----------------------------------------------------------------------

def replying(chunks: list[bytes], close: bool = False) -> Handler:
    """A server that reads one request and writes `chunks` one by one, each as its own TCP write."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for piece in chunks:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.001)  # separate writes on the wire (server side of the test)
        if close:
            writer.close()
        else:
            await reader.read()

    return handle


def chunked(*lines: bytes) -> bytes:
    return b"".join(chunk(line) for line in lines) + b"0\r\nX-Trailer: 1\r\n\r\n"


async def collect(url: str, read_timeout_s: float = 5.0) -> list[bytes]:
    """The body lines of one request, failures mapped to Ollama's errors as the load generator sees them."""
    lines: list[bytes] = []
    with translated_errors(url, 3.0, read_timeout_s):
        async with HttpStreams(url, read_timeout_s=read_timeout_s) as http:
            await http.request("POST", "/api/chat", b"{}", lambda line, _t: lines.append(line))
    return lines


def test_lines_are_rebuilt_across_any_split_of_the_chunked_body():
    body = chunked(b'{"a":1}\n', b'{"b":', b'2}\n{"c":3}\n', b'{"d":4}')
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n" + body
    pieces = [reply[i:i + 1] for i in range(len(reply))]  # one byte per write

    async def go():
        async with serving(replying(pieces)) as url:
            return await collect(url)

    assert asyncio.run(go()) == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']


def test_an_error_reply_keeps_ollamas_text_and_type():
    body = b'{"error":"llama runner process has terminated: cudaMalloc failed: out of memory"}'
    reply = b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body), body)

    async def go():
        async with serving(replying([reply])) as url:
            await collect(url)

    with pytest.raises(OutOfMemory, match="cudaMalloc failed"):
        asyncio.run(go())


def test_an_in_band_error_line_raises_from_the_line_handler():
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             + chunked(b'{"model":"m","message":{"role":"assistant","content":"a"},"done":false}\n',
                       b'{"error":"an error was encountered while running the model"}\n'))

    async def go():
        async with serving(replying([reply])) as url:
            async with LoadGenerator(url, load_client) as generator:
                return await generator.run(plan(requests=1, warmup_requests=0))

    record = asyncio.run(go()).records[0]
    assert record.error_kind == "server" and "encountered" in record.error and record.output_chunks == 1


def test_a_reply_cut_short_is_dropped_and_silence_times_out():
    half = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b'8\r\n{"a":1}\n\r\n'

    async def cut():
        async with serving(replying([half], close=True)) as url:
            await collect(url)

    with pytest.raises(StreamDropped, match="before the reply was complete"):
        asyncio.run(cut())

    async def silent():
        async with serving(replying([half])) as url:
            await collect(url, read_timeout_s=0.2)

    with pytest.raises(ServerTimeout, match="sent nothing for 0.2 s"):
        asyncio.run(silent())


def test_keep_alive_connections_are_reused():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n" + b'{"a":1}\n'
    accepted = []

    async def handle(reader, writer):
        accepted.append(writer)
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(reply)

    async def go():
        async with serving(handle) as url:
            pool = HttpStreams(url)
            for _ in range(3):
                await pool.request("POST", "/api/chat", b"{}", lambda _l, _t: None)
            pool.close()

    asyncio.run(go())
    assert len(accepted) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel receive stamps are a Linux feature")
def test_on_linux_lines_carry_the_kernels_arrival_time():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n" + b'{"a":1}\n'
    stamps: list[float] = []

    async def go():
        async with serving(replying([reply])) as url:
            conn = await HttpConnection.open(url)
            assert conn.kernel_stamps
            answer = await conn.send("POST", "/api/chat", b"{}", lambda _line, t: stamps.append(t))
            await answer.done
            conn.close()
            return time.monotonic()

    after = asyncio.run(go())
    assert len(stamps) == 1 and after - 1.0 < stamps[0] <= after


def test_unusable_urls_are_refused_up_front():
    with pytest.raises(ServerUnreachable, match="plain http"):
        LoadGenerator("https://example.com", load_client)


def test_a_stream_error_is_a_stream_error():
    assert issubclass(StreamDropped, StreamError)
