"""llama-server's SSE replies, as the real server sent them (tests/data/llama_server), parsed into
neutral chunks and final figures."""

from __future__ import annotations

import json

import pytest

from app.backends.llama_server.wire import (SseChatParser, chat_body, final_figures, parse_models, parse_props,
                                            request_body, thinking_support)
from app.core.errors import MalformedResponse, StreamError, StreamOutOfMemory
from app.core.replies import ChatRequest, StreamChunk
from tests.fakes.llama_server.replay import recorded

URL = "http://127.0.0.1:8080"


def replay(name: str) -> list[StreamChunk]:
    """Every chunk of a recorded stream, fed line by line as the transport hands them over."""
    parser = SseChatParser(URL)
    chunks = []
    for i, line in enumerate(recorded(name).split(b"\n")):
        if line:
            chunk = parser.feed(line, float(i), 0.5)
            if chunk is not None:
                chunks.append(chunk)
    assert parser.done
    return chunks


def server_record(name: str, key: str) -> dict:
    """The last `key` object the server put in a recorded stream (its own timings/usage)."""
    found = [json.loads(line[6:])[key] for line in recorded(name).split(b"\n")
             if line.startswith(b"data: {") and key in json.loads(line[6:])]
    return found[-1]


@pytest.mark.parametrize("name", ["chat_think_on.sse", "chat_think_off.sse", "chat_no_usage.sse",
                                  "chat_thinking_template_on.sse", "chat_thinking_template_off.sse"])
def test_a_recorded_stream_ends_with_one_done_chunk_whose_figures_are_the_servers_timings(name: str) -> None:
    chunks = replay(name)
    assert [c.done for c in chunks].count(True) == 1 and chunks[-1].done
    timings = server_record(name, "timings")
    final = chunks[-1].final
    assert final is not None
    assert final.output_tokens == timings["predicted_n"] and final.prompt_tokens == timings["prompt_n"]
    assert final.prompt_ms == timings["prompt_ms"]
    assert final.total_ms == pytest.approx(timings["prompt_ms"] + timings["predicted_ms"])
    assert final.decode_tokens_per_s == pytest.approx(timings["predicted_per_second"], rel=1e-9)
    assert final.load_ms is None and final.done_reason in ("stop", "length")
    assert final.raw["timings"] == timings
    # One text chunk per generated token (the end-of-turn token has no text); a reasoning parser
    # may hold a piece back until it knows it is not the start of </think>, so at most that many.
    texts = [c for c in chunks if c.content or c.thinking]
    expected = timings["predicted_n"] - (final.done_reason == "stop")
    assert len(texts) == expected if "thinking_template" not in name else 0 < len(texts) <= expected
    assert all(c.request_sent_s == 0.5 for c in chunks)


def test_the_thinking_trace_arrives_as_thinking_chunks_and_the_answer_as_content() -> None:
    on = replay("chat_thinking_template_on.sse")
    off = replay("chat_thinking_template_off.sse")
    assert "".join(c.thinking for c in on).strip() and not "".join(c.content for c in on)
    assert "".join(c.content for c in off).strip() and not "".join(c.thinking for c in off)


def test_smollm2_ignores_enable_thinking_its_template_does_not_read() -> None:
    on, off = replay("chat_think_on.sse"), replay("chat_think_off.sse")
    assert "".join(c.content for c in on) == "".join(c.content for c in off)
    assert not any(c.thinking for c in on)


def test_usage_fills_the_counts_when_timings_are_missing() -> None:
    final = final_figures("stop", None, {"prompt_tokens": 12, "completion_tokens": 5})
    assert (final.prompt_tokens, final.output_tokens, final.decode_ms, final.total_ms) == (12, 5, None, None)


def test_a_build_without_the_per_token_time_uses_its_decode_window() -> None:
    final = final_figures("stop", {"prompt_n": 3, "prompt_ms": 10.0, "predicted_n": 8, "predicted_ms": 400.0}, None)
    assert final.decode_ms == 400.0 and final.decode_tokens_per_s == pytest.approx(20.0)


