"""OpenAiClient over real sockets against a server replaying vLLM's streams (written from its source, see
vllm_transcripts.py) and the failures a real server never sends on purpose."""

from __future__ import annotations

import functools
import json

import pytest

from app.backends.openai.client import OpenAiClient, load_client
from app.backends.openai.endpoint import SESSION
from app.core.errors import (AuthRefused, MalformedResponse, ModelNotFound, ServerUnreachable, StreamOutOfMemory)
from app.core.replies import ChatRequest, StreamChunk
from tests.backends.openai import vllm_transcripts as vllm
from tests.backends.openai.replay_server import Recorded, json_reply, replay_server, sse
from tests.bounded import run_within
from tests.fakes.raw_http import closed_port

HI = [{"role": "user", "content": "hi"}]
KEY = "sk-test-7f3a9c"
run = functools.partial(run_within, timeout=20.0)


def vllm_route(chat: Recorded):
    def route(method: str, path: str) -> Recorded:
        if path == "/v1/models":
            return json_reply(200, vllm.MODELS)
        if path == "/version":
            return json_reply(200, vllm.VERSION)
        if path == "/v1/chat/completions" and method == "POST":
            return chat
        return json_reply(404, {"detail": "Not Found"})
    return route


def chat(url: str, think: bool | None = None) -> list[StreamChunk]:
    async def go() -> list[StreamChunk]:
        async with OpenAiClient(url) as client:
            return [c async for c in client.chat(vllm.MODEL, HI, think=think,
                                                 options={"num_predict": 32, "num_ctx": 8192, "top_k": 20})]
    return run(go)


