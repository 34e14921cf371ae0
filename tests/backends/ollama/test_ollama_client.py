"""OllamaClient against the stand-in server over real sockets, plus MockTransport edge cases."""

from __future__ import annotations

import functools
import asyncio
import json
import socket
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Awaitable, Callable

import httpx
import pytest

from app.backends.ollama.client import OllamaClient, StreamDropped
from app.core.errors import (BadRequest, MalformedResponse, ModelNotFound, ReplyUnfinished, ServerUnreachable,
                             ServerTimeout, OutOfMemory, QueueFull, ServerFault, StreamError, StreamOutOfMemory)
from app.backends.ollama.wire import parse_chat_line, parse_ps, parse_show
from app.core.models import RunningModel
from app.core.replies import StreamChunk
from tests.fakes.ollama.fake_ollama import QUEUE_FULL_MESSAGE, FakeOllama
from app.core.units import GIB
from tests.fakes.raw_http import read_request, serving
from tests.fakes.ollama.recorded import real_version
from tests.bounded import run_within

DATA = Path(__file__).parent.parent.parent / "data" / "ollama"
QUICK = {"tokens_per_s": 5000.0, "prompt_tokens_per_s": 1e6}
HI = [{"role": "user", "content": "hi"}]
T = TypeVar("T")


run = functools.partial(run_within, timeout=15.0)  # one coroutine to its end, within the time limit


async def collect(stream) -> list[Any]:
    return [item async for item in stream]


def with_client(url: str, body: Callable[[OllamaClient], Awaitable[T]], **kw: Any) -> T:
    async def go() -> T:
        async with OllamaClient(url, **kw) as client:
            return await body(client)
    return run(go)


@pytest.fixture
def quick(make_fake_ollama) -> FakeOllama:
    return make_fake_ollama(**QUICK)


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> OllamaClient:
    return OllamaClient("http://ollama.test", transport=httpx.MockTransport(handler))


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- every endpoint against the fake -----------------------------------------------------------
def test_probe_version_tags_show(quick: FakeOllama) -> None:
    async def body(c: OllamaClient):
        return await c.root_text(), await c.is_ollama(), await c.version(), await c.tags(), await c.show("qwen3:14b")
    text, is_ollama, version, tags, details = with_client(quick.url, body)
    assert (text, is_ollama, version) == ("Ollama is running", True, real_version())
    assert [m.name for m in tags] == ["qwen3:14b", "qwen3:0.6b", "llama3.2:3b", "gemma3:4b"]
    assert (tags[0].size_bytes, tags[0].parameter_size, tags[0].quantization_level) == (9_276_198_565, "14.8B", "Q4_K_M")
    assert details.supports_thinking and details.arch_value("attention.head_count_kv") == 8
    assert details.parameter("temperature") == "0.6" and details.tensors


def test_chat_thinking_stream_then_content_and_final(quick: FakeOllama) -> None:
    chunks: list[StreamChunk] = with_client(quick.url, lambda c: collect(c.chat("qwen3:14b", HI)))
    thinking = [c for c in chunks if c.thinking]
    content = [c for c in chunks if c.content]
    assert (len(thinking), len(content)) == (20, 30)
    assert chunks.index(content[0]) == 20 and chunks[-1].done and not any(c.done for c in chunks[:-1])
    final = chunks[-1].final
    assert final is not None and final.done_reason == "stop" and final.output_tokens == 50
    assert final.prompt_tokens and final.prompt_tokens_per_s
    times = [c.t_monotonic for c in chunks]
    assert times == sorted(times)


def test_non_thinking_model_and_think_false(quick: FakeOllama) -> None:
    async def body(c: OllamaClient):
        return (await collect(c.chat("llama3.2:3b", HI)),
                await collect(c.generate("qwen3:14b", "hi", system="be brief", think=False)))
    llama, qwen = with_client(quick.url, body)
    for chunks in (llama, qwen):
        assert not any(c.thinking for c in chunks) and sum(1 for c in chunks if c.content) == 30
        assert chunks[-1].final.output_tokens == 30