def test_only_one_done_chunk_whatever_follows_done() -> None:
    parser = SseChatParser(URL)
    assert parser.feed(b"data: [DONE]", 0.0) is not None
    assert parser.feed(b"data: [DONE]", 1.0) is None and parser.feed(b'data: {"choices": []}', 1.0) is None


def test_a_one_token_reply_has_no_decode_rate() -> None:
    final = final_figures("stop", {"prompt_n": 14, "prompt_ms": 900.0, "predicted_n": 1, "predicted_ms": 0.001,
                                   "predicted_per_token_ms": 0.0}, None)
    assert final.output_tokens == 1 and final.decode_ms is None and final.decode_tokens_per_s is None


@pytest.mark.parametrize("line", [b"data: {not json", b"data: [1, 2]", b'data: {"choices": {"a": 1}}',
                                  b'data: {"choices": [{"delta": {"content": 5}}]}',
                                  b'data: {"choices": [], "timings": {"predicted_n": "many"}}'])
def test_a_broken_event_is_a_malformed_response(line: bytes) -> None:
    parser = SseChatParser(URL)
    with pytest.raises(MalformedResponse):
        parser.feed(line, 0.0)
        parser.feed(b"data: [DONE]", 1.0)


def test_in_band_errors_keep_the_servers_message_and_oom_is_its_own_kind() -> None:
    parser = SseChatParser(URL)
    with pytest.raises(StreamError, match="llama-server: decode failed") as caught:
        parser.feed(b'data: {"error": {"code": 500, "message": "decode failed", "type": "server_error"}}', 0.0)
    assert caught.value.status == 200
    with pytest.raises(StreamOutOfMemory):
        parser.feed(b'data: {"error": {"code": 500, "message": "failed to allocate KV cache"}}', 0.0)


def test_pings_and_other_sse_fields_are_not_chunks() -> None:
    parser = SseChatParser(URL)
    assert parser.feed(b":", 0.0) is None and parser.feed(b"event: message", 0.0) is None
    assert not parser.done


def test_the_body_maps_the_consoles_options_and_leaves_load_options_to_the_server() -> None:
    body = chat_body("m", [{"role": "user", "content": "hi"}], think=False,
                     options={"num_predict": 40, "temperature": 0.2, "seed": 3, "num_ctx": 4096, "top_k": 5})
    assert body["max_tokens"] == 40 and body["temperature"] == 0.2 and body["seed"] == 3 and body["top_k"] == 5
    assert "num_ctx" not in body and "num_predict" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["reasoning_format"] == "deepseek"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "chat_template_kwargs" not in chat_body("m", [], think=None)
    level = chat_body("m", [], think="high")
    assert level["chat_template_kwargs"] == {"enable_thinking": True} and level["reasoning_effort"] == "high"


def test_a_load_generator_request_carries_its_seed_and_cap() -> None:
    body = request_body(ChatRequest(model="m", messages=({"role": "user", "content": "x"},), think=True, seed=9,
                                    max_tokens=16))
    assert body["seed"] == 9 and body["max_tokens"] == 16 and body["chat_template_kwargs"]["enable_thinking"]


def test_thinking_support_is_read_from_the_recorded_templates() -> None:
    plain = parse_props(json.loads(recorded("props.json")))
    thinking = parse_props(json.loads(recorded("props_thinking.json")))
    supported, why = thinking_support(plain["chat_template"])
    assert not supported and "enable_thinking" in why
    assert thinking_support(thinking["chat_template"]) == (True, "")
    assert not thinking_support("")[0]
    assert plain["total_slots"] == 2 and plain["model_path"].endswith(".gguf")


def test_models_lists_the_served_file_with_its_meta() -> None:
    models = parse_models(json.loads(recorded("models.json")))
    assert len(models) == 1 and models[0]["id"].endswith(".gguf")
    assert models[0]["meta"]["n_params"] > 0 and models[0]["meta"]["ftype"] == "Q4_1"
    with pytest.raises(MalformedResponse):
        parse_models({"data": [{"name": "no id"}]})
