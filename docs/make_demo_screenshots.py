"""Every page of the app running on the embedded engine (`ollama-deck --demo`: the bundled llama-server
on the bundled SmolLM2 model, on this machine's CPU): the GUI's own composition root is built, a
prompt is streamed on the Prompt page, a managed sweep over parallel 1, 2, 4 runs on the Benchmark
page, and each page is saved as docs/demo/<page>.png (plus the Server page's Slots tab and the
Benchmark page's History tab).

    QT_QPA_PLATFORM=offscreen python docs/make_demo_screenshots.py [--out docs/demo]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication, QTabWidget  # noqa: E402

from app.core.bench.stats import LatencyTargets  # noqa: E402
from app.core.bench.sweep import SweepAxes, SweepSpec  # noqa: E402
from app.core.bench.workload import LoadPlan  # noqa: E402
from app.core.server.state import ServerState  # noqa: E402
from app.ui.app.main import DeckApp  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from shot_support import pump  # noqa: E402

START_S = 120.0
SWEEP_S = 600.0
SIZE = (1440, 900)


def save(app: QApplication, deck: DeckApp, out: Path, name: str) -> None:
    """Redraw and save the window as it is now."""
    deck.dashboard.redraw_now()
    pump(app, lambda: False, 0.3)  # let layouts settle
    path = out / f"{name}.png"
    if not deck.window.grab().save(str(path)):
        raise SystemExit(f"could not write {path}")
    print(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "demo"), help="folder for the PNG files")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    with tempfile.TemporaryDirectory() as config:
        args = argparse.Namespace(config_dir=config, url=None, page="dashboard", screenshot=None, backend=None,
                                  demo=True, scale=None)
        deck = DeckApp(args)
        deck.window.resize(*SIZE)
        deck.window.show()
        deck.start()
        try:
            if not pump(app, lambda: deck.controller.status.state is ServerState.RUNNING_MANAGED, START_S):
                raise SystemExit(f"the embedded engine did not start: {deck.controller.status.message}")
            console = deck.console_page
            console.refresh_models()
            if not pump(app, lambda: bool(console.controls.model()), START_S):
                raise SystemExit("the Prompt page lists no model")
            model = console.controls.model()
            console.prompt_edit.setPlainText("In two sentences: why does a GPU decode several requests faster "
                                             "in parallel than one after another?")
            console.send()
            pump(app, lambda: console.send_button.isEnabled(), START_S)
            # The thinking switch says what the model's template allows once its capabilities are read.
            pump(app, lambda: "Reading" not in console.controls.think_reason.text(), START_S)
            deck.window.show_page("console")
            save(app, deck, out, "prompt")
            bench = deck.bench_page
            spec = SweepSpec(deck.controller.settings, SweepAxes(parallel=(1, 2, 4)),
                             LoadPlan(model=model, requests=8, num_predict=32, think=False),
                             LatencyTargets(ttft_p95_ms=2000, tpot_p95_ms=100), managed=True)
            finished: list[object] = []
            bench.sweeps.finished.connect(finished.append)
            deck.window.show_page("bench")
            bench.start_sweep(spec)
            # Half-way through, the dashboard and the Slots tab show a server at work (its last minute).
            pump(app, lambda: len(bench.current.results) >= 2 if bench.current else False, SWEEP_S)
            pump(app, lambda: deck.controller.status.state is ServerState.RUNNING_MANAGED and bool(
                deck.telemetry.latest and deck.telemetry.latest.slots_busy), SWEEP_S)
            deck.dashboard.set_window_s(60)
            deck.window.show_page("dashboard")
            save(app, deck, out, "dashboard")
            deck.window.show_page("server")
            tabs = deck.server_page.findChild(QTabWidget)
            slots_tab = next((i for i in range(tabs.count()) if "Slots" in tabs.tabText(i)), None) if tabs else None
            if tabs is not None and slots_tab is not None:
                tabs.setCurrentIndex(slots_tab)
                save(app, deck, out, "server-slots")
                tabs.setCurrentIndex(0)
            deck.window.show_page("bench")
            if not pump(app, lambda: bool(finished), SWEEP_S):
                raise SystemExit("the sweep did not finish")
            save(app, deck, out, "bench")
            bench.tabs.setCurrentIndex(bench.tabs.count() - 1)
            pump(app, lambda: False, 1.0)
            save(app, deck, out, "bench-history")
            bench.tabs.setCurrentIndex(0)
            deck.window.show_page("server")
            save(app, deck, out, "server")
            deck.window.show_page("models")
            deck.models_page.refresh() if hasattr(deck.models_page, "refresh") else None
            pump(app, lambda: False, 2.0)
            save(app, deck, out, "models")
        finally:
            deck.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
