"""The Benchmark page driving real sweeps: a real supervisor, the stand-in `ollama` subprocess, a real
SQLite history, widgets offscreen."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.adapters.storage.history import BenchHistory
from app.backends.ollama.client import OllamaClient
from app.adapters.storage.settings_store import SettingsStore
from app.backends.ollama.spec import OLLAMA
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.ports.backend import BackendSpec
from app.core.server.applied import SettingsKeeping
from app.core.server.state import ServerState
from app.services.guarded_apply import GuardedApplier
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from app.core.server.settings import ServerSettings
from app.core.bench.sweep import Fingerprint
from app.ui.pages.bench.page import BenchPage, duration_text
from app.ui.server.controller import ServerController
from tests.adapters.storage.test_history import make_run
from tests.fakes.ollama.server_fixtures import free_port
from tests.ui.page_context import page_context_on
from tests.ui.pages.bench.measured import measured

WAIT_MS = 30_000
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10", "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.5"}


@pytest.fixture
def page_factory(qtbot, supervisor_loop, standin_ollama, tmp_path, monkeypatch):
    """(controller, page, store) around a supervisor with small timeouts and a history in tmp_path."""
    made = []

    def make(settings: ServerSettings | None = None, history: BenchHistory | None = None,
             backend: BackendSpec = OLLAMA, keeping: SettingsKeeping = SettingsKeeping.SAVED, guarded: bool = False,
             gpu: ScriptedGpuBackend | None = None, **env: str):
        for name, value in {**FAST, **env}.items():
            monkeypatch.setenv(name, value)
        settings = settings or ServerSettings(port=free_port())
        store = SettingsStore(tmp_path / "config")
        controller = ServerController(supervisor_loop, None, OllamaClient, store.save, keeping=keeping)
        supervisor = ServerSupervisor(settings, on_status=controller.on_status, on_log=controller.on_log,
                                      start_timeout_s=5.0, stop_grace_s=0.5, health_interval_s=0.2)
        no_gpu = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")
        controller.attach_supervisor(supervisor, GuardedApplier(supervisor, OllamaClient, no_gpu) if guarded else None)
        page = BenchPage(page_context_on(supervisor_loop, backend=backend, server=controller,
                                         history=history or BenchHistory(tmp_path / "benchmarks.sqlite3"),
                                         **({"gpu": gpu} if gpu is not None else {})))
        qtbot.addWidget(page)
        page.resize(1300, 900)
        page.show()
        made.append((controller, page))
        return controller, page, store

    yield make
    for controller, page in made:
        page.shutdown()
        controller.shutdown()


def fill(page: BenchPage, model: str = "qwen3:0.6b", parallel: str = "1, 2, 4", requests: int = 4) -> None:
    editor = page.editor
    editor.model.setEditText(model)
    editor.parallel.setText(parallel)
    editor.requests.setValue(requests)
    editor.num_predict.setValue(0)


def test_a_sweep_fills_the_table_charts_and_recommendation_and_apply_saves_the_winner(qtbot, page_factory, tmp_path):
    controller, page, store = page_factory(FAKE_OLLAMA_OOM_ABOVE_MIB="2200")
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page)
    assert page.editor.summary.text().startswith("3 points, 3 server restarts")
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not page.editor.start_button.isEnabled(), timeout=WAIT_MS)
        assert page.editor.cancel_button.isEnabled() and not page.editor.parallel.isEnabled()
    run = finished.args[0]
    assert [measured(r) for r in run.results[:2]] == [True, True] and run.results[2].status == "failed", \
        [(r.status, r.reason, [(e.summary, str(e.evidence)[:300]) for e in r.events]) for r in run.results]
    table = page.run_view.table
    assert table.rowCount() == 3
    assert [table.item(r, 0).text() for r in range(3)] == ["1", "★ 2", "4"]
    stable = table.item(2, table.columnCount() - 1)
    assert stable.text() == "✖ OOM" and "OOM at load" in stable.toolTip() and "cudaMalloc" in stable.toolTip()
    assert table.horizontalHeaderItem(1).text() == "Tokens/s"  # no Clients column: clients follow parallel
    assert page.run_view.charts.throughput.points_drawn == 2
    assert page.run_view.charts.latency.front  # a Pareto front was drawn
    card = page.run_view.card
    assert card.isVisible() and card.text.text().startswith("<b>Recommended: parallel 2.</b>")
    assert card.apply_button.text() == "Apply parallel 2" and card.apply_button.isEnabled()
    assert page.progress.headline.text().startswith("Finished: 2 of 3 points measured")
    qtbot.waitUntil(lambda: page.editor.start_button.isEnabled(), timeout=WAIT_MS)
    assert controller.status.state is ServerState.STOPPED  # as it was before the sweep

    qtbot.mouseClick(card.apply_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: store.load().settings.num_parallel == 2, timeout=WAIT_MS)

    for kind in ("csv", "json", "md", "png"):
        assert page.run_view.export_to(kind, str(tmp_path / f"sweep.{kind}"))
    assert "parallel,concurrency" in (tmp_path / "sweep.csv").read_text()
    assert '"points"' in (tmp_path / "sweep.json").read_text()
    assert "## Recommendation" in (tmp_path / "sweep.md").read_text()
    image = QImage(str(tmp_path / "sweep.png"))
    assert not image.isNull() and image.width() > 400


def test_the_history_tab_lists_opens_and_compares_runs(qtbot, page_factory, tmp_path):
    controller, page, _store = page_factory()
    history = page.history
    older = make_run()
    newer = replace(make_run(points=2), fingerprint=Fingerprint(gpu_name="NVIDIA GeForce RTX 4090",
                                                                 server_version="0.13.0", model="qwen3:14b",
                                                                 backend_kind="ollama"))
    history.save(older)
    history.save(newer)
    page.tabs.setCurrentIndex(1)
    view = page.history_view
    qtbot.waitUntil(lambda: view.table.rowCount() == 2, timeout=WAIT_MS)
    assert view.table.item(0, 3).text() == "Ollama 0.13.0"  # newest first, the server named
    assert not view.compare_button.isEnabled()
    view.table.selectRow(0)
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    assert view.run_view.table.rowCount() == 2 and view.stack.currentIndex() == 1
    view.table.selectAll()
    assert view.compare_button.isEnabled()
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(view.compare_button, Qt.MouseButton.LeftButton)
    diff = view.compare_view.diff.text()
    assert "What differs" in diff and "0.12.6" in diff and "0.13.0" in diff
    assert view.compare_view.tables[0].rowCount() == 3 and view.compare_view.tables[1].rowCount() == 2
    view.confirm_delete = lambda _n: True
    view.table.selectRow(1)
    qtbot.mouseClick(view.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.table.rowCount() == 1, timeout=WAIT_MS)


def test_cancel_mid_point_puts_the_server_back(qtbot, page_factory):
    controller, page, _store = page_factory(FAKE_OLLAMA_TOKENS_PER_S="50", FAKE_OLLAMA_ANSWER_TOKENS="500")
    controller.start()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: "come back" in page.editor.mode_label.text(), timeout=WAIT_MS)
    fill(page, parallel="2, 4")
    page.editor.start_button.click()
    qtbot.waitUntil(lambda: page.progress.phase.text().startswith("Warming up"), timeout=WAIT_MS)
    assert "Point 1 of 2 · parallel 2" == page.progress.headline.text()
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.cancel_button, Qt.MouseButton.LeftButton)
    assert finished.args[0].status == "cancelled"
    assert page.progress.headline.text().startswith("Cancelled after 0 of 2 points")
    assert controller.settings.num_parallel == 1
    assert controller.status.state is ServerState.RUNNING_MANAGED


def test_while_a_sweep_runs_the_server_page_cannot_restart_stop_or_apply(qtbot, page_factory, supervisor_loop):
    from app.ui.pages.server.page import ServerPage

    controller, page, _store = page_factory(FAKE_OLLAMA_TOKENS_PER_S="50", FAKE_OLLAMA_ANSWER_TOKENS="500")
    server_page = ServerPage(page_context_on(supervisor_loop, server=controller))
    qtbot.addWidget(server_page)
    controller.start()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    server_page.form.findChild(object, "num_parallel").setValue(3)
    qtbot.waitUntil(server_page.apply_button.isEnabled, timeout=WAIT_MS)
    fill(page, parallel="2, 4")
    page.editor.start_button.click()
    qtbot.waitUntil(lambda: page.progress.phase.text().startswith("Warming up"), timeout=WAIT_MS)
    assert not server_page.apply_button.isEnabled() and not server_page.stop_button.isEnabled()
    assert "benchmark sweep is running" in server_page.reason_label.text()
    with qtbot.waitSignal(controller.error, timeout=WAIT_MS) as refused:
        assert controller.apply(controller.settings.replace(num_parallel=3)).cancelled()
    assert "benchmark sweep is running" in refused.args[0]
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS):
        qtbot.mouseClick(page.editor.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(server_page.apply_button.isEnabled, timeout=WAIT_MS)  # free again, the edit kept
    assert server_page.stop_button.isEnabled() and "benchmark" not in server_page.reason_label.text()
    assert controller.settings.num_parallel == 1


def test_on_an_attached_server_only_client_concurrency_varies(qtbot, page_factory, external_standin):
    server = external_standin(**FAST)
    controller, page, _store = page_factory(ServerSettings(port=server.port))
    controller.probe()
    editor = page.editor
    qtbot.waitUntil(lambda: "only client concurrency" in editor.mode_label.text(), timeout=WAIT_MS)
    assert not editor.parallel.isEnabled() and not editor.kv_boxes["q8_0"].isEnabled()
    assert editor.clients.isEnabled()
    qtbot.waitUntil(lambda: editor.model.count() == 4, timeout=WAIT_MS)  # the server's models were listed
    editor.model.setEditText("qwen3:0.6b")
    editor.clients.setText("1, 2")
    editor.requests.setValue(4)
    spec = editor.spec()
    assert not spec.managed and spec.axes.concurrency == (1, 2)
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        editor.start_button.click()
    run = finished.args[0]
    assert [(r.point.parallel, r.point.concurrency) for r in run.results] == [(None, 1), (None, 2)]
    assert page.run_view.table.horizontalHeaderItem(1).text() == "Clients"
    assert not page.run_view.card.apply_button.isEnabled()  # nothing of the server's to apply
    assert server.process.poll() is None


def test_the_editor_says_what_is_wrong_before_anything_runs(qtbot, page_factory, tmp_path):
    _controller, page, _store = page_factory()
    editor = page.editor
    editor.model.setEditText("")
    editor.start_button.click()
    assert editor.message.severity == "error" and "Choose a model" in editor.message.message
    editor.model.setEditText("qwen3:0.6b")
    editor.parallel.setText("1, x")
    editor.start_button.click()
    assert editor.parallel_message.message.startswith("'x' is not a whole number")
    assert not page.sweeps.running
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("first\nsecond\n")
    assert editor.load_prompt_file(str(prompts))
    assert "prompts.txt (2 prompts)" in editor.prompts.currentText()
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n{"nope": 1}\n')
    assert not editor.load_prompt_file(str(tmp_path / "bad.jsonl"))
    assert "entry 2" in editor.prompt_message.message


def test_duration_text():
    assert (duration_text(None), duration_text(45.4), duration_text(80), duration_text(7300)) == (
        "", "45 s", "1 min 20 s", "2 h 1 min")


def test_the_page_is_in_the_app(qtbot, tmp_path):
    import argparse

    from app.ui.app.main import DeckApp

    deck = DeckApp(argparse.Namespace(config_dir=str(tmp_path / "cfg"), url="http://127.0.0.1:9", page="bench",
                                      screenshot=None))
    qtbot.addWidget(deck.window)
    try:
        assert "bench" in deck.window.page_names
        deck.window.show_page("bench")
        assert deck.window.current_page() is deck.bench_page
        assert Path(deck.bench_page.history.path) == tmp_path / "cfg" / "benchmarks.sqlite3"
    finally:
        deck.close()


class _ThreadNotingHistory(BenchHistory):
    """The real SQLite history, noting which thread made each write."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.writes: list[tuple[str, int]] = []

    def begin(self, run):
        self.writes.append(("begin", threading.get_ident()))
        return super().begin(run)

    def add_point(self, run_id, result):
        self.writes.append(("add_point", threading.get_ident()))
        super().add_point(run_id, result)

    def finish(self, run_id, run):
        self.writes.append(("finish", threading.get_ident()))
        super().finish(run_id, run)


