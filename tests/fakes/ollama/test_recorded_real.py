"""The stand-in against the real Ollama 0.32.15's recorded answers (tests/data/ollama/real/, written by
tests/data/ollama/record.py): each recorded request is sent to the stand-in, in the recorded order, and
its status, content type, error texts and reply shapes must be the real server's. Values that depend on
the machine (timings, sizes on a GPU the recording machine lacked, digests of generated layers) are
compared by shape only; the list in NOT_COMPARED says which."""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import pytest

from tests.fakes.ollama import fast_ollama, standin_ollama
from tests.fakes.ollama.fake_ollama import FakeOllama
from tests.fakes.ollama.recorded import exchanges, kv_needs_flash_message, real_version, recorded_log, smollm2
from tests.fakes.ollama.standin_ollama import server_config_line

# Compared by shape, not value: timings and clocks; sizes and expiry, which follow the machine (the
# stand-in plays a GPU: size_vram = size, where the recording machine had none); generated text; the
# digests of models and layers the stand-in derives from names (the replayed smollm2 keeps its real one);
# the long show texts.
NOT_COMPARED = {"created_at", "modified_at", "expires_at", "total_duration", "load_duration", "prompt_eval_count",
                "prompt_eval_duration", "eval_count", "eval_duration", "context", "size", "size_vram", "content",
                "response", "modelfile", "template", "tensors", "model_info", "parameters", "digest"}
# Scenario name -> the stand-in configured as that recorded server was.
SERVERS = {"default": {}, "parallel2": {"num_parallel": 2, "context_length": 2048},
           "queue1": {"max_queue": 1, "load_s": 0.5}, "q8_fa_off": {"kv_cache_type": "q8_0", "flash_attention": False},
           "q8_fa_auto": {"kv_cache_type": "q8_0"}}
FIRST_OF = {"default": "root", "parallel2": "parallel2_load", "queue1": "queue1_burst_cold",
            "q8_fa_off": "q8_fa_off_chat", "q8_fa_auto": "q8_fa_auto_load"}


def send(fake: FakeOllama, request: dict[str, Any]) -> dict[str, Any]:
    """One recorded request to the stand-in; its reply in the recording's form."""
    raw = request.get("raw_body")
    data = raw.encode() if raw is not None else (json.dumps(request["body"]).encode() if "body" in request else None)
    connection = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=30)
    try:
        connection.request(request["method"], request["path"], body=data,
                           headers={"Content-Type": "application/json"} if data is not None else {})
        reply = connection.getresponse()
        payload = reply.read().decode()
        out: dict[str, Any] = {"status": reply.status, "content_type": reply.getheader("Content-Type")}
        if reply.getheader("Allow"):
            out["allow"] = reply.getheader("Allow")
    finally:
        connection.close()
    content_type = out["content_type"] or ""
    if "ndjson" in content_type:
        out["ndjson"] = [json.loads(line) for line in payload.splitlines() if line.strip()]
    elif "json" in content_type:
        out["json"] = json.loads(payload)
    else:
        out["text"] = payload
    return out


def differences(real: Any, fake: Any, where: str) -> list[str]:
    """Where the stand-in's value differs from the recording: keys, types, and values not in NOT_COMPARED."""
    if isinstance(real, dict):
        if not isinstance(fake, dict):
            return [f"{where}: {type(fake).__name__} where the server sent an object"]
        found = [f"{where}: keys {sorted(set(fake) ^ set(real))} differ"] if set(real) != set(fake) else []
        for key in set(real) & set(fake):
            if key not in NOT_COMPARED:
                found += differences(real[key], fake[key], f"{where}.{key}")
        return found
    if isinstance(real, list) and real and isinstance(real[0], dict):
        if not isinstance(fake, list) or not fake:
            return [f"{where}: {fake!r} where the server sent {len(real)} objects"]
        return differences(real[0], fake[0], f"{where}[0]") + differences(real[-1], fake[-1], f"{where}[-1]")
    if where.endswith(".status") and isinstance(real, str):  # progress: same step, its digest aside
        real, fake = real.split(" sha256:")[0], str(fake).split(" sha256:")[0]
    return [] if real == fake else [f"{where}: {fake!r} where the server sent {real!r}"]


