"""Render docs/screenshot-server-24gib.png: the Server page pricing Qwen3-14B at 8 parallel requests on an
NVIDIA H200 that another process fills down to a 24 GiB card's worth — the card and its numbers as recorded
there (benchmarks/vram/h200_spill_ollama.json: 118,591 MiB used by the other process, 615 MiB reserved by
the driver), the runtime figure the app learnt on it (benchmarks/vram/h200_app_run/runtime_allowance.json), and
the stand-in `ollama serve` (tests/fakes/ollama/standin_ollama.py, version 0.32.15) with qwen3:14b loaded,
attached as another program would have started it. Those settings spill: the fit panel shows the layers it
keeps on the GPU, the grown compute buffer, the driver's reserve and where the runtime figure came from.

    python docs/make_server_gpu_screenshot.py [OUT.png] [--width 1440 --height 900 --scale 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from shot_support import offscreen_platform, wait_for  # noqa: E402 - the scripts' folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OTHERS_MIB = 118_591.0  # the other process, as NVML memory info v2 "used" read it before each load
RESERVED_MIB = 615.0625  # the driver's reserve, NVML memory info v2 "reserved"
SERVER_MIB = 15_514.0  # the real server at parallel 1, Ollama's default context (h200_spill_ollama.json)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "docs" / "screenshot-server-24gib.png"))
    ap.add_argument("--width", type=int, default=1440)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--parallel", type=int, default=8)
    args = ap.parse_args()
    if args.scale != 1.0:
        os.environ["QT_SCALE_FACTOR"] = str(args.scale)
    os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())

    from PySide6.QtWidgets import QApplication

    import app.ui.app.main as deck_main
    from app.core.telemetry import GpuInfo
    from app.ui.widgets.theme import apply_theme
    from shot_support import pump
    from tests.fakes.ollama.server_fixtures import free_port, write_launcher
    from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend

    work = Path(tempfile.mkdtemp(prefix="deck-shot-"))
    cfg = work / "cfg"
    cfg.mkdir()
    shutil.copy(ROOT / "benchmarks/vram/h200_app_run/runtime_allowance.json", cfg / "runtime_allowance.json")
    launcher = write_launcher(work / "bin")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLAMA_", "FAKE_OLLAMA_"))}
    env.update(OLLAMA_HOST=f"127.0.0.1:{port}", PYTHONPATH=str(ROOT))
    server = subprocess.Popen([str(launcher), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    h200 = GpuInfo("NVIDIA H200", "580.159.04", 143_771.0, index=0, uuid="GPU-h200-0000")

    def reading(t: float, server_pids) -> GpuReading:
        ours = SERVER_MIB if server_pids else 0.0
        return GpuReading(OTHERS_MIB + ours, 3.0, 118.0, 34.0, ours if server_pids else float("nan"), RESERVED_MIB)

    deck_main.make_gpu_backend = lambda: ScriptedGpuBackend(h200, reading)
    try:
        wait_for(url + "/")
        load = urllib.request.Request(url + "/api/generate", data=json.dumps({"model": "qwen3:14b"}).encode(),
                                      headers={"Content-Type": "application/json"})
        urllib.request.urlopen(load, timeout=30).read()
        qt = QApplication.instance() or QApplication([])
        apply_theme(qt)
        deck = deck_main.DeckApp(argparse.Namespace(config_dir=str(cfg), url=url, page="server",
                                                    screenshot=args.out))
        deck.window.resize(int(args.width / args.scale), int(args.height / args.scale))
        deck.window.show_page("server")
        deck.window.show()
        deck.start()
        try:
            page = deck.server_page
            if not pump(qt, lambda: deck.controller.probed and page.fit_panel.estimate is not None, 30):
                print("the server page priced nothing", file=sys.stderr)
                return 1
            chosen = deck.controller.settings.replace(num_parallel=args.parallel)
            page.form.set_settings(chosen)  # as typed into the form, which the fit panel prices
            page.fit_panel.set_settings(chosen)
            pump(qt, lambda: False, 3.0)
            est = page.fit_panel.estimate
            ok = deck.window.grab().save(args.out)
            print(f"wrote {args.out}: " + (f"{est.verdict.value}, {est.layers_on_gpu}/{est.layers_total} layers, "
                                           f"{est.total_gpu_bytes / 2**20:.0f} MiB" if est else "no estimate"))
            return 0 if ok else 1
        finally:
            deck.close()
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