def test_the_sweep_history_is_written_off_the_loop_and_gui_threads(qtbot, page_factory, supervisor_loop, tmp_path):
    history = _ThreadNotingHistory(tmp_path / "noted.sqlite3")
    controller, page, _store = page_factory(history=history)

    async def ident() -> int:
        return threading.get_ident()

    loop_ident = supervisor_loop.run(ident())
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page, parallel="1, 2", requests=2)
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    assert [kind for kind, _ in history.writes] == ["begin", "add_point", "add_point", "finish"]
    threads = {t for _, t in history.writes}
    assert loop_ident not in threads and threading.get_ident() not in threads
    # finished is announced after the writes: the run it carries is already kept, every point with it.
    assert run.run_id is not None and len(history.load(run.run_id).results) == 2


def test_an_export_says_where_it_was_written_and_a_failed_one_why(qtbot, page_factory, tmp_path):
    _controller, page, _store = page_factory()
    page.run_view.set_run(make_run())
    target = tmp_path / "exports" / "sweep.md"
    target.parent.mkdir()
    assert not page.export_notice.isVisible()
    assert page.run_view.export_to("md", str(target))
    assert page.export_notice.isVisible() and page.export_notice.path == str(target)
    text = page.export_notice.text()
    assert "sweep.md" in text and str(target.parent) in text
    assert not page.run_view.export_to("csv", str(tmp_path / "no-such-folder" / "sweep.csv"))
    assert not page.export_notice.isVisible()
    assert page.message.severity == "error" and "no-such-folder" in page.message.message


