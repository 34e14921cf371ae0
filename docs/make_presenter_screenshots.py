"""Render the presenter view offscreen at the sizes a talk meets — 1280×720, 853×480 (a 1280×720 projector at
--scale 1.5) and 1920×1080 — during the built-in script's "Eight users now" step, on a machine with a GPU
(a scripted RTX 4090 serving Qwen3-14B, see tests/fakes/scripted_gpu.py) and on one without (host RAM, the
embedded engine's SmolLM2), plus a failed and a finished step; a minute of realistic readings feeds the graphs. Last, the view before anything
ran, on Ollama (no script, no readings: em dashes).

    QT_QPA_PLATFORM=offscreen python docs/make_presenter_screenshots.py [OUT_DIR]

The pictures land in OUT_DIR (default /tmp/presenter-shots) as presenter-<variant>-<W>x<H>.png.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.adapters.aio import LoopThread  # noqa: E402
from app.adapters.demo_script import load_script  # noqa: E402
from app.backends.llama_server.spec import LLAMA_SERVER  # noqa: E402
from app.backends.ollama.spec import OLLAMA  # noqa: E402
from app.core.demo.live import LiveRequests  # noqa: E402
from app.core.demo.script import StepFailure, StepResult, StepState  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402
from app.core.server_telemetry import ServerSample, ServerTelemetryRing  # noqa: E402
from app.core.telemetry_buffers import Channel, TelemetryBuffers  # noqa: E402
from app.ui.pages.context import PageContext  # noqa: E402
from app.ui.presenter.view import PresenterView  # noqa: E402
from app.ui.server.controller import ServerController  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from shot_support import pump  # noqa: E402
from tests.fakes.scripted_gpu import RTX_4090, gpu_with  # noqa: E402
from tests.ui.page_context import page_context_on  # noqa: E402

SIZES = ((1280, 720), (853, 480), (1920, 1080))
NO_GPU_REASON = "No NVIDIA driver found (libnvidia-ml.so could not be loaded) — GPU graphs are off; everything " \
                "else works."
HISTORY_S = 60.0
TICK_S = 0.25


class FakeClock:
    """The view's clock, advanced by hand so a minute of readings takes no minute."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def samples_for(gpu: bool) -> TelemetryBuffers:
    """A minute at 2 Hz: idle, then the burst from 20 s before now (VRAM and utilisation up, RAM up a little)."""
    buffers = TelemetryBuffers(history_s=900, interval_s=0.5)
    for i in range(int(HISTORY_S / 0.5) + 1):
        t = 1000.0 - HISTORY_S + i * 0.5
        busy = t > 1000.0 - 20.0
        row = np.full(Channel.COUNT, math.nan)
        if gpu:
            row[Channel.GPU_MEM_USED_MIB] = 15_155.0 + (420.0 if busy else 0.0) + 30 * math.sin(i / 5)
            row[Channel.GPU_MEM_TOTAL_MIB] = RTX_4090.memory_total_mib
            row[Channel.GPU_UTIL_PCT] = (94.0 + 3 * math.sin(i / 3)) if busy else 3.0
        row[Channel.RAM_USED_MIB] = 5_400.0 + (650.0 if busy else 0.0) + 20 * math.sin(i / 4)
        row[Channel.RAM_TOTAL_MIB] = 15_872.0
        buffers.append_row(t, row)
    return buffers


def opened(app: QApplication, context: PageContext, width: int, height: int) -> PresenterView:
    """A presenter view of width x height over `context`, shown."""
    view = PresenterView(context)
    view.resize(width, height)
    view.show()
    pump(app, view.isVisible, 5.0)
    return view


def grab(app: QApplication, view: PresenterView, path: Path, written: list[Path]) -> None:
    """Let the view settle, then save its picture."""
    pump(app, lambda: False, 0.3)
    view.grab().save(str(path))
    written.append(path)


def closed(view: PresenterView) -> None:
    view.shutdown()
    view.close()
    view.deleteLater()


