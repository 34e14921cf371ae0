"""A stand-in `llama-server` for the cases the real one passes too quickly to observe: a model that
takes seconds to load. It replays what the real server was recorded answering
(tests/data/llama_server/health.json, written by record.py): GET /health 503 "Loading model" with
its `Server: llama.cpp` header for FAKE_LLAMA_LOAD_S seconds, then 200 {"status":"ok"}, and
/props with the -m it was given; FAKE_LLAMA_EARLY_LINES (newline-separated) are written before its own two
log lines; FAKE_LLAMA_DIE_BY=SIGILL (a signal's name) makes it die by that signal while it loads. Where it differs: it loads nothing and serves no completions."""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "data" / "llama_server" / "health.json").read_text(encoding="utf-8"))


def _handler(model: str, ready_at: float) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
            loaded = time.monotonic() >= ready_at
            if self.path == "/health":
                answer = RECORDED["ready" if loaded else "loading"]
                self._send(answer["status"], answer["body"], answer["server"])
            elif self.path == "/props" and loaded:
                self._send(200, {**RECORDED["props"], "model_path": model, "model_alias": model}, "llama.cpp")
            else:
                self._send(*((404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
                             if loaded else (503, RECORDED["loading"]["body"])), "llama.cpp")

        def _send(self, status: int, body: Any, server: str) -> None:
            data = json.dumps(body).encode()
            self.send_response_only(status)
            self.send_header("Server", server)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return None

    return Handler


def main() -> int:
    """Serve like a loading, then loaded, llama-server until SIGTERM."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-m", "--model", default="")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args, _rest = parser.parse_known_args()
    load_s = float(os.environ.get("FAKE_LLAMA_LOAD_S", "0"))
    server = http.server.ThreadingHTTPServer((args.host, args.port), _handler(args.model, time.monotonic() + load_s))
    for line in filter(None, os.environ.get("FAKE_LLAMA_EARLY_LINES", "").split("\n")):
        print(line, flush=True)  # what a real build writes first, e.g. a CUDA build on a machine without a GPU
    print(f"0.00.000.001 I srv    load_model: loading model '{args.model}'", flush=True)
    if os.environ.get("FAKE_LLAMA_DIE_BY"):  # e.g. SIGILL: a build for another CPU dies so while loading
        os.kill(os.getpid(), signal.Signals[os.environ["FAKE_LLAMA_DIE_BY"]])
    print(f"0.00.000.002 I srv  llama_server: listening on http://{args.host}:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