def test_a_vllm_thinking_stream_gives_its_trace_answer_and_usage_with_no_invented_times():
    with replay_server(vllm_route(sse(vllm.REASONING_CONTENT))) as server:
        SESSION.remember(server.base_url, KEY)
        chunks = chat(server.base_url + "/v1", think=True)
    assert "".join(c.thinking for c in chunks) == "The user greets me."
    assert "".join(c.content for c in chunks) == "Hello!"
    final = chunks[-1].final
    assert chunks[-1].done and final is not None
    # usage: 21 prompt tokens of which 16 came from the prefix cache; 9 generated
    assert (final.prompt_tokens, final.cached_prompt_tokens, final.output_tokens) == (5, 16, 9)
    assert final.done_reason == "stop"
    assert (final.prompt_ms, final.decode_ms, final.total_ms, final.load_ms, final.busy_ms) == (None,) * 5
    # every chunk is stamped by the transport, the request's send time on each
    times = [c.t_monotonic for c in chunks]
    assert times == sorted(times) and all(c.request_sent_s is not None and c.request_sent_s <= times[0]
                                          for c in chunks)
    request = next(s for s in server.seen if s.path == "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(request.body)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == vllm.MODEL and body["max_tokens"] == 32
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert "num_ctx" not in body and "top_k" not in body  # a start setting, and a field strict servers refuse


def test_the_renamed_reasoning_field_and_a_capped_reply():
    with replay_server(vllm_route(sse(vllm.REASONING))) as server:
        chunks = chat(server.base_url)
        request = next(s for s in server.seen if s.path == "/v1/chat/completions")
    assert "".join(c.thinking for c in chunks) == "Counting"
    assert "".join(c.content for c in chunks) == "one, two, three"
    final = chunks[-1].final
    assert final is not None and final.done_reason == "length"
    assert (final.prompt_tokens, final.cached_prompt_tokens, final.output_tokens) == (14, None, 5)
    assert "authorization" not in request.headers  # no key known: none sent
    assert "chat_template_kwargs" not in json.loads(request.body)  # the model decides


def test_the_load_generators_way_sees_the_same_figures():
    got: list[StreamChunk] = []
    with replay_server(vllm_route(sse(vllm.REASONING_CONTENT))) as server:
        async def go() -> None:
            client = load_client(server.base_url, connect_timeout_s=3.0, read_timeout_s=30.0)
            try:
                await client.stream_chat(ChatRequest(vllm.MODEL, tuple(HI), seed=1, max_tokens=16), got.append)
            finally:
                await client.aclose()
        run(go)
        body = json.loads(next(s for s in server.seen if s.path == "/v1/chat/completions").body)
    assert got[-1].final is not None and got[-1].final.output_tokens == 9
    assert body["seed"] == 1 and body["max_tokens"] == 16


def test_the_catalog_lists_served_models_with_their_context_and_version():
    with replay_server(vllm_route(sse(vllm.REASONING))) as server:
        async def go():
            async with OpenAiClient(server.base_url) as client:
                return await client.version(), await client.tags(), await client.ps(), await client.show(vllm.MODEL)
        version, tags, ps, details = run(go)
    assert version == "0.10.1"
    assert [m.name for m in tags] == [vllm.MODEL] and tags[0].family == "vllm"
    assert ps[0].context_length == 8192 and ps[0].size_vram_bytes is None  # not reported, not invented
    assert details.supports_thinking and "enable_thinking" in details.details["thinking_note"]


def test_an_engine_failure_mid_stream_is_typed():
    with replay_server(vllm_route(sse(vllm.STREAM_ERROR))) as server:
        with pytest.raises(StreamOutOfMemory, match="CUDA out of memory"):
            chat(server.base_url)


def test_a_model_vllm_does_not_serve_is_model_not_found():
    with replay_server(lambda _m, _p: json_reply(404, vllm.NOT_FOUND)) as server:
        with pytest.raises(ModelNotFound, match="does not exist") as caught:
            chat(server.base_url)
    assert "/v1/models" in caught.value.hint


def test_a_refused_key_says_so_and_how_to_give_one_without_showing_it():
    with replay_server(lambda _m, _p: json_reply(401, vllm.UNAUTHORIZED)) as server:
        SESSION.remember(server.base_url, KEY)
        with pytest.raises(AuthRefused) as caught:
            chat(server.base_url)
        async def models():
            async with OpenAiClient(server.base_url) as client:
                return await client.models()
        with pytest.raises(AuthRefused) as plain:
            run(models)
    for error in (caught.value, plain.value):
        text = error.user_text()
        assert "refused the API key" in text and "--api-key-env" in text and "OLLAMA_DECK_API_KEY" in text
        assert KEY not in text


def test_an_event_that_is_not_json_is_malformed():
    bad = Recorded(200, "text/event-stream", [b'data: {"choices": [\n\n', b"data: [DONE]\n\n"])
    with replay_server(vllm_route(bad)) as server:
        with pytest.raises(MalformedResponse, match="not JSON"):
            chat(server.base_url)


def test_a_body_that_is_not_an_event_stream_is_named():
    page = Recorded(200, "text/event-stream", [b"<html><body>Welcome to nginx!</body></html>\n"])
    with replay_server(vllm_route(page)) as server:
        with pytest.raises(MalformedResponse, match="not an event stream.*Welcome to nginx"):
            chat(server.base_url)


def test_an_error_page_without_openai_json_is_malformed_with_its_status():
    with replay_server(lambda _m, _p: Recorded(502, "text/html", [b"<html>Bad Gateway</html>"])) as server:
        with pytest.raises(MalformedResponse, match="HTTP 502"):
            chat(server.base_url)


def test_nothing_listening_is_unreachable_with_what_to_check():
    with pytest.raises(ServerUnreachable) as caught:
        chat(f"http://127.0.0.1:{closed_port()}")
    assert "Cannot connect" in caught.value.message and "does not start it" in caught.value.hint


def test_https_to_a_server_without_tls_fails_the_handshake_with_advice():
    with replay_server(vllm_route(sse(vllm.REASONING))) as server:
        url = server.base_url.replace("http://", "https://")
        with pytest.raises(ServerUnreachable, match="could not be reached over TLS") as caught:
            chat(url)
    assert "--ca-bundle" in caught.value.hint
