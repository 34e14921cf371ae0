"""Render docs/screenshot-benchmark.png: the whole app (DeckApp) on its Benchmark page after a
parallel sweep 1, 2, 4, 8, 16 at 8192 tokens per slot — against the test doubles, not a real card: the stand-in `ollama`
(tests/fakes/ollama/standin_ollama.py) paced like Qwen3-14B on an RTX 4090 and running out of memory
above 22000 MiB, and a scripted RTX 4090 whose server memory is what the estimator predicts for the
server's current settings.

    QT_QPA_PLATFORM=offscreen python docs/make_benchmark_screenshot.py [OUT.png]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

import app.ui.app.main as deck_main  # noqa: E402
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from app.core.units import MIB  # noqa: E402
from shot_support import pump  # noqa: E402
from tests.fakes.scripted_gpu import DESKTOP_MIB, RTX_4090, GpuReading, ScriptedGpuBackend, idle_reading  # noqa: E402
from tests.fakes.ollama.server_fixtures import free_port, write_launcher  # noqa: E402

PACING = {"FAKE_OLLAMA_TOKENS_PER_S": "62", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "2500",
          "FAKE_OLLAMA_ANSWER_TOKENS": "48", "FAKE_OLLAMA_THINKING_TOKENS": "0",
          "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.09", "FAKE_OLLAMA_OOM_ABOVE_MIB": "22000"}
QWEN3_14B = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)




def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "docs" / "screenshot-benchmark.png"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="deck-shot-"))
    launcher = write_launcher(work / "bin")
    os.environ["PATH"] = f"{launcher.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ.update(PACING)
    deck_holder: list = []

    def reading(t: float, server_pids) -> GpuReading:
        """NVML's view: the server holds what the estimator predicts for its current settings."""
        if not server_pids or not deck_holder:
            return idle_reading()
        s = deck_holder[0].controller.settings
        est = estimate(QWEN3_14B, LoadSettings(num_ctx=s.context_length or 4096, parallel=s.num_parallel,
                                               kv_cache_type=s.kv_cache_type, flash_attention=True),
                       GpuMemory(total_bytes=int(RTX_4090.memory_total_mib) * MIB))
        server = est.total_gpu_bytes / MIB
        return GpuReading(DESKTOP_MIB + server, 96.0, 330.0 + 4.0 * s.num_parallel, 64.0, server)

    deck_main.make_gpu_backend = lambda: ScriptedGpuBackend(RTX_4090, reading)
    qt = QApplication.instance() or QApplication([])
    apply_theme(qt)
    deck = deck_main.DeckApp(argparse.Namespace(config_dir=str(work / "cfg"), url=f"http://127.0.0.1:{free_port()}",
                                                page="bench", screenshot=args.out))
    deck_holder.append(deck)
    deck.window.resize(1440, 900)
    deck.window.show_page("bench")
    deck.window.show()
    deck.start()
    page = deck.bench_page
    try:
        if not pump(qt, lambda: deck.controller.probed, 20):
            print("the server probe did not finish", file=sys.stderr)
            return 1
        editor = page.editor
        editor.model.setEditText("qwen3:14b")
        editor.parallel.setText("1, 2, 4, 8, 16")
        editor.context.setText("8192")  # the stand-in has no GPU to pick Ollama's default context by
        editor.requests.setValue(0)  # 4 requests per client, at least 8
        editor.num_predict.setValue(48)
        finished: list = []
        page.sweeps.finished.connect(finished.append)
        editor.start_button.click()
        if not pump(qt, lambda: bool(finished), 300):
            print("the sweep did not finish", file=sys.stderr)
            return 1
        pump(qt, lambda: False, 0.5)
        ok = deck.window.grab().save(args.out)
        print(f"wrote {args.out}: {finished[0].status}, "
              + ", ".join(f"parallel {r.point.parallel} {r.status}" for r in finished[0].results))
        return 0 if ok else 1
    finally:
        deck.close()


if __name__ == "__main__":
    sys.exit(main())