def test_an_export_from_the_history_tab_says_where_it_was_written(qtbot, page_factory, tmp_path):
    _controller, page, _store = page_factory()
    page.history.save(make_run())
    page.tabs.setCurrentIndex(1)
    view = page.history_view
    qtbot.waitUntil(lambda: view.table.rowCount() == 1, timeout=WAIT_MS)
    view.table.selectRow(0)
    with qtbot.waitSignal(view.loaded, timeout=WAIT_MS):
        qtbot.mouseClick(view.open_button, Qt.MouseButton.LeftButton)
    assert view.run_view.export_to("json", str(tmp_path / "kept.json"))
    assert view.export_notice.isVisible() and view.export_notice.path == str(tmp_path / "kept.json")
    assert "kept.json" in view.export_notice.text()


def test_a_backend_that_cannot_restart_with_settings_sweeps_client_concurrency_only(qtbot, page_factory):
    fixed = replace(OLLAMA, capabilities=replace(OLLAMA.capabilities, restarts_with_settings=False),
                    missing_reasons={"restarts_with_settings": "This server takes its settings only at launch."})
    controller, page, _store = page_factory(backend=fixed)
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    editor = page.editor
    assert "takes its settings only at launch" in editor.mode_label.text()
    assert not editor.parallel.isEnabled() and not editor.start_button.isEnabled()
    assert "Start the server" in editor.start_button.toolTip()
    controller.start()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: editor.start_button.isEnabled(), timeout=WAIT_MS)
    assert not editor.parallel.isEnabled() and "Only client concurrency varies" in editor.mode_label.text()


