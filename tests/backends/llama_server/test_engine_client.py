"""End-to-end: the llama-server client, catalog and GGUF reader on the real llama-server with the
bundled SmolLM2 model. What is asserted is what the engine guarantees (counts, the server's own
timings), never speed: the machines are noisy."""

from __future__ import annotations

import functools
import json
import re
import socket
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.adapters.gguf_file import GgufNotFound, GgufTruncated, NotGguf, read_gguf
from app.backends.llama_server.client import LlamaServerClient, load_client
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.errors import BadRequest, StreamDropped
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate
from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.core.memory.model_fit import fit_verdict
from app.core.model_shape import tensor_bytes
from app.core.ports.inference import ChatRequestStreaming
from app.core.replies import ChatRequest, StreamChunk
from app.core.server.settings import ServerSettings
from app.core.units import GIB
from app.services.bench.loadgen import LoadGenerator
from app.services.prompts import PromptOptions, PromptRequest, stream_reply
from tests.backends.llama_server.engine_child import llama_server
from tests.fakes.llama_server.replay import DATA
from tests.bounded import run_within

pytestmark = pytest.mark.engine
PROMPT = [{"role": "user", "content": "Write two sentences about the sea."}]


run = functools.partial(run_within, timeout=400.0)  # one coroutine to its end, within the time limit


@pytest.fixture(scope="module")
def server(llama_server_binary: Path, bundled_model: Path) -> Iterator[str]:
    """One llama-server for this module: 2 slots of 1024 tokens, metrics and slots on."""
    with llama_server(llama_server_binary, bundled_model, "-c", "2048", "-np", "2", "--metrics", "--slots") as (url, _):
        yield url


def metric(url: str, name: str) -> float:
    """One counter of llama-server's /metrics (Prometheus text)."""
    text = httpx.get(f"{url}/metrics", timeout=10, trust_env=False).text
    found = re.search(rf"^llamacpp:{name} ([0-9.e+]+)$", text, re.MULTILINE)
    assert found, f"/metrics has no llamacpp:{name}"
    return float(found.group(1))


def test_a_streamed_prompts_figures_are_the_servers_own_timings(server: str, bundled_model: Path) -> None:
    async def go() -> tuple[Any, list[StreamChunk]]:
        chunks: list[StreamChunk] = []

        class Sink:
            def on_chunk(self, index: int, chunk: StreamChunk) -> None:
                chunks.append(chunk)

            def on_done(self, outcome: Any) -> None:
                pass

        async with LlamaServerClient(server) as client:
            models = await client.tags()
            request = PromptRequest(model=models[0].name, prompt=PROMPT[0]["content"], think=False,
                                    options=PromptOptions(num_predict=24, seed=11, temperature=0.0))
            return await stream_reply(client, request, sink=Sink()), chunks

    outcome, chunks = run(go)
    assert outcome.ok, outcome.error
    timings = chunks[-1].raw["timings"]
    stats = outcome.stats
    assert stats.output_tokens == timings["predicted_n"] and stats.prompt_tokens == timings["prompt_n"]
    assert stats.decode_tokens_per_s == pytest.approx(timings["predicted_per_second"], rel=0.02)
    assert stats.prompt_tokens_per_s == pytest.approx(timings["prompt_per_second"], rel=0.02)
    assert stats.total_ms == pytest.approx(timings["prompt_ms"] + timings["predicted_ms"])
    # Every generated token but an end-of-turn one arrived as its own event.
    assert stats.answer_tokens == timings["predicted_n"] - (stats.done_reason == "stop")
    assert stats.ttft_ms is not None and 0 < stats.ttft_ms <= stats.wall_ms
    print(f"\nreply: {stats}\nserver timings: {timings}")


