"""Render docs/screenshot-dashboard.png and docs/screenshot-server.png with the app's own
`--screenshot`, attached to a stand-in `ollama serve` (tests/fakes/ollama/standin_ollama.py) started here
as another program would start it, with qwen3:14b loaded. On a machine without an NVIDIA driver
the dashboard shows its no-GPU panel and the Server page prices the server against this computer's RAM.
The offscreen screen is given 1920x1080 pixels, so the window keeps its 1440x900 default size.

    QT_QPA_PLATFORM=offscreen python docs/make_attached_screenshots.py [OUT_DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.ollama.server_fixtures import free_port, write_launcher  # noqa: E402
from shot_support import offscreen_screen, wait_for  # noqa: E402 - the scripts' folder is on sys.path



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", default=str(ROOT / "docs"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deck-shot-"))
    launcher = write_launcher(work / "bin")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA_", "FAKE_OLLAMA_"))}
    env.update(OLLAMA_HOST=f"127.0.0.1:{port}", PATH=f"{launcher.parent}{os.pathsep}{env.get('PATH', '')}",
               QT_QPA_PLATFORM=env.get("QT_QPA_PLATFORM", f"offscreen:configfile={offscreen_screen(work, 1920, 1080)}"),
               PYTHONPATH=str(ROOT))
    server = subprocess.Popen([str(launcher), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(url + "/")
        load = urllib.request.Request(url + "/api/generate", data=json.dumps({"model": "qwen3:14b"}).encode(),
                                      headers={"Content-Type": "application/json"})
        urllib.request.urlopen(load, timeout=30).read()
        for page in ("dashboard", "server"):
            out = Path(args.out_dir) / f"screenshot-{page}.png"
            subprocess.run([sys.executable, "-m", "app", "--screenshot", str(out), "--page", page, "--url", url,
                            "--config-dir", str(work / "cfg")], env=env, check=True, timeout=120)
            print(f"wrote {out}")
        return 0
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
