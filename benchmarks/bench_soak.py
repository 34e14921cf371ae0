"""Does the whole app stay flat over a long session? Memory growth and the worst stalls.

The real composition root (DeckApp: every page, the sampler, the server controller, the stores
in a throw-away config folder) runs offscreen against a stand-in Ollama in its own process, with
the dashboard shown and redrawing. During the soak:
  * a concurrent load: `--clients` closed-loop streaming clients through the backend's load client
    on the app's own asyncio loop thread, for the whole run;
  * a burst from the Prompt page every `--burst-every` seconds (`--copies` identical prompts);
  * a 5 ms precise QTimer on the GUI thread and a 10 ms ticker on the asyncio loop thread record
    how late each tick comes: anything that blocks either loop shows up as lateness (a stall).
RSS is sampled every 5 s. Reported: RSS at the start, after the warm-up, at the end, the growth
rate after the warm-up (least-squares slope, MiB/min), the worst and 99th-percentile stall of
each loop, and how many requests and bursts completed (and failed).

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_soak.py                  # 15 minutes
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_soak.py --minutes 2 --warmup-minutes 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import psutil  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.core.bench.workload import LoadPlan  # noqa: E402
from app.services.bench.loadgen import LoadGenerator  # noqa: E402
from app.ui.app.main import DeckApp  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GUI_TICK_MS = 5
LOOP_TICK_S = 0.010
RSS_EVERY_S = 5.0
# The stand-in runs in its own process, as Ollama does, so its threads do not share our GIL.
SERVER = """
import sys, json
sys.path.insert(0, {root!r})
from tests.fakes.ollama.fake_ollama import FakeOllama
fake = FakeOllama(**json.loads(sys.argv[1]))
fake.requests = type("Forget", (list,), {{"append": lambda self, item: None}})()  # a soak must not grow the server
print(fake.url, flush=True)
fake.serve_forever()
"""


def start_standin(**config: object) -> tuple[subprocess.Popen, str]:
    """A stand-in Ollama in a child process; returns it and its URL."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(root=str(ROOT)), json.dumps(config)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


class Lateness:
    """How late ticks came, in a histogram allocated up front (0.05 ms bins to 5 s): a soak must
    not measure its own growing list of samples as the app's memory growth."""

    BIN_MS = 0.05
    TOP_MS = 5000.0

    def __init__(self) -> None:
        self.counts = np.zeros(int(self.TOP_MS / self.BIN_MS) + 1, dtype=np.int64)
        self.counts.fill(0)  # touch every page now, so RSS does not grow as bins are first hit
        self.worst_ms = 0.0
        self.ticks = 0

    def add(self, late_ms: float) -> None:
        """Count one tick that came late_ms late."""
        self.ticks += 1
        self.worst_ms = max(self.worst_ms, late_ms)
        self.counts[min(len(self.counts) - 1, int(late_ms / self.BIN_MS))] += 1

    def quantile(self, q: float) -> float:
        """The q-quantile (0-1) in ms, to the bin's upper edge."""
        if not self.ticks:
            return float("nan")
        index = int(np.searchsorted(np.cumsum(self.counts), q * self.ticks, side="left"))
        return min(self.worst_ms, (index + 1) * self.BIN_MS)

    def summary(self) -> str:
        """ticks, worst, p99, p99.9 as one line."""
        return (f"{self.ticks} ticks, worst stall {self.worst_ms:.0f} ms, p99 {self.quantile(0.99):.1f} ms, "
                f"p99.9 {self.quantile(0.999):.1f} ms")