def test_load_ps_unload_delete(quick: FakeOllama) -> None:
    async def body(c: OllamaClient):
        stats = await c.load("qwen3:14b", keep_alive="10m")
        running = await c.ps()
        await c.unload("qwen3:14b")
        after = await c.ps()
        await c.delete("gemma3:4b")
        return stats, running, after, [m.name for m in await c.tags()]
    stats, running, after, names = with_client(quick.url, body)
    assert stats.done_reason == "load" and stats.decode_tokens_per_s is None
    assert running[0].name == "qwen3:14b" and running[0].processor == "100% GPU" and running[0].context_length == 4096
    assert after == [] and "gemma3:4b" not in names


def test_partial_offload_processor_string(make_fake_ollama) -> None:
    fake = make_fake_ollama(gpu_memory_bytes=5 * GIB, **QUICK)
    running = with_client(fake.url, lambda c: c.load("qwen3:14b")) and with_client(fake.url, lambda c: c.ps())
    model = running[0]
    cpu = round((model.size_bytes - model.size_vram_bytes) / model.size_bytes * 100)
    assert model.processor == f"{cpu}%/{100 - cpu}% CPU/GPU"


@pytest.mark.parametrize(("size", "vram", "shown"), [
    (100, 100, "100% GPU"), (100, 0, "100% CPU"), (100, 52, "48%/52% CPU/GPU"),
    (1000, 995, "1%/99% CPU/GPU"), (200, 101, "50%/50% CPU/GPU"), (100, 150, "Unknown"),
])
def test_processor_matches_ollama_ps(size: int, vram: int, shown: str) -> None:
    assert RunningModel("m", "m", size, vram).processor == shown


def test_pull_progress_and_create(quick: FakeOllama) -> None:
    async def body(c: OllamaClient):
        progress = await collect(c.pull("qwen3:8b"))
        statuses = await collect(c.create("qwen3-14b-16k", "qwen3:14b", parameters={"num_ctx": 16384},
                                          system="You are terse."))
        return progress, statuses, await c.show("qwen3-14b-16k")
    progress, statuses, created = with_client(quick.url, body)
    assert progress[0].status == "pulling manifest" and progress[-1].status == "success"
    assert progress[1].total and progress[1].completed is None and progress[1].fraction == 0
    assert any(p.fraction == 1.0 for p in progress)
    assert statuses[-1] == "success" and "writing manifest" in statuses
    assert created.parameter("num_ctx") == "16384"


def test_pull_of_unknown_name_is_model_not_found(quick: FakeOllama) -> None:
    with pytest.raises(ModelNotFound, match="pull model manifest: file does not exist"):
        with_client(quick.url, lambda c: collect(c.pull("qwen3:99b")))


# ---- error mapping ------------------------------------------------------------------------------
def chat_error(fake: FakeOllama, model: str = "qwen3:14b", **kw: Any) -> tuple[BaseException, list[StreamChunk]]:
    got: list[StreamChunk] = []

    async def body(c: OllamaClient):
        try:
            async for chunk in c.chat(model, HI, **kw):
                got.append(chunk)
        except Exception as exc:  # noqa: BLE001 - returned for inspection
            return exc
        raise AssertionError("no error raised")
    return with_client(fake.url, body), got


def test_http_errors_keep_ollama_text(quick: FakeOllama) -> None:
    exc, _ = chat_error(quick, "nope:1b")
    assert isinstance(exc, ModelNotFound) and exc.message == "model 'nope:1b' not found"
    exc, _ = chat_error(quick, "llama3.2:3b", think=True)
    assert isinstance(exc, BadRequest) and exc.message == '"llama3.2:3b" does not support thinking'
    quick.fail_next("oom")
    exc, _ = chat_error(quick)
    assert isinstance(exc, OutOfMemory) and exc.status == 500 and "out of memory" in exc.message
    quick.fail_next("server_error")
    exc, _ = chat_error(quick)
    assert type(exc) is ServerFault and exc.message == "llama runner process has terminated: exit status 2"
    quick.fail_next("queue_full")
    exc, _ = chat_error(quick)
    assert isinstance(exc, QueueFull) and exc.message == QUEUE_FULL_MESSAGE
    with pytest.raises(ModelNotFound):
        with_client(quick.url, lambda c: c.show("nope:1b"))
    with pytest.raises(ModelNotFound):
        with_client(quick.url, lambda c: c.delete("nope:1b"))


