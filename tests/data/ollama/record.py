"""Records what the real Ollama 0.32.15 answers to every request ollama-deck makes, errors included,
and the log lines it writes, for the stand-ins that replay them (tests/fakes/ollama/) and the tests
that compare the two (tests/fakes/ollama/test_recorded_real.py).

    PYTHONPATH=$PWD python tests/data/ollama/record.py        # about a minute on 2 cores

Lays out the kit from ../shared/ollama (or $DECK_OLLAMA_KIT) with assemble.sh, runs each `ollama
serve` offline on a free port with its own HOME and models folder, creates `smollm2` from the
bundled SmolLM2-135M, and writes beside this file:

    real/exchanges.json   name -> {request, status, content_type, allow, text | json | ndjson}
    real/serve_<name>.log the whole log of each server (scenario names in SERVERS)

Temporary paths are replaced by $ROOT (the scenario's folder) and $KIT (the laid-out kit), so a new
recording differs from the last only where the server did."""

from __future__ import annotations

import http.client
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.ollama_real_fixtures import MODEL_NAME, OllamaKit, RealOllama, lay_out_kit  # noqa: E402

OUT = HERE / "real"
CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Say hello."}],
        "options": {"num_predict": 8, "seed": 1, "temperature": 0}}
# Scenario name -> the server's extra environment.
SERVERS: dict[str, dict[str, str]] = {
    "default": {},
    "parallel2": {"OLLAMA_NUM_PARALLEL": "2", "OLLAMA_CONTEXT_LENGTH": "2048"},
    "queue1": {"OLLAMA_MAX_QUEUE": "1"},
    "q8_fa_off": {"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "0"},
    "q8_fa_auto": {"OLLAMA_KV_CACHE_TYPE": "q8_0"},
}


class Recorder:
    """Sends raw requests to one server and keeps each exchange under a name."""

    def __init__(self, server: RealOllama, into: dict[str, Any]) -> None:
        self.server = server
        self.into = into

    def exchange(self, name: str | None, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                 timeout_s: float = 300.0) -> dict[str, Any]:
        """One request; the status, content type, Allow header and the body parsed as text, JSON or NDJSON."""
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=timeout_s)
        try:
            headers = {"Content-Type": "application/json"} if data is not None else {}
            connection.request(method, path, body=data, headers=headers)
            reply = connection.getresponse()
            payload = reply.read().decode("utf-8", errors="replace")
            record: dict[str, Any] = {
                "request": {"method": method, "path": path,
                            **({"body": body} if body is not None else {}),
                            **({"raw_body": raw.decode()} if raw is not None else {})},
                "status": reply.status, "content_type": reply.getheader("Content-Type"),
            }
            if reply.getheader("Allow"):
                record["allow"] = reply.getheader("Allow")
        finally:
            connection.close()
        record.update(_parsed(payload, record["content_type"] or ""))
        if name is not None:
            self.into[name] = record
        return record

    def burst(self, name: str, count: int, body: dict[str, Any]) -> None:
        """`count` identical chats at once, each on its own connection; their outcomes in arrival order."""
        results: list[dict[str, Any]] = [{} for _ in range(count)]
        go = threading.Barrier(count)

        def one(index: int) -> None:
            go.wait()
            results[index] = self.exchange(None, "POST", "/api/chat", body)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.into[name] = {"request": {"method": "POST", "path": "/api/chat", "body": body, "copies": count},
                           "replies": [{k: r[k] for k in r if k != "request"} for r in results]}


def _parsed(payload: str, content_type: str) -> dict[str, Any]:
    if "ndjson" in content_type:
        return {"ndjson": [json.loads(line) for line in payload.splitlines() if line.strip()]}
    if "json" in content_type:
        try:
            return {"json": json.loads(payload)}
        except ValueError:
            return {"text": payload}
    return {"text": payload}