class GuiStalls:
    """A 5 ms precise timer on the GUI thread; how late each tick came."""

    def __init__(self) -> None:
        self.lateness = Lateness()
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(GUI_TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._last = time.perf_counter()

    def start(self) -> None:
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lateness.add(max(0.0, (now - self._last) * 1e3 - GUI_TICK_MS))
        self._last = now


async def loop_stalls(into: Lateness, stop: asyncio.Event) -> None:
    """On the app's asyncio loop: how late each 10 ms sleep woke up."""
    while not stop.is_set():
        before = time.perf_counter()
        await asyncio.sleep(LOOP_TICK_S)
        into.add(max(0.0, (time.perf_counter() - before - LOOP_TICK_S) * 1e3))


async def background_load(deck: DeckApp, url: str, model: str, clients: int, stop: asyncio.Event,
                          counts: dict[str, int]) -> None:
    """Closed-loop streaming clients through the backend's load client until stop is set."""
    async with LoadGenerator(url, deck.backend.load_client) as generator:
        while not stop.is_set():
            plan = LoadPlan(model=model, concurrency=clients, requests=clients * 4, warmup_requests=0,
                            num_predict=64)
            result = await generator.run(plan)
            counts["ok"] += sum(1 for r in result.records if r.ok)
            counts["failed"] += sum(1 for r in result.records if not r.ok)


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB) points, in MiB per minute."""
    if len(points) < 2:
        return float("nan")
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in points) / den * 60.0 if den else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="length of the soak (default 15)")
    parser.add_argument("--warmup-minutes", type=float, default=2.0,
                        help="growth is measured after this (caches and pools fill first; default 2)")
    parser.add_argument("--burst-every", type=float, default=30.0, help="seconds between bursts (default 30)")
    parser.add_argument("--copies", type=int, default=8, help="prompts per burst (default 8)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent load clients (default 4)")
    parser.add_argument("--rate", type=float, default=100.0, help="tokens/s of each stand-in reply (default 100)")
    parser.add_argument("--rss-csv", help="also write the RSS samples (seconds, MiB) to this CSV file")
    parser.add_argument("--tracemalloc", type=int, metavar="N", default=0,
                        help="trace Python allocations and print the N sites that grew most after the warm-up "
                             "(slows the app: for finding a leak, not for the stall figures)")
    args = parser.parse_args()
    if args.tracemalloc:
        tracemalloc.start(8)

    server, url = start_standin(tokens_per_s=args.rate, thinking_tokens=40, answer_tokens=120,
                                num_parallel=args.clients + args.copies)
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    config = tempfile.mkdtemp(prefix="deck-soak-")
    deck = DeckApp(argparse.Namespace(config_dir=config, url=url, page="dashboard", screenshot=None, scale=None))
    deck.window.show_page("dashboard")
    deck.window.show()
    gc.freeze()  # as run_gui does once the window is built
    deck.start()
    me = psutil.Process()

    end_probe = time.monotonic() + 20
    while not deck.controller.probed and time.monotonic() < end_probe:
        app.processEvents()
        time.sleep(0.005)
    deck.console_page.refresh_models()
    while not deck.console_page.controls.model() and time.monotonic() < end_probe:
        app.processEvents()
        time.sleep(0.005)
    model = deck.console_page.controls.model()
    if not model:
        print("the app found no model on the stand-in server", file=sys.stderr)
        return 1
    page = deck.console_page
    page.set_mode("burst")
    page.copies.setValue(args.copies)
    page.prompt_edit.setPlainText("Why is decode speed bounded by memory bandwidth? Answer briefly.")

    stop = asyncio.Event()
    loop_late = Lateness()
    counts = {"ok": 0, "failed": 0}
    deck.loop.submit(loop_stalls(loop_late, stop))
    load = deck.loop.submit(background_load(deck, url, model, args.clients, stop, counts))
    gui = GuiStalls()
    gui.start()

    started = time.monotonic()
    length_s, warm_s = args.minutes * 60.0, args.warmup_minutes * 60.0
    # Allocated up front for the same reason as Lateness: one row per RSS_EVERY_S.
    rss: list[tuple[float, float]] = [(0.0, 0.0)] * (int(length_s / RSS_EVERY_S) + 2)
    rss_count = 0
    bursts = {"sent": 0, "replies ok": 0, "replies failed": 0}
    counted: set[int] = set()
    next_rss = next_burst = started
    warm_snapshot: tracemalloc.Snapshot | None = None
    print(f"soak: {args.minutes:g} min against a stand-in Ollama at {url} ({model}); dashboard live, "
          f"{args.clients} load clients, a {args.copies}-prompt burst every {args.burst_every:g} s", flush=True)
    while (now := time.monotonic()) - started < length_s:
        app.processEvents()
        if now >= next_rss:
            if rss_count < len(rss):
                rss[rss_count] = (now - started, me.memory_info().rss / 2**20)
                rss_count += 1
            next_rss += RSS_EVERY_S
            if args.tracemalloc and warm_snapshot is None and now - started >= warm_s:
                warm_snapshot = tracemalloc.take_snapshot()
        summary = page.burst_view.summary
        if summary is not None and page.run is None and id(summary) not in counted:
            counted.add(id(summary))
            bursts["replies ok"] += summary.completed
            bursts["replies failed"] += summary.failed + summary.stopped
        if now >= next_burst:
            if page.run is None:
                if page.send() is not None:
                    bursts["sent"] += 1
            next_burst += args.burst_every
        time.sleep(0.0005)  # let other threads run, as an idle event loop would
    gui.stop()
    if warm_snapshot is not None:
        grown = tracemalloc.take_snapshot().compare_to(warm_snapshot, "traceback")
        print(f"Python allocations that grew most after the warm-up (of {len(grown)} sites):")
        for stat in grown[:args.tracemalloc]:
            print(f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks")
            for line in stat.traceback.format()[-6:]:
                print(f"      {line}")
    deck.loop.loop.call_soon_threadsafe(stop.set)
    try:
        load.result(timeout=120)
    except Exception as exc:  # noqa: BLE001 - reported, the figures above still stand
        print(f"the background load ended with {type(exc).__name__}: {exc}")
    deck.close()
    server.terminate()
    server.wait(10)

    rss = rss[:rss_count]
    if args.rss_csv:
        Path(args.rss_csv).write_text("seconds,rss_mib\n" + "".join(f"{t:.1f},{v:.2f}\n" for t, v in rss))
    warm = [p for p in rss if p[0] >= warm_s]
    print(f"RSS: start {rss[0][1]:.0f} MiB, after {args.warmup_minutes:g} min warm-up "
          f"{warm[0][1] if warm else float('nan'):.0f} MiB, end {rss[-1][1]:.0f} MiB, peak "
          f"{max(v for _t, v in rss):.0f} MiB; growth after warm-up {slope_per_min(warm):+.2f} MiB/min")
    print(f"GUI thread: {gui.lateness.summary()}")
    print(f"asyncio loop: {loop_late.summary()}")
    print(f"load: {counts['ok']} requests ok, {counts['failed']} failed; bursts sent {bursts['sent']}, "
          f"their replies {bursts['replies ok']} ok, {bursts['replies failed']} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
