"""Wire-level checks of the stand-in Ollama server against Ollama 0.12's protocol (raw sockets)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.ollama.fake_ollama import QUEUE_FULL_MESSAGE, FakeModel, FakeOllama
from tests.fakes.ollama.recorded import real_version
from tests.fakes.ollama.fake_ollama_wire import go_duration, parse_keep_alive
from app.core.units import GIB

DATA = Path(__file__).parent.parent.parent / "data" / "ollama"
QUICK = {"tokens_per_s": 5000.0, "prompt_tokens_per_s": 1e6}


def call(fake: FakeOllama, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], bytes]:
    """One request over a fresh connection; returns status, headers, body."""
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def lines(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.decode().splitlines() if line.strip()]


def raw_chunks(fake: FakeOllama, path: str, body: dict[str, Any]) -> tuple[bytes, list[bytes]]:
    """Send a request on a raw socket and split the chunked body into its chunks."""
    payload = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", fake.port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    chunks = []
    while rest:
        size_text, _, rest = rest.partition(b"\r\n")
        size = int(size_text, 16)
        if size == 0:
            break
        chunks.append(rest[:size])
        rest = rest[size + 2:]
    return head, chunks


@pytest.fixture
def quick(make_fake_ollama) -> FakeOllama:
    return make_fake_ollama(**QUICK)


def test_banner_version_and_routing(quick: FakeOllama) -> None:
    assert call(quick, "GET", "/")[::2] == (200, b"Ollama is running")
    status, headers, body = call(quick, "HEAD", "/")
    assert (status, body, headers["content-length"]) == (200, b"", "17")
    assert json.loads(call(quick, "GET", "/api/version")[2]) == {"version": real_version()}  # 0.32.15, recorded
    assert call(quick, "GET", "/api/nothing")[::2] == (404, b"404 page not found")
    assert call(quick, "GET", "/api/chat")[::2] == (405, b"405 method not allowed")
    assert json.loads(call(quick, "POST", "/api/chat", None)[2]) == {"error": "missing request body"}


def test_tags_lists_models_with_details(quick: FakeOllama) -> None:
    models = json.loads(call(quick, "GET", "/api/tags")[2])["models"]
    assert [m["name"] for m in models] == ["qwen3:14b", "qwen3:0.6b", "llama3.2:3b", "gemma3:4b"]
    first = models[0]
    assert set(first) == {"name", "model", "modified_at", "size", "digest", "details", "capabilities"}
    assert first["size"] == 9_276_198_565 and len(first["digest"]) == 64
    assert first["details"] == {"parent_model": "", "format": "gguf", "family": "qwen3", "families": ["qwen3"],
                                "parameter_size": "14.8B", "quantization_level": "Q4_K_M",
                                "context_length": 40960, "embedding_length": 5120}  # since 0.30 (recorded)
    assert first["capabilities"] == ["completion", "tools", "thinking"]


def test_show_matches_reference_metadata(quick: FakeOllama) -> None:
    reference = json.loads((DATA / "qwen3_14b_show.json").read_text())
    shown = json.loads(call(quick, "POST", "/api/show", {"model": "qwen3:14b"})[2])
    assert shown["model_info"] == reference["model_info"]
    assert shown["capabilities"] == reference["capabilities"]
    assert shown["details"] == reference["details"]
    assert shown["parameters"] == reference["parameters"]
    assert shown["tensors"][:12] == reference["tensors"]
    verbose = json.loads(call(quick, "POST", "/api/show", {"model": "qwen3:14b", "verbose": True})[2])
    assert verbose["model_info"]["tokenizer.ggml.tokens"]
    status, _, body = call(quick, "POST", "/api/show", {"model": "nope:1b"})
    assert (status, json.loads(body)) == (404, {"error": "model 'nope:1b' not found"})


def test_chat_stream_is_chunked_ndjson_one_object_per_chunk(quick: FakeOllama) -> None:
    head, chunks = raw_chunks(quick, "/api/chat", {"model": "qwen3:14b", "messages": [{"role": "user", "content": "hi"}]})
    assert b"Content-Type: application/x-ndjson" in head and b"Transfer-Encoding: chunked" in head
    assert all(c.endswith(b"\n") and c.count(b"\n") == 1 for c in chunks)
    objects = [json.loads(c) for c in chunks]
    thinking = [o for o in objects if o["message"].get("thinking")]
    content = [o for o in objects if o["message"]["content"]]
    assert (len(thinking), len(content)) == (20, 30)
    assert objects.index(content[0]) == len(thinking)  # all thinking first
    final = objects[-1]
    assert final["done"] is True and final["done_reason"] == "stop" and final["message"]["content"] == ""
    assert final["eval_count"] == 50
    for key in ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_duration"):
        assert isinstance(final[key], int) and final[key] > 0


def test_a_scripted_answer_streams_verbatim_a_word_per_chunk(make_fake_ollama) -> None:
    text = "## Result\n\n- **391**\n\n```python\nprint(17 * 23)\n```"
    fake = make_fake_ollama(**dict(QUICK, thinking_tokens=0), answer_text=text)
    _head, chunks = raw_chunks(fake, "/api/chat", {"model": "qwen3:14b", "think": False,
                                                 "messages": [{"role": "user", "content": "17 x 23?"}]})
    objects = [json.loads(c) for c in chunks]
    pieces = [o["message"]["content"] for o in objects if o["message"]["content"]]
    assert "".join(pieces) == text and len(pieces) == 9  # whitespace travels with the next word
    assert objects[-1]["eval_count"] == 9


@pytest.mark.parametrize(("model", "think", "status", "thinking_lines", "error"), [
    ("qwen3:14b", None, 200, 20, None),
    ("qwen3:14b", False, 200, 0, None),
    ("llama3.2:3b", None, 200, 0, None),
    ("llama3.2:3b", True, 400, 0, '"llama3.2:3b" does not support thinking'),
    ("qwen3:14b", "high", 400, 0, 'think value "high" is not supported for this model'),
    ("gpt-oss:20b", "low", 200, 10, None),
    ("gpt-oss:20b", "max", 400, 0, 'invalid think value: "max" (must be "high", "medium", "low", true, or false)'),
])
def test_think_values(make_fake_ollama, model, think, status, thinking_lines, error) -> None:
    models = [FakeModel("qwen3:14b"), FakeModel("llama3.2:3b", family="llama", capabilities=("completion",)),
              FakeModel("gpt-oss:20b", family="gptoss", think_levels=True)]
    fake = make_fake_ollama(models=models, **QUICK)
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    if think is not None:
        body["think"] = think
    got_status, _, raw = call(fake, "POST", "/api/chat", body)
    assert got_status == status
    if error:
        assert json.loads(raw) == {"error": error}
    else:
        assert sum(1 for o in lines(raw) if o["message"].get("thinking")) == thinking_lines


def test_no_think_soft_switch_turns_qwen3_thinking_off(quick: FakeOllama) -> None:
    body = {"model": "qwen3:14b", "messages": [{"role": "user", "content": "hi /no_think"}]}
    assert not any(o["message"].get("thinking") for o in lines(call(quick, "POST", "/api/chat", body)[2]))


def test_generate_uses_top_level_fields_and_non_stream_concatenates(quick: FakeOllama) -> None:
    streamed = lines(call(quick, "POST", "/api/generate", {"model": "qwen3:14b", "prompt": "hi"})[2])
    assert streamed[0]["response"] == "" and streamed[0]["thinking"]
    assert streamed[-1]["done"] and streamed[-1]["context"]
    status, headers, raw = call(quick, "POST", "/api/generate", {"model": "qwen3:14b", "prompt": "hi", "stream": False})
    whole = json.loads(raw)
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert whole["response"] == "".join(o["response"] for o in streamed)
    assert whole["thinking"] == "".join(o.get("thinking", "") for o in streamed)
    assert whole["eval_count"] == 50 and whole["done_reason"] == "stop"


def test_load_unload_and_num_ctx_change_what_ps_reports(quick: FakeOllama) -> None:
    loaded = json.loads(call(quick, "POST", "/api/chat", {"model": "qwen3:14b", "messages": []})[2])
    assert (loaded["done"], loaded["done_reason"]) == (True, "load")
    entry = json.loads(call(quick, "GET", "/api/ps")[2])["models"][0]
    assert entry["context_length"] == 4096 and entry["size_vram"] == entry["size"] > 9_276_198_565
    assert set(entry) == {"name", "model", "size", "digest", "details", "expires_at", "size_vram", "context_length"}
    call(quick, "POST", "/api/generate", {"model": "qwen3:14b", "prompt": "", "options": {"num_ctx": 999_999}})
    assert quick.loaded["qwen3:14b"]["context_length"] == 40960  # clamped to the training context
    gone = json.loads(call(quick, "POST", "/api/generate", {"model": "qwen3:14b", "keep_alive": 0})[2])
    assert gone["done_reason"] == "unload" and json.loads(call(quick, "GET", "/api/ps")[2]) == {"models": []}


def test_keep_alive_sets_expiry_and_zero_unloads_after_the_reply(quick: FakeOllama) -> None:
    call(quick, "POST", "/api/generate", {"model": "qwen3:0.6b", "prompt": "", "keep_alive": -1})
    assert quick.loaded["qwen3:0.6b"]["expires_at"] > "2300"
    call(quick, "POST", "/api/generate", {"model": "qwen3:0.6b", "prompt": "hi", "keep_alive": 0})
    assert "qwen3:0.6b" not in quick.loaded
    status, _, raw = call(quick, "POST", "/api/generate", {"model": "qwen3:0.6b", "prompt": "", "keep_alive": "5"})
    assert (status, json.loads(raw)) == (400, {"error": 'time: missing unit in duration "5"'})


def test_num_predict_stops_with_length(quick: FakeOllama) -> None:
    body = {"model": "qwen3:14b", "messages": [{"role": "user", "content": "hi"}], "stream": False,
            "options": {"num_predict": 7}}
    final = json.loads(call(quick, "POST", "/api/chat", body)[2])
    assert (final["done_reason"], final["eval_count"]) == ("length", 7)


def test_partial_offload_when_gpu_memory_is_short(make_fake_ollama) -> None:
    fake = make_fake_ollama(gpu_memory_bytes=6 * GIB, **QUICK)
    call(fake, "POST", "/api/generate", {"model": "qwen3:14b", "prompt": ""})
    entry = fake.loaded["qwen3:14b"]
    assert entry["size_vram"] == 6 * GIB < entry["size"]


def test_unknown_model_errors_use_ollama_texts(quick: FakeOllama) -> None:
    for path, body in (("/api/chat", {"model": "nope:1b", "messages": []}),
                       ("/api/generate", {"model": "nope:1b", "prompt": "x"}),
                       ("/api/delete", {"model": "nope:1b"})):
        status, _, raw = call(quick, "DELETE" if path == "/api/delete" else "POST", path, body)
        assert (status, json.loads(raw)) == (404, {"error": "model 'nope:1b' not found"})
    status, _, raw = call(quick, "POST", "/api/pull", {"model": "nope:1b"})
    assert status == 200
    assert lines(raw) == [{"status": "pulling manifest"}, {"error": "pull model manifest: file does not exist"}]


def test_pull_progress_shape_and_non_stream_reply(quick: FakeOllama) -> None:
    progress = lines(call(quick, "POST", "/api/pull", {"model": "qwen3:8b"})[2])
    assert progress[0] == {"status": "pulling manifest"}
    first_blob = progress[1]
    assert first_blob["status"] == "pulling " + first_blob["digest"][7:19] and "completed" not in first_blob
    assert progress[5]["completed"] == progress[5]["total"] == 5_225_387_923
    assert [p["status"] for p in progress[-3:]] == ["verifying sha256 digest", "writing manifest", "success"]
    assert "qwen3:8b" in quick.models
    status, _, raw = call(quick, "POST", "/api/pull", {"model": "qwen3:8b", "stream": False})
    assert (status, json.loads(raw)) == (200, {"status": "success"})


def test_create_variant_carries_its_num_ctx_into_loads(quick: FakeOllama) -> None:
    body = {"model": "qwen3-14b-16k", "from": "qwen3:14b", "parameters": {"num_ctx": 16384}}
    statuses = [o["status"] for o in lines(call(quick, "POST", "/api/create", body)[2])]
    assert statuses[0].startswith("using existing layer sha256:") and statuses[-2:] == ["writing manifest", "success"]
    assert any(s.startswith("creating new layer sha256:") for s in statuses)
    call(quick, "POST", "/api/generate", {"model": "qwen3-14b-16k", "prompt": ""})
    assert quick.loaded["qwen3-14b-16k:latest"]["context_length"] == 16384
    status, _, raw = call(quick, "POST", "/api/create", {"model": "x", "from": "qwen3:14b", "quantize": "q4_K_M"})
    assert (status, json.loads(raw)) == (500, {"error": "quantization is only supported for F16 and F32 models"})
    status, _, raw = call(quick, "POST", "/api/create", {"model": "x"})
    assert (status, json.loads(raw)) == (400, {"error": "neither 'from' or 'files' was specified"})
    assert call(quick, "DELETE", "/api/delete", {"model": "qwen3-14b-16k"})[0] == 200


def test_fail_next_status_kinds_and_count(quick: FakeOllama) -> None:
    quick.fail_next("queue_full", path="/api/chat", count=2)
    body = {"model": "qwen3:14b", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(2):
        status, _, raw = call(quick, "POST", "/api/chat", body)
        assert (status, json.loads(raw)) == (503, {"error": QUEUE_FULL_MESSAGE})
    assert "  maximum pending" in QUEUE_FULL_MESSAGE
    assert call(quick, "POST", "/api/chat", body)[0] == 200
    quick.fail_next("oom")
    status, _, raw = call(quick, "POST", "/api/generate", {"model": "qwen3:14b", "prompt": "hi"})
    assert status == 500 and "out of memory" in json.loads(raw)["error"]


def test_fail_next_stream_kinds_after_chunks(quick: FakeOllama) -> None:
    body = {"model": "qwen3:14b", "messages": [{"role": "user", "content": "hi"}]}
    quick.fail_next("midstream_error", after_chunks=3, message="boom")
    _, chunks = raw_chunks(quick, "/api/chat", body)
    assert len(chunks) == 4 and json.loads(chunks[3]) == {"error": "boom"}
    quick.fail_next("malformed", after_chunks=2)
    _, chunks = raw_chunks(quick, "/api/chat", body)
    assert len(chunks) == 3 and chunks[2].startswith(b"<html>")
    quick.fail_next("drop", after_chunks=2)
    with pytest.raises(http.client.IncompleteRead):
        call(quick, "POST", "/api/chat", body)
    assert quick.requests[-1].finished.wait(5) and quick.requests[-1].outcome == "dropped"


def test_queue_beyond_parallel_then_503_beyond_max_queue(make_fake_ollama) -> None:
    # OLLAMA_MAX_QUEUE bounds the requests waiting for a model to load (recorded from 0.32.15), so the
    # model is cold here: one request loads it, one waits for the load, the third is refused.
    fake = make_fake_ollama(num_parallel=1, max_queue=1, tokens_per_s=200.0, answer_tokens=100, thinking_tokens=0,
                            load_s=1.0)
    body = {"model": "qwen3:0.6b", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    results: list[tuple[int, dict[str, str], bytes]] = []
    threads = [threading.Thread(target=lambda: results.append(call(fake, "POST", "/api/chat", body)))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    assert fake.wait_for_queue(1)  # one loads (and then decodes), one waits
    status, _, raw = call(fake, "POST", "/api/chat", body)
    assert (status, json.loads(raw)) == (503, {"error": QUEUE_FULL_MESSAGE})
    for thread in threads:
        thread.join(10)
    served, queued = sorted((json.loads(r[2]) for r in results), key=lambda r: r["load_duration"])
    # The queued request's load_duration includes its wait, as Ollama's does.
    assert queued["load_duration"] >= 0.9 * served["eval_duration"]


def test_a_loaded_model_queues_beyond_max_queue_without_refusing(make_fake_ollama) -> None:
    # Recorded from 0.32.15 with OLLAMA_MAX_QUEUE=1: once the model is loaded, four at once all get 200
    # (they wait in its llama-server), where the same four on a cold model got two 503s.
    fake = make_fake_ollama(num_parallel=1, max_queue=1, tokens_per_s=400.0, answer_tokens=20, thinking_tokens=0)
    body = {"model": "qwen3:0.6b", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    assert call(fake, "POST", "/api/generate", {"model": "qwen3:0.6b"})[0] == 200  # loaded
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(call(fake, "POST", "/api/chat", body)[0]))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    assert fake.wait_for_queue(3)  # one decodes, three wait: more than max_queue
    for thread in threads:
        thread.join(10)
    assert results == [200, 200, 200, 200]


def test_client_gone_is_seen_during_decode(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=50.0, answer_tokens=500)
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    conn.request("POST", "/api/chat", json.dumps({"model": "qwen3:0.6b", "messages": [{"role": "user", "content": "x"}]}))
    response = conn.getresponse()
    assert json.loads(response.readline())["done"] is False
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    record = fake.requests[-1]
    assert record.finished.wait(5) and record.outcome == "client_gone"


def test_log_lines_look_like_ollama(make_fake_ollama) -> None:
    logged: list[str] = []
    fake = make_fake_ollama(log=logged.append, **QUICK)
    call(fake, "GET", "/api/tags")
    assert fake.requests[-1].finished.wait(5)  # the access line is written once the reply is done
    assert any("Listening on 127.0.0.1:" in line and f"(version {real_version()})" in line for line in logged)
    gin = [line for line in logged if line.startswith("[GIN]")]
    assert gin and gin[-1].endswith('| GET     "/api/tags"') and "| 200 |" in gin[-1]


def test_from_env_reads_ollama_variables() -> None:
    fake = FakeOllama.from_env({"OLLAMA_HOST": "127.0.0.1:0", "OLLAMA_NUM_PARALLEL": "4",
                                "OLLAMA_CONTEXT_LENGTH": "8192", "OLLAMA_KV_CACHE_TYPE": "q8_0",
                                "OLLAMA_FLASH_ATTENTION": "0", "OLLAMA_MAX_QUEUE": "7",
                                "OLLAMA_KEEP_ALIVE": "10m"})
    try:
        assert (fake.num_parallel, fake.context_length, fake.kv_cache_type, fake.max_queue) == (4, 8192, "q8_0", 7)
        assert fake.flash_attention is False and fake.effective_kv_type() == "f16"
        assert fake.keep_alive_s == 600 and fake.url == f"http://127.0.0.1:{fake.port}"
    finally:
        fake.stop()


def test_go_formats() -> None:
    assert parse_keep_alive("1h30m") == 5400 and parse_keep_alive(30) == 30
    assert parse_keep_alive("-1s") == float("inf")
    assert [go_duration(n) for n in (512, 1_500_000, 2_500_000_000, 62_000_000_000)] == ["512ns", "1.5ms", "2.5s", "1m2s"]