def test_in_band_errors_after_chunks(quick: FakeOllama) -> None:
    quick.fail_next("midstream_error", after_chunks=5)
    exc, got = chat_error(quick)
    assert type(exc) is StreamError and len(got) == 5 and "unexpected EOF" in exc.message
    quick.fail_next("midstream_error", after_chunks=2, message="CUDA error: out of memory")
    exc, got = chat_error(quick)
    assert isinstance(exc, StreamOutOfMemory) and isinstance(exc, OutOfMemory) and len(got) == 2


def test_dropped_connection_and_malformed_line(quick: FakeOllama) -> None:
    quick.fail_next("drop", after_chunks=3)
    exc, got = chat_error(quick)
    assert isinstance(exc, StreamDropped) and isinstance(exc, StreamError) and len(got) == 3
    assert quick.url in exc.message
    quick.fail_next("malformed", after_chunks=1)
    exc, got = chat_error(quick)
    assert isinstance(exc, MalformedResponse) and "<html>" in exc.message and len(got) == 1
    quick.fail_next("malformed", path="/api/tags")
    with pytest.raises(MalformedResponse):
        with_client(quick.url, lambda c: c.tags())


def test_connection_refused_names_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(ServerUnreachable, match=url.replace(".", r"\.")):
        with_client(url, lambda c: c.version())
    assert with_client(url, lambda c: c.is_ollama()) is False


def test_read_timeout_with_a_slow_server(make_fake_ollama) -> None:
    fake = make_fake_ollama(load_s=3.0)
    with pytest.raises(ServerTimeout):
        with_client(fake.url, lambda c: collect(c.chat("qwen3:14b", HI)), read_timeout_s=0.2)
    record = fake.requests[-1]
    assert record.finished.wait(5) and record.outcome == "client_gone"


# ---- cancellation and pacing ----------------------------------------------------------------------
def test_cancel_mid_stream_closes_the_response(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=50.0, answer_tokens=1000, thinking_tokens=0)

    async def body(c: OllamaClient) -> int:
        first = asyncio.Event()
        seen: list[StreamChunk] = []

        async def consume() -> None:
            async for chunk in c.chat("qwen3:0.6b", HI):
                seen.append(chunk)
                first.set()
        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return len(seen)
    assert with_client(fake.url, body) < 10
    record = fake.requests[-1]
    assert record.finished.wait(5) and record.outcome == "client_gone"


def test_breaking_out_with_aclosing_closes_the_response(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=50.0, answer_tokens=1000, thinking_tokens=0)

    async def body(c: OllamaClient) -> None:
        async with aclosing(c.generate("qwen3:0.6b", "hi")) as stream:
            async for _ in stream:
                break
    with_client(fake.url, body)
    assert fake.requests[-1].finished.wait(5) and fake.requests[-1].outcome == "client_gone"


def test_cancelled_pull_stops_and_keeps_no_model(make_fake_ollama) -> None:
    fake = make_fake_ollama(pull_s=30.0)

    async def body(c: OllamaClient) -> None:
        first = asyncio.Event()

        async def consume() -> None:
            async for _ in c.pull("qwen3:8b"):
                first.set()
        task = asyncio.create_task(consume())
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    with_client(fake.url, body)
    assert fake.requests[-1].finished.wait(5) and fake.requests[-1].outcome == "client_gone"
    assert "qwen3:8b" not in fake.models


def test_decode_rate_matches_configuration(make_fake_ollama) -> None:
    rate = 500.0
    fake = make_fake_ollama(tokens_per_s=rate, answer_tokens=300, thinking_tokens=0)
    chunks = with_client(fake.url, lambda c: collect(c.chat("qwen3:0.6b", HI)))
    tokens = [c for c in chunks if c.content]
    measured = (len(tokens) - 1) / (tokens[-1].t_monotonic - tokens[0].t_monotonic)
    assert measured == pytest.approx(rate, rel=0.03)
    assert chunks[-1].final.decode_tokens_per_s == pytest.approx(rate, rel=0.03)