@pytest.mark.parametrize(("keeping", "kept"), [
    (SettingsKeeping.SAVED, "the settings are saved"),
    (SettingsKeeping.DEMO_SESSION, "the settings are kept for this session (demo mode leaves your saved settings as they are)"),
])
def test_applying_a_point_says_what_becomes_of_the_settings_and_then_how_it_went(qtbot, page_factory, keeping, kept):
    controller, page, _store = page_factory(keeping=keeping, guarded=True)
    controller.start()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_MANAGED, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    run = make_run()
    run = replace(run, fingerprint=replace(run.fingerprint, model="qwen3:0.6b"))
    with qtbot.waitSignal(controller.apply_checked, timeout=WAIT_MS):
        page.apply_point(run.results[1], run)
        assert page.message.severity == "info"
        assert page.message.message.startswith("Applying parallel 2 ")
        assert page.message.message.endswith(f": {kept}, and the server restarts with them.")
    qtbot.waitUntil(lambda: page.message.message.startswith("Applied. "), timeout=WAIT_MS)
    if not keeping.saved:
        assert "saved" not in page.message.message.replace("your saved settings", "")


def _recommended_column(view) -> str:
    return view.table.item(0, 6).text()


def test_a_rejudged_sweep_is_kept_so_and_the_targets_are_one_set(qtbot, page_factory):
    # 200 tokens/s: 5 ms per output token, so a 1 ms TPOT target leaves no point to recommend.
    controller, page, store = page_factory(FAKE_OLLAMA_TOKENS_PER_S="200", FAKE_OLLAMA_ANSWER_TOKENS="6")
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page, parallel="1, 2")
    editor, card = page.editor, page.run_view.card
    editor.tpot.setValue(1)
    assert card.targets.tpot.value() == 1  # the card's re-judge fields show the editor's targets
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        editor.start_button.click()
    run = finished.args[0]
    assert run.run_id is not None and run.recommendation.index is None
    page.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: page.history_view.table.rowCount() == 1, timeout=WAIT_MS)
    assert _recommended_column(page.history_view) == "—"
    page.tabs.setCurrentIndex(0)

    card.targets.tpot.setValue(1000)
    assert editor.tpot.value() == 1000  # ... and the other way round: the next sweep uses them too
    with qtbot.waitSignal(page.run_view.rejudged, timeout=WAIT_MS):
        card.rejudge_button.click()
    assert card.apply_button.isEnabled() and "re-judged: " in page.run_view.facts.text()
    winner = card.apply_button.text().removeprefix("Apply ")
    card.apply_button.click()
    qtbot.waitUntil(lambda: not controller._busy, timeout=WAIT_MS)
    assert editor.targets.targets() == card.targets.targets() == page.run_view.run.spec.targets

    page.tabs.setCurrentIndex(1)
    page.history_view.refresh()
    qtbot.waitUntil(lambda: _recommended_column(page.history_view) == winner, timeout=WAIT_MS)
    kept = page.history.load(run.run_id)  # opened again: judged as the user last judged it
    assert kept.spec.targets.tpot_p95_ms == 1000 and kept.ran_with.tpot_p95_ms == 1
    assert kept.recommendation.index is not None


