"""Does the Prompt console keep the window responsive while it renders a fast stream?

A stand-in Ollama streams a long reply (thinking, then answer) at a fixed rate into the real
ConsolePage (real socket, real LoopThread, real widgets, offscreen). A 5 ms precise QTimer on the
GUI thread measures how late each tick fires: any work that blocks the event loop (appending
text, relayout, painting) shows up as lateness. Reported: the worst stall and the 99th percentile,
GUI-thread CPU share, and the same for an idle page as a baseline; then a 32-way burst (every
reply at the same rate, 32 slots) to show the cost does not grow with the token rate.
Target: worst stall < 50 ms (no visible freeze) at 200 tokens/s.

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_console_stream.py
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_console_stream.py --rate 200 --seconds 8 --burst 32
    QT_QPA_PLATFORM=offscreen python benchmarks/bench_console_stream.py --screenshot /tmp/console-mid.png
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.adapters.aio import LoopThread  # noqa: E402
from app.backends.ollama.client import OllamaClient  # noqa: E402
from app.backends.ollama.supervisor import ServerSupervisor  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402
from app.core.throughput import TokenMeter  # noqa: E402
from app.ui.pages.prompt.page import ConsolePage  # noqa: E402
from app.ui.server.controller import ServerController  # noqa: E402
from app.ui.app.gc_policy import GuiThreadCollection  # noqa: E402
from app.core.server.url import settings_for_url  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from tests.ui.page_context import page_context_on  # noqa: E402

TICK_MS = 5
ROOT = Path(__file__).resolve().parents[1]
# The stand-in runs in its own process, as Ollama does, so its threads do not share our GIL.
SERVER = """
import sys, json
sys.path.insert(0, {root!r})
from tests.fakes.ollama.fake_ollama import FakeOllama
fake = FakeOllama(**json.loads(sys.argv[1]))
print(fake.url, flush=True)
fake.serve_forever()
"""


def start_standin(**config) -> tuple[subprocess.Popen, str]:
    """A stand-in Ollama in a child process; returns it and its URL."""
    import json

    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(root=str(ROOT)), json.dumps(config)],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


class StallProbe:
    """A 5 ms timer on the GUI thread; records how late each tick came (ms)."""

    def __init__(self) -> None:
        self.lateness_ms: list[float] = []
        self._timer = QTimer()
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._last = 0.0
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> None:
        self.lateness_ms.clear()
        self._last = time.perf_counter()
        self._cpu0, self._wall0 = time.thread_time(), self._last
        self._timer.start()

    def stop(self) -> tuple[float, float]:
        """Stop; returns (wall seconds, GUI-thread CPU seconds) since start."""
        self._timer.stop()
        return time.perf_counter() - self._wall0, time.thread_time() - self._cpu0

    def skip(self) -> None:
        """Do not count the time since the last tick (work done on purpose, outside the stream)."""
        self._last = time.perf_counter()

    def _tick(self) -> None:
        now = time.perf_counter()
        self.lateness_ms.append(max(0.0, (now - self._last) * 1e3 - TICK_MS))
        self._last = now


def pump_until(app: QApplication, done, timeout_s: float) -> None:
    """Run the event loop until done() or the timeout."""
    end = time.monotonic() + timeout_s
    while not done() and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.0005)  # let other threads run, as an idle event loop would


def streamed(run) -> int:
    """Tokens the run's replies delivered."""
    return sum(o.stats.streamed_tokens for o in run.outcomes.values())


def report(name: str, probe: StallProbe, wall_s: float, cpu_s: float, tokens: int | None = None) -> None:
    late = sorted(probe.lateness_ms)
    p99 = late[int(0.99 * (len(late) - 1))] if late else float("nan")
    rate = f"{tokens:6d} tokens in {wall_s:4.1f} s" if tokens is not None else " " * 20
    print(f"{name:<28} {rate}  ticks {len(late):5d}  stall worst {late[-1]:6.1f} ms  p99 {p99:5.1f} ms  "
          f"median {statistics.median(late):4.1f} ms  GUI CPU {cpu_s / wall_s * 100:5.1f} %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="tokens/s of each reply (default 200)")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of the single stream (default 8)")
    parser.add_argument("--burst", type=int, default=32, help="copies for the burst run (0 skips it)")
    parser.add_argument("--screenshot", help="save the page mid-stream to this PNG")
    parser.add_argument("--no-freeze", action="store_true",
                        help="skip gc.freeze(), to see full garbage collections stall the window")
    parser.add_argument("--auto-gc", action="store_true",
                        help="leave collection automatic (on any thread) instead of the app's GUI-thread timer")
    args = parser.parse_args()

    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    tokens = int(args.rate * args.seconds)
    server, url = start_standin(tokens_per_s=args.rate, thinking_tokens=tokens // 4,
                                answer_tokens=tokens - tokens // 4, num_parallel=max(1, args.burst))
    loop = LoopThread()
    controller = ServerController(loop, None, OllamaClient, lambda _s: None)
    controller.attach_supervisor(ServerSupervisor(settings_for_url(ServerSettings(), url),
                                                  on_status=controller.on_status, on_log=controller.on_log))
    page = ConsolePage(page_context_on(loop, server=controller, meter=TokenMeter()))
    page.resize(1270, 850)
    page.show()
    controller.probe()
    pump_until(app, lambda: page.controls.thinking_supported is not None, 10)
    if not args.no_freeze:
        gc.freeze()  # as run_gui does once the window is built (see app/ui/app/main.py)
    collection = GuiThreadCollection()
    if not args.auto_gc:
        collection.start()  # as DeckApp.start does: cyclic garbage is collected on the GUI thread only
    probe = StallProbe()

    probe.start()
    pump_until(app, lambda: False, 2.0)
    report("idle page", probe, *probe.stop())

    page.controls.set_think(True)
    page.prompt_edit.setPlainText("Explain why decode speed is bounded by memory bandwidth.")
    print(f"stand-in Ollama at {args.rate:g} tokens/s per reply; {tokens} tokens per reply "
          f"({tokens // 4} thinking)")
    probe.start()
    run = page.send()
    if args.screenshot:
        pump_until(app, lambda: len(page.conversation.turns[-1].reply.answer_text()) > 400, args.seconds)
        page.grab().save(args.screenshot)
        probe.skip()  # grabbing the whole page is the screenshot's cost, not the stream's
    pump_until(app, lambda: page.run is None, args.seconds * 3 + 10)
    wall, cpu = probe.stop()
    report(f"chat, 1 × {args.rate:g} tok/s", probe, wall, cpu, streamed(run))

    if args.burst:
        page.set_mode("burst")
        page.copies.setValue(args.burst)
        page.controls.set_think(False)
        page.controls.num_predict.setValue(int(args.rate * 3))  # 3 s per reply
        probe.start()
        run = page.send()
        pump_until(app, lambda: page.run is None, 60)
        wall, cpu = probe.stop()
        report(f"burst, {args.burst} × {args.rate:g} tok/s", probe, wall, cpu, streamed(run))
    page.shutdown()
    controller.shutdown()
    loop.stop()
    collection.stop()
    server.terminate()
    server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