# ---- MockTransport cases ----------------------------------------------------------------------------
def test_non_json_error_body_is_malformed() -> None:
    client = mock_client(lambda r: httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(MalformedResponse, match="HTTP 502") as info:
        run(lambda: client.version())
    assert info.value.status == 502


def test_missing_or_mistyped_fields_are_malformed() -> None:
    replies = {"/api/version": {"version": 12}, "/api/tags": {"models": [{"name": "x"}]},
               "/api/ps": {"models": [{"name": "x", "size": "big", "size_vram": 0}]}}
    client = mock_client(lambda r: httpx.Response(200, json=replies[r.url.path]))
    for call in (client.version, client.tags, client.ps):
        with pytest.raises(MalformedResponse):
            run(call)


def canned_reply(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def with_canned_server(reply: bytes, body: Callable[[OllamaClient], Awaitable[T]],
                       seen: list[dict[str, Any]] | None = None) -> T:
    """Run body against a real socket server that answers every request with `reply` (recording bodies)."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                _head, request = await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            if seen is not None:
                seen.append(json.loads(request))
            writer.write(reply)

    async def go() -> T:
        async with serving(handle) as url, OllamaClient(url) as client:
            return await body(client)
    return run(go)


def test_a_whole_reply_without_its_final_record_is_unfinished_not_dropped() -> None:
    line = json.dumps({"model": "m", "message": {"role": "assistant", "content": "a"}, "done": False})
    with pytest.raises(ReplyUnfinished, match="without its final record"):
        with_canned_server(canned_reply((line + "\n").encode()), lambda c: collect(c.chat("m", HI)))


def test_connect_timeout_maps_to_ollama_timeout() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectTimeout("timed out", request=request)
    with pytest.raises(ServerTimeout, match="timed out after 3 s"):
        run(lambda: mock_client(refuse).version())
    assert run(lambda: mock_client(refuse).is_ollama()) is False


def test_not_ollama_banner_and_request_bodies() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="Welcome to nginx!")
    client = mock_client(handler)
    assert run(client.is_ollama) is False
    final = json.dumps({"model": "m", "done": True, "done_reason": "stop", "message": {"content": ""}}).encode()
    with_canned_server(canned_reply(final + b"\n"), lambda c: collect(
        c.chat("m", HI, think="low", options={"num_ctx": 8192}, keep_alive="1m")), seen)
    assert seen[0] == {"model": "m", "messages": HI, "think": "low", "options": {"num_ctx": 8192},
                       "keep_alive": "1m", "stream": True}


def test_reference_transcripts_parse() -> None:
    details = parse_show(json.loads((DATA / "qwen3_14b_show.json").read_text()))
    assert details.architecture == "qwen3" and details.arch_value("block_count") == 40
    assert details.model_info["qwen3.context_length"] == 40960 and details.supports_thinking
    lines = (DATA / "qwen3_14b_chat_think.ndjson").read_text().splitlines()
    chunks = [parse_chat_line(json.loads(line), float(i)) for i, line in enumerate(lines)]
    assert "".join(c.thinking for c in chunks) == "Okay, the user asks hi."
    assert chunks[-1].final.output_tokens == 14 and chunks[-1].final.decode_tokens_per_s == pytest.approx(63.03, rel=1e-3)
    running = parse_ps(json.loads((DATA / "ps_partial_offload.json").read_text()))
    assert running[0].processor == "48%/52% CPU/GPU"


def test_a_reply_that_is_not_ollamas_says_so_in_ollamas_name() -> None:
    ollama_hint = "The server sent something that is not Ollama's API; check that host:port is Ollama."
    for bad in ([], {"model_info": {}, "capabilities": "thinking"}, {"models": [{"name": 1}]}):
        with pytest.raises(MalformedResponse) as caught:
            parse_show(bad) if "models" not in bad else parse_ps(bad)
        assert caught.value.hint == ollama_hint
    assert "Ollama" not in MalformedResponse("garbled").hint  # the shared type names no server
