"""Draw ollama-deck's Dashboard page from a telemetry recording made by record.py.

The page, buffers and plots are the app's own; only the rows come from the recording. The
predicted-VRAM line is the estimator's price of the recorded configuration, so the image shows
prediction against measurement. Usage (offscreen is fine):
    QT_QPA_PLATFORM=offscreen python benchmarks/telemetry/render.py REC.json OUT.png [--window 60] [--until S]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app.adapters.aio import LoopThread  # noqa: E402
from app.backends.llama_server.spec import LLAMA_SERVER  # noqa: E402
from app.core.telemetry_buffers import Channel, TelemetryBuffers  # noqa: E402
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.core.telemetry import GpuInfo  # noqa: E402
from app.ui.pages.dashboard.page import DashboardPage  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from app.core.units import MIB  # noqa: E402
from tests.fakes.scripted_gpu import gpu_with  # noqa: E402
from tests.ui.page_context import page_context_on  # noqa: E402

# What record.py / run_on_gpu.sh served: benchmarks/vram/make_gguf.py's Qwen3-14B Q4_K_M file,
# 4 slots of 8192 tokens, f16 KV, flash attention on; the H200's runtime overhead measured there.
GGUF_BYTES = 8_998_902_528
H200_RUNTIME_MIB = 588


def predicted_mib(gpu_total_mib: float) -> float:
    """The estimator's price of the recorded llama-server configuration, in MiB."""
    show = json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text())
    est = estimate(shape_from_show(show, GGUF_BYTES),
                   LoadSettings(num_ctx=8192, parallel=4, kv_cache_type="f16", flash_attention=True),
                   GpuMemory(int(gpu_total_mib * MIB), runtime_overhead_bytes=H200_RUNTIME_MIB * MIB))
    return est.total_gpu_bytes / MIB


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording")
    ap.add_argument("out")
    ap.add_argument("--window", type=int, default=60, choices=(60, 300, 900))
    ap.add_argument("--until", type=float, help="draw only the rows up to this many seconds into the recording")
    args = ap.parse_args()
    rec = json.loads(Path(args.recording).read_text())
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    buffers = TelemetryBuffers(history_s=900, interval_s=rec["interval_s"])
    # by channel name: a recording made before a channel existed reads NaN (not recorded) there
    columns = [rec["channels"].index(name) if name in rec["channels"] else None for name in Channel.NAMES]
    for t, row in zip(rec["t"], rec["rows"]):
        if args.until is not None and t > args.until:
            break
        buffers.append_row(t, [math.nan if c is None or row[c] is None else row[c] for c in columns])
    g = rec["gpu"]
    loop = LoopThread()
    context = page_context_on(loop, backend=LLAMA_SERVER, samples=buffers,
                              gpu=gpu_with(GpuInfo(g["name"], g["driver"], g["memory_total_mib"])))
    page = DashboardPage(context)
    page.resize(1440, 900)
    page.show()
    page.set_window_s(args.window)
    page.set_estimate_mib(predicted_mib(g["memory_total_mib"]))
    app.processEvents()
    page.redraw_now()
    app.processEvents()
    ok = page.grab().save(args.out)
    context.server.shutdown()
    loop.stop()
    print(f"{'wrote' if ok else 'could not write'} {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
