"""Cost of one dashboard frame with every plot live (GPU, host, and the server's slots & queue and
server-wide throughput) over a full 15-minute history, for the 1-, 5- and 15-minute windows.

Each frame appends one host sample (so the buffers changed, as in the app; the server's own
telemetry gets a sample every 1 s of that clock, as its poller does), then times
`DashboardPage.redraw_now()` (tiles + curves) plus the painting Qt does for it in the event
loop, and separately a forced repaint of the whole page. Runs offscreen (software raster).
GUI-thread CPU time (time.thread_time) is reported beside wall time because wall time on a busy
machine includes waiting for a core. Target: median app frame < 8 ms, p95 < 12 ms, GUI-thread CPU.
The machine (CPU model, cores, load average before and after) is printed with the figures; the
script only uses the page's public API, so the same file measures an older checkout too.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py [--frames 200] [--window 1 5 15] [--live-values]
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py --screenshot /tmp/dashboard.png
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py --no-gpu --no-server --screenshot /tmp/d.png
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
import PySide6  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import app as app_package  # noqa: E402
from app.adapters.aio import LoopThread  # noqa: E402
from app.adapters.telemetry.nvml import REASON_NO_LIBRARY  # noqa: E402
from app.core.telemetry_buffers import TelemetryBuffers  # noqa: E402
from app.core.server_telemetry import ServerSample, ServerTelemetryRing  # noqa: E402
from app.ui.pages.dashboard.page import DashboardPage  # noqa: E402
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC  # noqa: E402
from tests.fakes.scripted_gpu import (  # noqa: E402
    RTX_4090,
    ScriptedGpuBackend,
    fill_demo_history,
    serving_phase,
    serving_script,
    gpu_with,
)
from tests.ui.page_context import page_context_on  # noqa: E402

END_T = 10_000.0  # fill_demo_history's default end of the history (s, monotonic)
LOAD_AT_S = 30.0
SLOTS = 4


def apply_app_theme(app: QApplication) -> None:
    """The app's global dark theme when present, so the page looks as it does in the app."""
    try:
        from app.ui.widgets.theme import apply_theme
    except ImportError:
        app.setStyle("Fusion")
        return
    apply_theme(app)


def server_sample(at: float, history_start: float) -> ServerSample:
    """What a llama-server with SLOTS slots reports at `at` while the scripted serving session runs."""
    loaded, busy = serving_phase(at - history_start, LOAD_AT_S)
    wobble = math.sin(at * 0.7)
    busy_slots = (2 + int(wobble > 0.3)) if busy else 0
    waiting = int(wobble > 0.8) if busy else 0
    kv = (0.18 + 0.12 * (1 + wobble)) if busy else (0.02 if loaded else 0.0)
    generation = (busy_slots * 64.0 + 5.0 * wobble) if busy else 0.0
    prompt = (420.0 + 300.0 * wobble) if busy and wobble > 0.5 else 0.0
    return ServerSample(at=at, slots_total=SLOTS, slots_busy=busy_slots, requests_processing=busy_slots,
                        requests_deferred=waiting, kv_cache_fill=kv, prompt_tokens_per_s=prompt,
                        generation_tokens_per_s=generation, prompt_tokens_total=None, predicted_tokens_total=None)


def build(no_gpu: bool, with_server: bool, interval_s: float, history_s: float, width: int,
          height: int) -> tuple[DashboardPage, TelemetryBuffers, ServerTelemetryRing | None]:
    """A page over buffers (and a server ring) holding `history_s` of a scripted serving session."""
    buffers = TelemetryBuffers(history_s=900, interval_s=interval_s)
    if no_gpu:
        gpu = ScriptedGpuBackend(available=False, reason=REASON_NO_LIBRARY)
    else:
        gpu = ScriptedGpuBackend(script=serving_script(load_at_s=LOAD_AT_S))
    fill_demo_history(buffers, history_s, gpu=gpu, load_at_s=LOAD_AT_S, end_t=END_T)
    ring = None
    if with_server:
        ring = ServerTelemetryRing(history_s=900, interval_s=1.0)
        start = END_T - history_s
        for i in range(int(history_s) + 1):
            ring.append(server_sample(start + i, start))
    # The recorded llama-server's spec either way: without a ring its section draws nothing.
    page = DashboardPage(page_context_on(LoopThread(), backend=REPORTING_SPEC, samples=buffers, server_ring=ring,
                                         gpu=gpu_with(None if no_gpu else RTX_4090, REASON_NO_LIBRARY)))
    page.resize(width, height)
    page.show()
    QApplication.processEvents()
    return page, buffers, ring


def bench(page: DashboardPage, buffers: TelemetryBuffers, ring: ServerTelemetryRing | None, frames: int,
          app: QApplication, live_values: bool = False) -> dict[str, list[float]]:
    """Per-frame milliseconds, wall and GUI-thread CPU, for three levels of work:
    the data update alone, a frame as the app paints it (the dirty regions, through the event
    loop) and a forced repaint of the whole page (the worst case, e.g. the window uncovered).
    Each new host row repeats the newest one, or with `live_values` replays the history's rows in
    turn, so every tile's text changes every frame too."""
    last_t, row = buffers.last()
    _, history = buffers.view()
    frame_no = 0
    next_server_t = ring.latest.at + ring.interval_s if ring is not None and ring.latest else math.inf
    history_start = END_T - 900.0

    def advance() -> None:
        nonlocal last_t, next_server_t, frame_no
        last_t += buffers.interval_s
        frame_no += 1
        buffers.append_row(last_t, history[frame_no % len(history)] if live_values else row)
        if ring is not None and last_t >= next_server_t:
            ring.append(server_sample(next_server_t, history_start))
            next_server_t += ring.interval_s

    out: dict[str, list[float]] = {k: [] for k in ("update", "frame", "frame_cpu", "full", "full_cpu")}
    for i in range(frames + 10):
        advance()
        w0, c0 = time.perf_counter(), time.thread_time()
        page.redraw_now()
        w1 = time.perf_counter()
        app.processEvents()
        w2, c2 = time.perf_counter(), time.thread_time()
        advance()
        w3, c3 = time.perf_counter(), time.thread_time()
        page.redraw_now()
        page.repaint()
        w4, c4 = time.perf_counter(), time.thread_time()
        if i >= 10:  # the first frames warm caches
            out["update"].append((w1 - w0) * 1e3)
            out["frame"].append((w2 - w0) * 1e3)
            out["frame_cpu"].append((c2 - c0) * 1e3)
            out["full"].append((w4 - w3) * 1e3)
            out["full_cpu"].append((c4 - c3) * 1e3)
    return out


