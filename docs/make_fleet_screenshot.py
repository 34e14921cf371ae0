"""Render docs/screenshot-fleet.png with the app's own `--screenshot --page fleet --fleet FILE`, on a 1280x720
screen, over the real parts: two embedded llama-servers (the bundled engine and SmolLM2) as box-a and box-b,
Debian's nginx balancing them, and Debian's Prometheus scraping them beside the DCGM and node-exporter
exposition files of tests/data/fleet/ (one RTX 4090 per host, written from dcgm-exporter's documented
format: no GPU here) and a third host with only ollama-deck's exporter. Requests go through nginx while the
picture is taken, so both servers show tokens/s; a third [[server]] entry points at a port nothing listens
on, to show a down server with why.

    python docs/make_fleet_screenshot.py [OUT_DIR]      (with the engine installed: ollama-deck[engine])
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shot_support import offscreen_screen  # noqa: E402 - the scripts' folder is on sys.path

from app.backends.llama_server.engine import find_bundled_model, find_llama_server  # noqa: E402
from tests.adapters.prometheus.fleet_stack import fleet_stack  # noqa: E402
from tests.backends.llama_server.engine_server import free_port, post_json  # noqa: E402
from tests.system_fixtures import SEARCH_PATH  # noqa: E402

BODY = {"messages": [{"role": "user", "content": "Tell a story about a lighthouse keeper."}],
        "max_tokens": 32, "temperature": 0}


def keep_loading(balancer_url: str, stop: threading.Event) -> None:
    """One request after another through the balancer until `stop` (nginx alternates the servers)."""
    while not stop.is_set():
        try:
            post_json(f"{balancer_url}/v1/chat/completions", BODY, timeout_s=60)
        except OSError:
            return


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", default=str(ROOT / "docs"))
    args = ap.parse_args()
    import shutil

    binary, model = find_llama_server(), find_bundled_model()
    nginx, prometheus = shutil.which("nginx", path=SEARCH_PATH), shutil.which("prometheus", path=SEARCH_PATH)
    if binary is None or model is None or nginx is None or prometheus is None:
        print("needs the embedded engine (ollama-deck[engine]) and Debian's nginx and prometheus", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="deck-fleet-shot-"))
    out = Path(args.out_dir) / "screenshot-fleet.png"
    with fleet_stack(binary, model, Path(nginx), Path(prometheus), work) as stack:
        fleet = work / "fleet.toml"
        fleet.write_text(stack.toml(extra=f'\n[[server]]\nname = "box-c"\nurl = "http://127.0.0.1:{free_port()}"\n'
                                          'backend = "llama_server"\nhost = "box-c"\n'))
        env = dict(os.environ, PYTHONPATH=str(ROOT),
                   QT_QPA_PLATFORM=f"offscreen:configfile={offscreen_screen(work, 1280, 720)}")
        stop = threading.Event()
        loaders = [threading.Thread(target=keep_loading, args=(stack.balancer_url, stop)) for _ in range(2)]
        for loader in loaders:
            loader.start()
        try:
            subprocess.run([sys.executable, "-m", "app", "--screenshot", str(out), "--page", "fleet",
                            "--fleet", str(fleet), "--backend", "llama_server", "--url", stack.servers[0],
                            "--config-dir", str(work / "cfg")], env=env, check=True, timeout=180)
        finally:
            stop.set()
            for loader in loaders:
                loader.join(90)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
