"""Cost of one full dashboard redraw with every plot live and a full 15-minute history.

Each frame appends one sample (so the buffers changed, as in the app), then times
`DashboardPage.redraw_now()` (tiles + setData on every curve) plus the painting Qt does for it
in the event loop, and separately a forced repaint of the whole page. Runs offscreen (software
raster). GUI-thread CPU time is reported beside wall time because wall time on a busy machine
includes waiting for a core. Target: median app frame < 8 ms.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py [--frames 300]
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py --screenshot /tmp/dashboard.png
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_dashboard_redraw.py --no-gpu --screenshot /tmp/dashboard-nogpu.png
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app.adapters.telemetry.nvml import REASON_NO_LIBRARY  # noqa: E402
from app.adapters.telemetry.sampler import TelemetryBuffers  # noqa: E402
from app.ui.pages.dashboard.page import DashboardPage  # noqa: E402
from tests.fakes.scripted_gpu import RTX_4090, ScriptedGpuBackend, fill_demo_history, serving_script  # noqa: E402


def apply_app_theme(app: QApplication) -> None:
    """The app's global dark theme when present, so the page looks as it does in the app."""
    try:
        from app.ui.app.theme import apply_theme
    except ImportError:
        app.setStyle("Fusion")
        return
    apply_theme(app)


def build(
    no_gpu: bool, interval_s: float, history_s: float, width: int, height: int
) -> tuple[DashboardPage, TelemetryBuffers]:
    """A page over buffers holding `history_s` of a scripted serving session."""
    buffers = TelemetryBuffers(history_s=900, interval_s=interval_s)
    if no_gpu:
        gpu = ScriptedGpuBackend(available=False, reason=REASON_NO_LIBRARY)
    else:
        gpu = ScriptedGpuBackend(script=serving_script(load_at_s=30.0))
    fill_demo_history(buffers, history_s, gpu=gpu, load_at_s=30.0)
    page = DashboardPage(buffers, None if no_gpu else RTX_4090, REASON_NO_LIBRARY if no_gpu else "")
    page.resize(width, height)
    page.show()
    QApplication.processEvents()
    return page, buffers


def bench(page: DashboardPage, buffers: TelemetryBuffers, frames: int, app: QApplication) -> dict[str, list[float]]:
    """Per-frame milliseconds, wall and GUI-thread CPU, for three levels of work:
    the data update alone, a frame as the app paints it (the dirty regions, through the event
    loop) and a forced repaint of the whole page (the worst case, e.g. the window uncovered)."""
    last_t, row = buffers.last()
    out: dict[str, list[float]] = {k: [] for k in ("update", "frame", "frame_cpu", "full", "full_cpu")}
    for i in range(frames + 10):
        last_t += buffers.interval_s
        buffers.append_row(last_t, row)
        w0, c0 = time.perf_counter(), time.thread_time()
        page.redraw_now()
        w1 = time.perf_counter()
        app.processEvents()
        w2, c2 = time.perf_counter(), time.thread_time()
        last_t += buffers.interval_s
        buffers.append_row(last_t, row)
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


def summary(label: str, values: list[float]) -> str:
    """Median and p95 of a list of milliseconds."""
    values = sorted(values)
    p95 = values[int(0.95 * (len(values) - 1))]
    return f"{label:<28} median {statistics.median(values):6.2f} ms   p95 {p95:6.2f} ms   max {values[-1]:6.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--interval", type=float, default=0.25, help="sampling interval (s) the history was taken at")
    parser.add_argument("--size", default="1600x1000", help="page size WIDTHxHEIGHT in px")
    parser.add_argument("--no-gpu", action="store_true", help="the page as it looks without NVML")
    parser.add_argument("--screenshot", metavar="PNG", help="save a picture of the page (5 min of data) and exit")
    parser.add_argument("--estimate-mib", type=float, default=15_800.0, help="predicted VRAM line for the screenshot")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    app = QApplication.instance() or QApplication(sys.argv)
    apply_app_theme(app)
    if args.screenshot:
        page, _ = build(args.no_gpu, 0.5, 330.0, width, height)
        page.set_window_s(300)
        page.set_estimate_mib(args.estimate_mib)
        page.redraw_now()
        QApplication.processEvents()
        page.grab().save(args.screenshot)
        print(f"saved {args.screenshot} ({width}x{height})")
        return 0

    page, buffers = build(args.no_gpu, args.interval, 900.0, width, height)
    page.set_window_s(900)
    page.set_estimate_mib(args.estimate_mib)
    points = len(buffers)
    curves = sum(len(p.series) for p in page.time_plots.values())
    print(f"dashboard redraw: {width}x{height} offscreen, 15-min window, {points} samples x {curves} curves, "
          f"{args.frames} frames, {'no GPU' if args.no_gpu else 'GPU plots live'}")
    ms = bench(page, buffers, args.frames, app)
    print(summary("data + tiles (redraw_now)", ms["update"]))
    print(summary("app frame, wall", ms["frame"]))
    print(summary("app frame, GUI-thread CPU", ms["frame_cpu"]))
    print(summary("whole-page repaint, wall", ms["full"]))
    print(summary("whole-page repaint, CPU", ms["full_cpu"]))
    verdict = "OK" if statistics.median(ms["frame_cpu"]) < 8.0 else "OVER"
    print(f"target: median app frame < 8 ms of GUI-thread CPU -> {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