def p95(values: list[float]) -> float:
    """95th percentile (ms) of a list of milliseconds."""
    return sorted(values)[int(0.95 * (len(values) - 1))]


def summary(label: str, values: list[float]) -> str:
    """Median and p95 of a list of milliseconds."""
    return (f"  {label:<28} median {statistics.median(values):6.2f} ms   p95 {p95(values):6.2f} ms   "
            f"max {max(values):6.2f} ms")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or the platform's word for it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def code_revision() -> str:
    """Where the measured `app` package was imported from, and its git commit (+ if modified)."""
    root = Path(app_package.__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "app"], capture_output=True,
                               text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return str(root)
    return f"{root} at {head or '?'}{' + uncommitted changes in app/' if dirty else ''}"


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=200, help="frames measured per window (default 200)")
    parser.add_argument("--window", type=int, nargs="+", choices=(1, 5, 15), default=[1, 5, 15],
                        help="x-axis windows to measure, minutes (default: 1 5 15)")
    parser.add_argument("--interval", type=float, default=0.25, help="sampling interval (s) the history was taken at")
    parser.add_argument("--size", default="1600x1000", help="page size WIDTHxHEIGHT in px")
    parser.add_argument("--no-gpu", action="store_true", help="the page as it looks without NVML")
    parser.add_argument("--no-server", action="store_true", help="a backend without slots or server metrics")
    parser.add_argument("--live-values", action="store_true",
                        help="replay the history's rows instead of repeating the newest: every tile changes every frame")
    parser.add_argument("--screenshot", metavar="PNG", help="save a picture of the page (5 min of data) and exit")
    parser.add_argument("--estimate-mib", type=float, default=15_800.0, help="predicted VRAM line for the screenshot")
    args = parser.parse_args()
    try:
        width, height = (int(v) for v in args.size.split("x"))
    except ValueError:
        parser.error(f"--size must look like 1600x1000, got {args.size!r}")

    app = QApplication.instance() or QApplication(sys.argv)
    apply_app_theme(app)
    if args.screenshot:
        page, _, _ = build(args.no_gpu, not args.no_server, 0.5, 330.0, width, height)
        page.set_window_s(300)
        page.set_estimate_mib(args.estimate_mib)
        page.redraw_now()
        QApplication.processEvents()
        page.grab().save(args.screenshot)
        print(f"saved {args.screenshot} ({width}x{height})")
        return 0

    load_before = load_average()
    print(f"machine: {cpu_model()}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), "
          f"load average {load_before} (1/5/15 min) before")
    print(f"software: Python {platform.python_version()}, PySide6 {PySide6.__version__}, pyqtgraph {pg.__version__}, "
          f"numpy {np.__version__}, Qt platform {os.environ.get('QT_QPA_PLATFORM')}")
    print(f"code: {code_revision()}")
    page, buffers, ring = build(args.no_gpu, not args.no_server, args.interval, 900.0, width, height)
    page.set_estimate_mib(args.estimate_mib)
    curves = sum(len(p.series) for p in page.time_plots.values())
    curves += sum(len(p.series) for p in page.server.plots)
    plots = len(page.time_plots) + len(page.server.plots)
    print(f"page: {width}x{height} offscreen, {plots} plots / {curves} curves live "
          f"({'no GPU' if args.no_gpu else 'GPU'}, {'no server telemetry' if args.no_server else 'server telemetry'}), "
          f"history {len(buffers)} host samples at {args.interval:g} s"
          f"{f' + {len(ring)} server samples at 1 s' if ring is not None else ''}, {args.frames} frames per window, "
          f"{'rows replayed (tiles change every frame)' if args.live_values else 'newest row repeated'}")
    verdicts = []
    for minutes in args.window:
        page.set_window_s(minutes * 60)
        QApplication.processEvents()
        ms = bench(page, buffers, ring, args.frames, app, args.live_values)
        print(f"{minutes}-min window:")
        print(summary("data + tiles (redraw_now)", ms["update"]))
        print(summary("app frame, wall", ms["frame"]))
        print(summary("app frame, GUI-thread CPU", ms["frame_cpu"]))
        print(summary("whole-page repaint, wall", ms["full"]))
        print(summary("whole-page repaint, CPU", ms["full_cpu"]))
        ok = statistics.median(ms["frame_cpu"]) < 8.0 and p95(ms["frame_cpu"]) < 12.0
        verdicts.append(f"{minutes} min {'OK' if ok else 'OVER'}")
    print(f"load average {load_average()} (1/5/15 min) after")
    print(f"target: app frame GUI-thread CPU median < 8 ms and p95 < 12 ms -> {', '.join(verdicts)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