def play_a_minute(view: PresenterView, aggregate: float, per_request: float) -> None:
    """A minute of the burst step at the view's redraw rate, on its own clock: idle, then eight users from
    20 s before now."""
    clock = FakeClock()
    view._clock = clock  # a minute of history at once
    for i in range(int(HISTORY_S / TICK_S)):
        clock.now = 1000.0 - HISTORY_S + i * TICK_S
        if clock.now > 1000.0 - 20.0:
            ramp = min(1.0, (clock.now - 980.0) / 3.0)
            wobble = 1.0 + 0.05 * math.sin(i / 2.0)
            view.set_live(LiveRequests(in_flight=8, sent=8, finished=0, per_request_tps=per_request * wobble,
                                       ttft_ms=182.0, aggregate_tps=aggregate * ramp * wobble))
        view._tick()


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/presenter-shots")
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    script = load_script("builtin")
    variants = {
        "gpu": dict(gpu=True, model="/models/Qwen3-14B-Q4_K_M.gguf", parallel=8, context=8192, rate=(520.0, 66.0),
                    estimate=15_900.0),
        "nogpu": dict(gpu=False, model="/models/SmolLM2-360M-Instruct-Q8_0.gguf", parallel=4, context=2048,
                      rate=(96.0, 14.2), estimate=720.0),
    }
    written: list[Path] = []
    with LoopThread() as loop:
        for name, v in variants.items():
            settings = ServerSettings(backend=LLAMA_SERVER.name, num_parallel=int(v["parallel"]),
                                      context_length=int(v["context"])).with_options(model_path=str(v["model"]))
            server = ServerController(loop, None, LLAMA_SERVER.catalog, lambda _s: None, last_good=settings)
            ring = None
            if v["gpu"]:  # the server's own slot count; without it the view says it counts the -np setting
                ring = ServerTelemetryRing()
                ring.append(ServerSample(at=1000.0, slots_total=int(v["parallel"]), slots_busy=8,
                                         requests_processing=8, requests_deferred=0, kv_cache_fill=0.4,
                                         prompt_tokens_per_s=None, generation_tokens_per_s=None,
                                         prompt_tokens_total=None, predicted_tokens_total=None))
            context = page_context_on(loop, backend=LLAMA_SERVER, server=server,
                                      gpu=gpu_with(RTX_4090 if v["gpu"] else None, NO_GPU_REASON),
                                      samples=samples_for(bool(v["gpu"])), server_ring=ring)
            aggregate, per_request = v["rate"]
            for width, height in SIZES:
                view = opened(app, context, width, height)
                view.set_script(script)
                view.set_estimate_mib(float(v["estimate"]))
                view.show_step(1, StepState.RUNNING, None)
                play_a_minute(view, aggregate, per_request)
                view.set_notice("Step 2 still running: Esc stops it")
                grab(app, view, out / f"presenter-{name}-{width}x{height}.png", written)
                if (width, height) == (853, 480):
                    view.show_step(3, StepState.FAILED, StepResult(
                        StepState.FAILED, reason="SmolLM2-360M-Instruct cannot think: the A/B needs a model "
                                                 "with the thinking capability (e.g. Qwen3)",
                        failure=StepFailure.CANNOT_THINK))
                    view.set_notice("")
                    grab(app, view, out / f"presenter-{name}-failed-{width}x{height}.png", written)
                    view.show_step(1, StepState.DONE, StepResult(StepState.DONE,
                                                                 headline=f"{aggregate:.0f} tok/s across 8 users"))
                    grab(app, view, out / f"presenter-{name}-done-{width}x{height}.png", written)
                closed(view)
            server.shutdown()
        # Presenter mode before anything ran, on Ollama (its settings' names are long): em dashes, no script.
        settings = ServerSettings(backend=OLLAMA.name, num_parallel=4, context_length=32768, kv_cache_type="q8_0",
                                  flash_attention="on")
        server = ServerController(loop, None, OLLAMA.catalog, lambda _s: None, last_good=settings)
        context = page_context_on(loop, server=server, gpu=gpu_with(RTX_4090), samples=TelemetryBuffers())
        for width, height in ((853, 480), (1280, 720)):
            view = opened(app, context, width, height)
            grab(app, view, out / f"presenter-idle-ollama-{width}x{height}.png", written)
            closed(view)
        server.shutdown()
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