def test_the_load_generator_runs_on_the_real_server_with_its_counts(server: str) -> None:
    finals: list[dict[str, Any]] = []

    def recording_client(url: str, **kwargs: Any) -> ChatRequestStreaming:
        """The real load client; each reply's final event is kept to compare with the records."""
        inner = load_client(url, **kwargs)

        class Recording:
            async def stream_chat(self, request: ChatRequest, on_chunk: Callable[[StreamChunk], None]) -> None:
                def keep(chunk: StreamChunk) -> None:
                    if chunk.done:
                        finals.append(dict(chunk.raw["timings"]))
                    on_chunk(chunk)
                await inner.stream_chat(request, keep)

            async def aclose(self) -> None:
                await inner.aclose()

        return Recording()

    plan = LoadPlan(model="smollm2", prompts=(BenchPrompt("sea", "Name a fish."), BenchPrompt("sky", "Name a bird.")),
                    concurrency=2, requests=4, warmup_requests=0, num_predict=8)
    before = metric(server, "tokens_predicted_total")

    async def go() -> Any:
        async with LoadGenerator(server, recording_client, read_timeout_s=300) as generator:
            return await generator.run(plan)

    result = run(go)
    after = metric(server, "tokens_predicted_total")
    records = result.records
    assert len(records) == 4 and all(r.ok for r in records), [r.error for r in records]
    assert sorted(r.output_tokens for r in records) == sorted(t["predicted_n"] for t in finals)
    assert sorted(r.prompt_tokens or 0 for r in records) == sorted(t["prompt_n"] for t in finals)
    assert all(r.output_tokens <= 8 and r.first_token_s is not None for r in records)
    assert after - before == sum(r.output_tokens for r in records)  # the server's own counter agrees


def test_a_prompt_longer_than_a_slot_is_refused_with_both_sizes(server: str) -> None:
    async def go() -> None:
        async with LlamaServerClient(server) as client:
            async for _ in client.chat("m", [{"role": "user", "content": "word " * 1500}]):
                pass

    with pytest.raises(BadRequest, match="exceeds the available context size") as caught:
        run(go)
    assert "1024" in caught.value.hint


def test_the_catalog_lists_the_served_model_and_reads_its_header(server: str, bundled_model: Path,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "other-Q8_0.gguf").write_bytes(b"GGUF")

    async def go() -> Any:
        async with LlamaServerClient(server, models_dir=tmp_path) as client:
            models = await client.tags()
            return models, await client.show(models[0].name, verbose=True), await client.thinking_support(models[0].name)

    models, details, (thinks, why) = run(go)
    assert [m.name for m in models][1:] == ["other-Q8_0.gguf"] and models[0].model == str(bundled_model)
    assert models[0].size_bytes == bundled_model.stat().st_size and models[0].quantization_level == "Q4_1"
    assert details.architecture == "llama" and details.arch_value("block_count") == 30
    assert not thinks and not details.supports_thinking and "enable_thinking" in why