def record_default(rec: Recorder) -> None:
    """Every endpoint the app uses on a default server, errors included."""
    rec.exchange("root", "GET", "/")
    rec.exchange("version", "GET", "/api/version")
    rec.exchange("unknown_path", "GET", "/api/nosuch")
    rec.exchange("tags", "GET", "/api/tags")
    rec.exchange("show", "POST", "/api/show", {"model": MODEL_NAME, "verbose": False})
    rec.exchange("show_unknown", "POST", "/api/show", {"model": "nosuch", "verbose": False})
    rec.exchange("ps_empty", "GET", "/api/ps")
    rec.exchange("generate_load", "POST", "/api/generate", {"model": MODEL_NAME, "stream": False})
    rec.exchange("ps_loaded", "GET", "/api/ps")
    rec.exchange("chat_stream", "POST", "/api/chat", {**CHAT, "stream": True})
    rec.exchange("chat_think_false", "POST", "/api/chat", {**CHAT, "stream": True, "think": False})
    rec.exchange("chat_no_stream", "POST", "/api/chat", {**CHAT, "stream": False})
    rec.exchange("chat_stop", "POST", "/api/chat", {"model": MODEL_NAME, "stream": True,
                                                    "messages": [{"role": "user", "content": "Hi"}],
                                                    "options": {"num_predict": 64, "seed": 1, "temperature": 0,
                                                                "stop": ["."]}})
    rec.exchange("generate_stream", "POST", "/api/generate",
                 {"model": MODEL_NAME, "prompt": "Say hello.", "stream": True, "options": CHAT["options"]})
    rec.exchange("chat_think_true", "POST", "/api/chat", {**CHAT, "stream": True, "think": True})
    rec.exchange("chat_think_high", "POST", "/api/chat", {**CHAT, "stream": True, "think": "high"})
    rec.exchange("chat_unknown_model", "POST", "/api/chat", {**CHAT, "model": "nosuch", "stream": True})
    rec.exchange("chat_truncated_json", "POST", "/api/chat", raw=b'{"model": "smollm2", "messages": [')
    rec.exchange("pull_offline_stream", "POST", "/api/pull", {"model": "qwen3:0.6b", "stream": True})
    rec.exchange("pull_offline_no_stream", "POST", "/api/pull", {"model": "qwen3:0.6b", "stream": False})
    rec.exchange("create", "POST", "/api/create", {"model": "smollm2-ctx1k", "from": MODEL_NAME,
                                                   "parameters": {"num_ctx": 1024}, "stream": True})
    rec.exchange("show_created", "POST", "/api/show", {"model": "smollm2-ctx1k", "verbose": False})
    rec.exchange("tags_after_create", "GET", "/api/tags")
    rec.exchange("delete_post", "POST", "/api/delete", {"model": "smollm2-ctx1k"})
    rec.exchange("delete", "DELETE", "/api/delete", {"model": "smollm2-ctx1k"})
    rec.exchange("delete_again", "DELETE", "/api/delete", {"model": "smollm2-ctx1k"})
    rec.exchange("generate_unload", "POST", "/api/generate", {"model": MODEL_NAME, "keep_alive": 0, "stream": False})
    rec.exchange("ps_after_unload", "GET", "/api/ps")


def record_parallel2(rec: Recorder) -> None:
    """Parallel 2 with a 2048 context: what /api/ps and the llama-server command line say."""
    rec.exchange("parallel2_load", "POST", "/api/generate", {"model": MODEL_NAME, "stream": False})
    rec.exchange("parallel2_ps", "GET", "/api/ps")


def record_queue1(rec: Recorder) -> None:
    """OLLAMA_MAX_QUEUE=1: a burst of 4 while the model loads, then 4 more once it is loaded."""
    body = {**CHAT, "stream": True, "options": {**CHAT["options"], "num_predict": 4}}
    rec.burst("queue1_burst_cold", 4, body)
    rec.burst("queue1_burst_warm", 4, body)


def record_q8_fa_off(rec: Recorder) -> None:
    """A q8_0 KV cache with flash attention off: the load fails, and so does the next request."""
    rec.exchange("q8_fa_off_chat", "POST", "/api/chat", {**CHAT, "stream": True})
    rec.exchange("q8_fa_off_chat_again", "POST", "/api/chat", {**CHAT, "stream": True})


def record_q8_fa_auto(rec: Recorder) -> None:
    """A q8_0 KV cache with flash attention left to llama.cpp: it loads (and the log shows the flags)."""
    rec.exchange("q8_fa_auto_load", "POST", "/api/generate", {"model": MODEL_NAME, "stream": False})


SCENARIOS = {"default": record_default, "parallel2": record_parallel2, "queue1": record_queue1,
             "q8_fa_off": record_q8_fa_off, "q8_fa_auto": record_q8_fa_auto}


def _normalized(text: str, root: Path, kit: OllamaKit) -> str:
    kit_root = str(kit.bin_dir.parent)
    return text.replace(kit_root, "$KIT").replace(str(root), "$ROOT")


def main() -> int:
    """Record every scenario into real/; 1 with the reason when the kit cannot be laid out."""
    with tempfile.TemporaryDirectory(prefix="ollama-record-") as tmp:
        kit = lay_out_kit(Path(tmp) / "kit")
        if isinstance(kit, str):
            print(kit, file=sys.stderr)
            return 1
        OUT.mkdir(exist_ok=True)
        exchanges: dict[str, Any] = {}
        for name, env in SERVERS.items():
            root = Path(tmp) / name
            server = RealOllama(kit, root, root / "models", dict(env)).start()
            try:
                server.create_model()
                SCENARIOS[name](Recorder(server, exchanges))
            finally:
                server.stop()
            log = server.log_path.read_text(errors="replace")
            (OUT / f"serve_{name}.log").write_text(_normalized(log, root, kit))
            print(f"recorded {name}: {len(log.splitlines())} log lines")
        text = json.dumps(exchanges, indent=1, ensure_ascii=False) + "\n"
        (OUT / "exchanges.json").write_text(_normalized(text, Path(tmp), kit))
        print(f"wrote {len(exchanges)} exchanges to {OUT / 'exchanges.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