def compare(name: str, real: dict[str, Any], fake: dict[str, Any]) -> list[str]:
    """All differences of one exchange, each naming it."""
    found = [f"{name}.{key}: {fake.get(key)!r} where the server sent {real.get(key)!r}"
             for key in ("status", "content_type", "allow") if real.get(key) != fake.get(key)]
    for kind in ("json", "ndjson", "text"):
        if kind in real:
            if kind not in fake:
                found.append(f"{name}: no {kind} body")
            elif kind == "ndjson" and real[kind] and "error" in real[kind][-1]:
                found += differences(real[kind][-1], fake[kind][-1], f"{name}.error_line")
                found += differences(real[kind][0], fake[kind][0], f"{name}.first_line")
            elif kind == "ndjson" and "create" in name:
                steps = [line["status"].split(" sha256:")[0] for line in real[kind]]
                made = [line["status"].split(" sha256:")[0] for line in fake[kind]]
                found += [] if steps == made else [f"{name}: steps {made} where the server sent {steps}"]
            else:
                found += differences(real[kind], fake[kind], name)
    return found


def names_of(scenario: str) -> list[str]:
    """The recorded exchanges of one scenario, in recorded order."""
    names = list(exchanges())
    starts = sorted(names.index(first) for first in FIRST_OF.values())
    begin = names.index(FIRST_OF[scenario])
    end = next((s for s in starts if s > begin), len(names))
    return names[begin:end]


@pytest.mark.parametrize("scenario", list(SERVERS))
def test_the_stand_in_answers_every_recorded_request_as_the_real_server_did(make_fake_ollama, scenario):
    fake = make_fake_ollama(models=[smollm2()], offline=True, tokens_per_s=2000.0, **SERVERS[scenario])
    found: list[str] = []
    for name in names_of(scenario):
        real = exchanges()[name]
        if "replies" in real:
            found += burst(fake, name, real)
        else:
            found += compare(name, real, send(fake, real["request"]))
    assert not found, "\n".join(found)


def burst(fake: FakeOllama, name: str, real: dict[str, Any]) -> list[str]:
    """Recorded copies sent at once: the same count of each status, and the same refusal text."""
    copies = real["request"]["copies"]
    replies: list[dict[str, Any]] = []
    go = threading.Barrier(copies)

    def one() -> None:
        go.wait()
        replies.append(send(fake, real["request"]))

    threads = [threading.Thread(target=one) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    statuses = sorted(r["status"] for r in replies)
    expected = sorted(r["status"] for r in real["replies"])
    found = [] if statuses == expected else [f"{name}: statuses {statuses} where the server sent {expected}"]
    refused = [r for r in real["replies"] if r["status"] == 503]
    if refused:
        mine = next((r for r in replies if r["status"] == 503), None)
        found += compare(name, refused[0], mine) if mine else [f"{name}: no 503"]
    return found


def test_every_stand_in_reports_the_recorded_version(make_fake_ollama):
    assert real_version() == "0.32.15"
    assert make_fake_ollama().version == standin_ollama.DEFAULT_VERSION == fast_ollama.VERSION == real_version()
    assert kv_needs_flash_message().startswith("llama-server process has terminated: exit status 1: ")


def test_serve_logs_the_config_line_recorded_from_0_32():
    real = next(line for line in recorded_log("parallel2") if 'msg="server config"' in line)
    mine = server_config_line({"OLLAMA_NUM_PARALLEL": "2", "OLLAMA_CONTEXT_LENGTH": "2048",
                               "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                               "NO_PROXY": "127.0.0.1,localhost", "OLLAMA_MODELS": "$ROOT/models"},
                              "127.0.0.1", int(real.split("OLLAMA_HOST:http://127.0.0.1:")[1].split()[0]))
    assert mine.split(" env=")[1] == real.split(" env=")[1]


def test_model_load_logs_the_llama_server_command(make_fake_ollama):
    logged: list[str] = []
    fake = make_fake_ollama(models=[smollm2()], num_parallel=2, context_length=2048, log=logged.append)
    assert send(fake, {"method": "POST", "path": "/api/generate", "body": {"model": "smollm2"}})["status"] == 200
    real = next(line for line in recorded_log("parallel2") if 'msg="starting llama-server"' in line)
    mine = next(line for line in logged if 'msg="starting llama-server"' in line)
    for flags in ("-c 4096 -np 2", "--flash-attn auto -b 512 -ub 512", "--host 127.0.0.1 --no-webui --offline"):
        assert flags in real and flags in mine
    assert any(line.startswith("load_tensors: offloaded 31/31 layers to GPU") for line in logged)
    assert any('msg="llama-server started in' in line for line in logged)
