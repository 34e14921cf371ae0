"""Writes the files in this folder with the ollama-deck of the commit named in README.md, through its own
window: run with that commit checked out (its code, not a later one) and the embedded engine installed,
offscreen, from the repository root:

    QT_QPA_PLATFORM=offscreen python tests/data/previous_release/make_files.py OUT_DIR

OUT_DIR must already hold benchmarks.sqlite3 from the `ollama-deck bench --demo` command in README.md (the
window's cancelled sweep is added to it). Each window is built and closed as `ollama-deck --config-dir OUT_DIR`
builds and closes it (DeckApp with the parser's arguments; closing writes window.json), and driven through its
widgets: the Server page's form and Apply, the Prompt page's preset bar, the Benchmark page's Start and Cancel.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from collections.abc import Callable

from PySide6.QtWidgets import QApplication, QSpinBox

from app.adapters.storage.apply_history import ApplyHistory
from app.adapters.storage.history import BenchHistory
from app.cli import _gui_parser
from app.core.server.settings import ServerSettings
from app.ui.app import embedded
from app.ui.app.main import DeckApp
from app.ui.app.theme import apply_theme

_EXISTING = QApplication.instance()
APP = _EXISTING if isinstance(_EXISTING, QApplication) else QApplication(sys.argv[:1])
apply_theme(APP)


def wait_until(check: Callable[[], object], timeout_s: float = 120.0, what: str | Callable[[], str] = "") -> None:
    end = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what() if callable(what) else what}")
        APP.processEvents()
        time.sleep(0.02)


def open_deck(out: Path, *extra: str) -> DeckApp:
    args = _gui_parser().parse_args(["--config-dir", str(out), *extra])
    deck = DeckApp(args)
    deck.window.show_page(deck.first_page)
    deck.window.show()
    deck.start()
    return deck


def close(deck: DeckApp) -> None:
    deck.current.close()
    for _ in range(50):
        APP.processEvents()


def apply(deck: DeckApp, settings: ServerSettings, done: Callable[[], bool]) -> None:
    page = deck.server_page
    page.form.set_settings(settings)
    spin = page.form.findChild(QSpinBox, "num_parallel")  # as a user's edit: the form reports it changed
    assert spin is not None
    spin.setValue(settings.num_parallel + 1)
    spin.setValue(settings.num_parallel)
    wait_until(page.apply_button.isEnabled, what="Apply to be enabled")
    page.apply_button.click()
    wait_until(done, 180, what="the apply to be done")


def main(out: Path) -> None:
    apply_log = out / "apply-checks.sqlite3"

    # 1. The embedded engine: two guarded applies (each restarts it and records an apply check), then a sweep
    #    cancelled after its first point.
    deck = open_deck(out, "--demo", "--page", "server")
    wait_until(lambda: deck.controller.status.state.name.startswith("RUNNING"), 180, "the engine to run")
    base = deck.server_page.form.settings()
    apply(deck, base.replace(num_parallel=2),
          lambda: len(ApplyHistory(apply_log).recent()) == 1)
    wait_until(lambda: deck.server_page.fit_panel.model_name, what="the server's model list")  # loaded on apply
    apply(deck, base.replace(num_parallel=2, context_length=2048, keep_alive="30m"),
          lambda: len(ApplyHistory(apply_log).recent()) == 2)
    editor = deck.bench_page.editor
    editor.parallel.setText("1, 2, 4")
    editor.requests.setValue(2)
    editor.num_predict.setValue(8)
    wait_until(lambda: editor.start_button.isEnabled() and editor.model.currentText(), what="Start sweep")
    editor.start_button.click()
    bench = deck.bench_page
    wait_until(lambda: bench.current is not None and len(bench.current.results) >= 1, 180,
               lambda: f"the first point ({editor.message.text()!r}, {bench.message.text()!r})")
    editor.cancel_button.click()
    history = BenchHistory(out / "benchmarks.sqlite3")
    wait_until(lambda: history.list_runs()[0].status == "cancelled", 180, "the cancel")
    close(deck)

    # 2. Ollama (none running at this address): its settings and extra settings, and presets.
    deck = open_deck(out, "--backend", "ollama", "--url", "http://127.0.0.1:9", "--page", "prompt")
    settings = deck.server_page.form.settings().replace(
        num_parallel=3, context_length=16384, kv_cache_type="q8_0", flash_attention="on", keep_alive="-1",
        max_queue=64, extra_settings="OLLAMA_DEBUG=1\nCUDA_VISIBLE_DEVICES=0").with_options(
        max_loaded_models=2, gpu_overhead_mib=512, models_dir="/srv/modèles")
    apply(deck, settings, lambda: (out / "settings.json").exists())
    console = deck.console_page
    first = console.presets.presets[0]
    console.presets.choose(first.key)
    console.prompt_edit.setPlainText("Summarise the trends in one paragraph, in English.")
    console.controls.num_predict.setValue(512)
    console.presets.save_current()
    console.prompt_edit.setPlainText("用三句话解释 KV 缓存。")
    console.controls.system_edit.setPlainText("Answer tersely.")
    console.controls.num_predict.setValue(256)
    console.presets.save_as("Terse KV question")
    wait_until(lambda: (out / "presets.json").exists() and "Terse" in (out / "presets.json").read_text("utf-8"),
               what="the presets")
    close(deck)

    # 3. llama-server (none running at this address): its own options and extra flags; the window is left
    #    resized, on the Benchmark page, with Markdown off.
    model = embedded.demo_settings().option("model_path")  # the bundled model's file
    deck = open_deck(out, "--backend", "llama_server", "--url", "http://127.0.0.1:9", "--page", "server")
    before = (out / "settings.json").read_bytes()
    settings = deck.server_page.form.settings().replace(
        num_parallel=4, context_length=4096, kv_cache_type="q8_0", flash_attention="on", port=8088,
        extra_settings="--no-warmup --log-colors off").with_options(model_path=str(model), threads=2,
                                                                     n_gpu_layers=20)
    apply(deck, settings, lambda: (out / "settings.json").read_bytes() != before
         )
    deck.console_page.markdown_check.setChecked(False)
    deck.window.show_page("bench")
    deck.window.resize(1100, 700)
    APP.processEvents()
    close(deck)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