def test_the_bound_spec_lists_the_models_folder_of_the_settings_in_force(server: str, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    (first / "qwen3-14b-Q4_K_M.gguf").write_bytes(b"GGUF")
    (second / "gemma3-12b-Q8_0.gguf").write_bytes(b"GGUF")
    current = [ServerSettings().with_options(models_dir=str(first))]
    spec = LLAMA_SERVER.bound(lambda: current[0])

    async def names() -> list[str]:
        async with spec.catalog(server) as client:
            return [m.name for m in await client.tags()][1:]

    assert run(names) == ["qwen3-14b-Q4_K_M.gguf"]
    current[0] = current[0].with_options(models_dir=str(second))  # the user picked another folder
    assert run(names) == ["gemma3-12b-Q8_0.gguf"]
    current[0] = current[0].with_options(models_dir=None)
    assert run(names) == []
    assert LLAMA_SERVER.bound(lambda: current[0]).load_client is LLAMA_SERVER.load_client


def test_the_gguf_reader_on_the_bundled_model_agrees_with_the_server(server: str, bundled_model: Path) -> None:
    info = read_gguf(bundled_model)
    m = info.model_info
    assert m["general.architecture"] == "llama"
    assert (m["llama.block_count"], m["llama.embedding_length"], m["llama.feed_forward_length"],
            m["llama.attention.head_count"], m["llama.attention.head_count_kv"], m["llama.context_length"],
            m["llama.vocab_size"]) == (30, 576, 1536, 9, 3, 8192, 49152)
    assert info.quantization == "Q4_1" and len(info.tensors) == 272
    meta = httpx.get(f"{server}/v1/models", timeout=10, trust_env=False).json()["data"][0]["meta"]
    assert m["general.parameter_count"] == meta["n_params"]
    assert sum(tensor_bytes(t["type"], t["shape"]) for t in info.tensors) == meta["size"]
    assert meta["n_ctx_train"] == m["llama.context_length"] and meta["n_embd"] == m["llama.embedding_length"]


def test_the_estimator_prices_the_real_gguf(bundled_model: Path) -> None:
    info = read_gguf(bundled_model)
    shape = info.facts().shape()
    assert shape.weights.from_tensors and shape.n_layer == 30 and shape.n_vocab == 49152 and shape.tied_embeddings
    est = estimate(shape, LoadSettings(num_ctx=1024, parallel=2), GpuMemory(total_bytes=24 * GIB))
    assert est.kv_bytes == 30 * 2048 * 3 * (64 + 64) * 2 and est.verdict == "fits"  # f16, head_dim 576/9
    verdict = fit_verdict(info.facts(), info.size_bytes, ServerSettings(), None, GpuMemory(total_bytes=24 * GIB),
                          planner=LLAMA_SERVER_PLANNER)
    assert verdict.verdict == "fits" and verdict.estimate is not None


def test_broken_copies_of_the_real_model_each_say_what_is_wrong(bundled_model: Path, tmp_path: Path) -> None:
    whole = bundled_model.read_bytes()
    for cut in (3, 1000, 2_000_000, len(whole) - 1):
        path = tmp_path / f"cut-{cut}.gguf"
        path.write_bytes(whole[:cut])
        with pytest.raises(GgufTruncated, match=re.escape(str(path))):
            read_gguf(path)
        path.unlink()
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(whole[4096:8192])
    with pytest.raises(NotGguf, match=re.escape(str(garbage))):
        read_gguf(garbage)
    with pytest.raises(GgufNotFound, match="missing.gguf"):
        read_gguf(tmp_path / "missing.gguf")


def test_thinking_on_and_off_on_a_template_that_takes_enable_thinking(llama_server_binary: Path,
                                                                      bundled_model: Path, tmp_path: Path) -> None:
    template = tmp_path / "thinking.jinja"
    shutil.copy(DATA / "thinking_template.jinja", template)

    async def go(url: str) -> tuple[bool, list[StreamChunk], list[StreamChunk]]:
        async with LlamaServerClient(url) as client:
            name = (await client.tags())[0].name
            details = await client.show(name)
            opts = {"num_predict": 12, "seed": 5, "temperature": 0.0}
            on = [c async for c in client.chat(name, PROMPT, think=True, options=opts)]
            off = [c async for c in client.chat(name, PROMPT, think=False, options=opts)]
            return details.supports_thinking, on, off

    with llama_server(llama_server_binary, bundled_model, "-c", "1024", "-np", "1", "--jinja",
                      "--chat-template-file", str(template)) as (url, _):
        supported, on, off = run(lambda: go(url))
    assert supported
    assert "".join(c.thinking for c in on).strip() and not "".join(c.content for c in on).strip()
    assert "".join(c.content for c in off).strip() and not "".join(c.thinking for c in off)
    assert on[-1].final is not None and on[-1].final.output_tokens == on[-1].raw["timings"]["predicted_n"]


def test_a_server_killed_mid_reply_is_stream_dropped(llama_server_binary: Path, bundled_model: Path) -> None:
    with llama_server(llama_server_binary, bundled_model, "-c", "512", "-np", "1") as (url, proc):
        async def go() -> list[StreamChunk]:
            got: list[StreamChunk] = []
            async with LlamaServerClient(url) as client:
                async for chunk in client.chat("m", PROMPT, options={"num_predict": 200}):
                    got.append(chunk)
                    if chunk.content:
                        proc.kill()  # the server dies while the reply streams
            return got

        with pytest.raises(StreamDropped, match=re.escape(url)):
            run(go)


def test_the_real_server_closes_the_connection_after_a_streamed_reply(server: str) -> None:
    """Why streamed requests say Connection: close: llama-server frames the reply as keep-alive and
    then closes the socket, so a pooled connection reused for the next request would be dropped."""
    host, port = server.removeprefix("http://").split(":")
    body = json.dumps({"messages": PROMPT, "stream": True, "max_tokens": 2}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=120) as sock:
        sock.sendall(head + body)
        received = b""
        while not (b"data: [DONE]" in received and received.endswith(b"\r\n0\r\n\r\n")):
            data = sock.recv(65536)
            assert data, f"closed before the reply was complete: {received[-200:]!r}"
            received += data
        assert b"Connection: close" not in received.split(b"\r\n\r\n")[0]  # framed as keep-alive…
        assert sock.recv(1) == b""  # …and closed all the same


def test_sequential_streamed_requests_on_one_client_all_complete(server: str) -> None:
    async def go() -> list[int]:
        counts = []
        async with LlamaServerClient(server) as client:
            for i in range(4):
                chunks = [c async for c in client.chat("m", PROMPT, options={"num_predict": 2, "seed": i})]
                assert chunks[-1].final is not None
                counts.append(chunks[-1].final.output_tokens)
        return counts

    assert run(go) == [2, 2, 2, 2]