class _FullAtTheStart(BenchHistory):
    """The real SQLite history on a disk that is full when the sweep starts and has room again by its end."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.full = True

    def _insert_run(self, conn, run):
        if self.full:
            self.full = False
            raise sqlite3.OperationalError("database or disk is full")
        return super()._insert_run(conn, run)


def test_a_run_whose_start_could_not_be_stored_is_stored_whole_at_its_end(qtbot, page_factory, tmp_path):
    history = _FullAtTheStart(tmp_path / "full.sqlite3")
    controller, page, _store = page_factory(history=history)
    problems: list[str] = []
    page.sweeps.history_problem.connect(problems.append)
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page, parallel="1, 2", requests=2)
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    assert problems and "database or disk is full" in problems[0]  # said when it happened
    [summary] = history.list_runs()
    assert run.run_id == summary.run_id and (summary.status, summary.points_done) == ("finished", 2)


def test_the_page_uses_the_history_it_is_given_and_makes_none_of_its_own(qtbot, page_context, tmp_path):
    with pytest.raises(ValueError, match="needs the benchmark history"):
        BenchPage(page_context())  # no history in the context: no SQLite file in the user's folder either
    history = BenchHistory(tmp_path / "given.sqlite3")
    page = BenchPage(page_context(history=history))
    qtbot.addWidget(page)
    assert page.history is history and page.history_view._history is history
    page.shutdown()


def test_the_progress_card_says_when_prompt_lengths_are_being_counted(qtbot):
    from app.ui.pages.bench.page import ProgressCard
    from app.ui.pages.bench.worker import SweepProgress

    card = ProgressCard()
    qtbot.addWidget(card)
    card.show_progress(SweepProgress(0, 2, "calibrating", "parallel 1", "counting the prompt corpus in the model's "
                                     "tokens", 0.05))
    assert card.phase.text().startswith("Counting prompt lengths in the model's tokens — counting the prompt corpus")
    assert card.headline.text() == "Point 1 of 2 · parallel 1"
