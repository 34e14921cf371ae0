"""The Benchmark page: find the best setting on this GPU.

Sweep tab: the editor (left) and, at right, the progress of the running sweep (point k of n,
phase, ETA), the live results table and charts, and the recommendation with Apply. History tab:
every sweep kept, to open, compare and export. A sweep on a managed server restarts it per
point and puts it back afterwards; on an attached server only client concurrency varies.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import replace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QFrame, QLabel, QProgressBar, QScrollArea, QTabWidget, QVBoxLayout,
                               QWidget)

from app.core.server.applied import SettingsKeeping
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.bench.compare import with_server_defaults
from app.core.bench.sweep import PointResult, SweepPlanError, SweepSpec
from app.core.bench.outcome import RunStatus
from app.core.bench.run import SweepRun
from app.core.models import LocalModel
from app.services.guarded_apply import ApplyReport
from app.ui.pages.context import PageContext
from app.ui.pages.bench.capacity_editor import CapacityAsk
from app.ui.pages.bench.editor import SpecError, SweepEditor
from app.services.bench.capacity import CapacityProgress
from app.ui.pages.bench.notice import ExportNotice
from app.ui.pages.bench.results import RunView
from app.services.bench.sweep_runner import ClassProgress
from app.services.bench.sweep_watch import ServerFeed
from app.ui.pages.bench.worker import Background, SweepController, SweepProgress
from app.ui.pages.bench.history_view import HistoryView
from app.ui.widgets.adaptive_splitter import AdaptiveSplitter
from app.ui.widgets.forms import InlineMessage, guard_form

# The results beside the editor get at least this much; narrower, they go under it.
RESULTS_MIN_WIDTH_PX = 400
PHASE_WORDS = {"preparing": "Preparing", "pricing": "Pricing the setting", "restarting": "Restarting the server",
               "loading": "Loading the model", "calibrating": "Counting prompt lengths in the model's tokens",
               "warm-up": "Warming up (not counted)", "measuring": "Measuring",
               "restoring": "Putting the server back as it was", "done": "Done"}
PROGRESS_STYLE = ("#ProgressCard { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 8px; }"
                  "#ProgressCard QLabel { background: transparent; }"
                  "QProgressBar { border: 1px solid #343742; border-radius: 4px; background: #101115; }"
                  "QProgressBar::chunk { background: #4cc2ff; border-radius: 4px; }")


# Where applied settings go, in the words of the apply message (what happens to them, never more).
KEPT_WORDS = {
    SettingsKeeping.SAVED: "saved",
    SettingsKeeping.DEMO_SESSION: "kept for this session (demo mode leaves your saved settings as they are)",
    SettingsKeeping.UNWRITABLE_SESSION: "kept for this session only (the settings folder cannot be written)",
}


def apply_text(what: str, keeping: SettingsKeeping, running: bool) -> str:
    """What the page says when it applies a point: what happens to the settings and to the server."""
    kept = KEPT_WORDS[keeping]
    if running:
        return f"Applying {what}: the settings are {kept}, and the server restarts with them."
    return f"{what[:1].upper()}{what[1:]} is {kept} as the server settings; it takes effect when the server starts " \
           "(Server page)."


def duration_text(seconds: float | None) -> str:
    """"1 min 20 s", "45 s", or "" when unknown."""
    if seconds is None:
        return ""
    seconds = max(0, int(round(seconds)))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def class_progress_text(classes: Sequence[ClassProgress]) -> str:
    """Each scenario class's requests done at this point, as rich text ("" without classes)."""
    parts = []
    for c in classes:
        count = f"{c.done} of {c.of}" if c.of is not None else f"{c.done}"
        name = html.escape(c.name).replace("-", "&#8209;")  # a name breaks at no hyphen
        parts.append(f"<span style='white-space: nowrap'><b>{name}</b> {count} done</span>")
    return " &nbsp;·&nbsp; ".join(parts)


class ProgressCard(QFrame):
    """Point k of n, what is happening, a bar and the time left."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ProgressCard")
        self.setStyleSheet(PROGRESS_STYLE)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 8, 14, 10)
        lay.setSpacing(4)
        self.headline = QLabel()
        self.headline.setObjectName("ProgressHeadline")
        self.headline.setStyleSheet("font-size: 13pt; font-weight: 700;")
        self.phase = QLabel()
        self.phase.setObjectName("ProgressPhase")
        for label in (self.headline, self.phase):  # a long line wraps, never widening the panel past its space
            label.setWordWrap(True)
        self.classes = QLabel()
        self.classes.setObjectName("ProgressClasses")
        self.classes.setWordWrap(True)
        self.classes.setTextFormat(Qt.TextFormat.RichText)
        self.classes.hide()
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setFixedHeight(10)
        lay.addWidget(self.headline)
        lay.addWidget(self.phase)
        lay.addWidget(self.classes)
        lay.addWidget(self.bar)
        self.hide()

    def show_progress(self, p: SweepProgress) -> None:
        """Show one progress report."""
        self.show()
        self.bar.show()
        point = min(p.point + 1, p.points)
        self.headline.setText(f"Point {point} of {p.points}" + (f" · {p.label}" if p.label else "")
                              if p.phase not in ("restoring", "done") else PHASE_WORDS.get(p.phase, p.phase))
        words = PHASE_WORDS.get(p.phase, p.phase)
        left = duration_text(p.eta_s)
        detail = f" — {p.detail}" if p.detail else ""
        eta = f" · about {left} left" if left else (" · time left known after the first point"
                                                     if p.phase not in ("restoring", "done") else "")
        self.phase.setText(f"{words}{detail}{eta}")
        self.classes.setText(class_progress_text(p.classes))
        self.classes.setVisible(bool(p.classes))
        self.bar.setValue(int(p.fraction * 1000))

    def show_capacity(self, p: CapacityProgress) -> None:
        """Show one report of the rate sweep that follows the points: step k, its offered rate, the phase."""
        self.show()
        self.bar.hide()  # how many steps the ladder takes is known only when a step misses
        self.headline.setText(f"Capacity · step {p.step + 1} at {p.offered_rps:.3g} requests/s")
        detail = f" — {p.detail}" if p.detail else ""
        self.phase.setText(f"{PHASE_WORDS.get(p.phase, p.phase)}{detail} · the rate rises until a target breaks")
        self.classes.hide()

    def show_final(self, text: str) -> None:
        """The closing line of a sweep."""
        self.show()
        self.headline.setText(text)
        self.phase.setText("Kept in the History tab, with every request.")
        self.classes.hide()
        self.bar.hide()


def _scroll(widget: QWidget) -> QScrollArea:
    """Vertical scrolling only: the content wraps to the width it is given."""
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    area.setWidget(widget)
    return area


class BenchPage(QWidget):
    """Sweep editor, live results and history, wired to the server controller."""

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        if context.history is None:
            raise ValueError("the Benchmark page needs the benchmark history (PageContext.history)")
        self.setObjectName("BenchPage")
        self.controller = controller = context.server
        self.history = context.history
        self.background = Background(context.loop, self)
        self.backend = backend = context.backend
        # The server's log lines and statuses for a running sweep's watchdog, on the loop thread as the supervisor
        # reads them: in order with the sweep's own restarts, which the same thread makes. (Through the GUI thread a
        # line of the server before a restart could reach the watchdog of the server after it, judged against
        # the new point's settings: "fewer slots than asked" from the last point's launch line.)
        self.server_feed = ServerFeed()
        controller.tap(on_log=self.server_feed.on_log, on_status=self.server_feed.on_status)
        self.sweeps = SweepController(context.loop, controller.supervisor, backend.catalog, backend.load_client,
                                      gpu=context.gpu, server_pids=controller.server_pids, meter=context.meter,
                                      history=self.history, server_telemetry=backend.server_telemetry,
                                      host_memory=context.host_memory, contention=context.contention,
                                      planner=backend.planner, prompt_counter=backend.prompt_counter,
                                      log_signals=backend.log_signals, server_feed=self.server_feed,
                                      learner=context.runtime_allowance, parent=self)
        self.current: SweepRun | None = None
        self._managed = True
        self._applying: ServerSettings | None = None  # what this page's Apply asked for, until it is checked

        root = QVBoxLayout(self)
        root.setContentsMargins(16, 12, 16, 12)
        root.setSpacing(8)
        title = QLabel("Benchmark")
        title.setObjectName("PageTitle")
        root.addWidget(title)
        self.tabs = QTabWidget()
        self.tabs.setObjectName("BenchTabs")
        root.addWidget(self.tabs, 1)

        self.editor = SweepEditor(backend.tuning.setting_name, write_file=context.write_file,
                                  server_defaults=backend.tuning.server_defaults)
        if not backend.can("thinking_control"):
            self.editor.set_thinking_control(False, f"{backend.why_not('thinking_control')} The scenario's thinking "
                                                    "shares are not used.")
        self.progress = ProgressCard()
        self.message = InlineMessage(prominent=True)
        self.message.setObjectName("PageMessage")
        self.export_notice = ExportNotice()
        self.run_view = RunView(server_labels=context.server_labels, saved_format=context.saved_format)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(8, 0, 0, 0)
        rl.setSpacing(10)
        rl.addWidget(self.progress)
        rl.addWidget(self.message)
        rl.addWidget(self.export_notice)
        rl.addWidget(self.run_view, 1)
        split = AdaptiveSplitter(lead=0)  # too narrow for both, the results go under the editor and its Start
        editor_area = _scroll(self.editor)
        editor_area.setMinimumWidth(430)
        results_area = _scroll(right)
        results_area.setMinimumWidth(RESULTS_MIN_WIDTH_PX)
        split.addWidget(editor_area)
        split.addWidget(results_area)
        split.setStretchFactor(1, 1)
        split.setSizes([440, 840])
        self.tabs.addTab(split, "Sweep")
        self.history_view = HistoryView(self.history, self.background, server_labels=context.server_labels,
                                        saved_format=context.saved_format)
        self.tabs.addTab(self.history_view, "History")

        self.editor.start_requested.connect(self._start_from_editor)
        self.editor.cancel_requested.connect(self.cancel_sweep)
        self.editor.refresh_models.connect(self._list_models)
        self.sweeps.started.connect(self._started)
        self.sweeps.progress.connect(self.progress.show_progress)
        self.sweeps.point_finished.connect(self._point_finished)
        self.sweeps.capacity_progress.connect(self.progress.show_capacity)
        self.sweeps.capacity_step.connect(self.run_view.show_capacity)
        self.sweeps.finished.connect(self._finished)
        self.sweeps.failed.connect(self._failed)
        self.sweeps.history_problem.connect(self.message.show_warning)
        self.sweeps.running_changed.connect(self.editor.set_running)
        self.sweeps.running_changed.connect(self._hold_server)
        self.run_view.apply_requested.connect(self.apply_point)
        # One set of targets: the next sweep's and the shown run's re-judge fields are the same values.
        self.editor.targets.follow(self.run_view.card.targets)
        self.run_view.rejudged.connect(self._keep_judgement)
        self.run_view.exported.connect(self.export_notice.show_written)
        self.run_view.export_failed.connect(self._export_failed)
        self.history_view.apply_requested.connect(self.apply_point)
        self.tabs.currentChanged.connect(lambda i: self.history_view.refresh() if i == 1 else None)
        controller.status_changed.connect(self._server_changed)
        # Bound methods of this widget, so that signals emitted on the loop thread arrive queued.
        controller.models_listed.connect(self._models_listed)
        controller.settings_applied.connect(self._settings_applied)
        controller.apply_checked.connect(self._apply_checked)
        guard_form(self)  # the re-judge fields of the live and the History tab's cards too
        self._server_changed(controller.status)

    # ---- sweeps ---------------------------------------------------------------------------------
    def _start_from_editor(self, spec: SweepSpec) -> None:
        try:
            capacity = self.editor.capacity_ask()
        except SpecError as exc:  # the editor checked it a moment ago; said all the same
            self.editor.message.show_error(str(exc))
            return
        self.start_sweep(spec, capacity)

    def start_sweep(self, spec: SweepSpec, capacity: CapacityAsk | None = None) -> None:
        """Start a sweep against the controller's server (its current settings are the base); with `capacity`,
        the rate sweep it asks for follows at the recommended point."""
        if self.sweeps.running:
            return
        spec = replace(spec, base=self.controller.settings)
        if spec.default_settings is not None:  # the defaults on this base (its host, port, model, options)
            try:
                spec = with_server_defaults(spec, self.backend.tuning.server_defaults)
            except SweepPlanError as exc:
                self.message.show_error(f"Before/after: {exc}")
                return
        self._applying = None
        self.message.clear_message()
        self.current = None
        self.export_notice.clear_notice()
        self.run_view.set_run(None)
        self.editor.set_mode_text(
            "A sweep is running. It restarts the server per point and puts it back as it was when it ends or is "
            "cancelled; the Server page's controls wait until then." if spec.managed else
            "A sweep is running against this server; its settings are not touched.")
        self.sweeps.start(spec, self.controller.settings.base_url, capacity)

    def _hold_server(self, running: bool) -> None:
        """While a sweep runs, the Server page cannot restart, stop or re-configure the server under it."""
        if not running:
            self.controller.release()
            return
        reason = ("A benchmark sweep is running: the server's controls wait until it ends or is stopped on the "
                  "Benchmark page.")
        if self._managed:
            reason += " It restarts the server for each point and puts the settings back as they were."
        self.controller.hold(reason)

    def cancel_sweep(self) -> None:
        """Stop the sweep; the server comes back as it was."""
        self.sweeps.cancel()
        self.progress.phase.setText("Cancelling — the server is put back as it was…")

    def shutdown(self) -> None:
        """Cancel a running sweep and wait for the server to be restored (on quit)."""
        self.sweeps.shutdown()

    def apply_point(self, result: PointResult, run: SweepRun | None = None) -> None:
        """Apply a measured point's server settings through the app's one apply path."""
        point = result.point.settings
        # Only the knobs a sweep varies: host, port, paths and the rest stay as they are now.
        settings = self.controller.settings.replace(
            num_parallel=point.num_parallel, kv_cache_type=point.kv_cache_type,
            context_length=point.context_length, flash_attention=point.flash_attention)
        run = run or self.current
        model = run.fingerprint.model if run else None
        what = result.point.label(("parallel", "kv_cache_types", "context_lengths", "flash_attention"))
        running = self.controller.status.state is ServerState.RUNNING_MANAGED
        self._applying = settings if running else None
        self.export_notice.clear_notice()
        self.controller.apply(settings, model=model)  # the app's one apply path (verified, rolled back if it broke)
        self.message.show_info(apply_text(what, self.controller.keeping, running))

    def _apply_checked(self, report: ApplyReport) -> None:
        """How this page's apply went replaces "Applying …" (the Server page says it too)."""
        if self._applying is None or report.tried != self._applying:
            return
        self._applying = None
        judgement = report.judgement
        if judgement.keep:
            self.message.show_info(f"Applied. {judgement.reason}")
        else:
            self.message.show_error(f"Rolled back to the last good settings. {judgement.reason}")

    def _keep_judgement(self, run: SweepRun) -> None:
        """A re-judged run is kept so (History shows its recommendation); a running one is kept when it ends."""
        self.current = run
        if run.run_id is not None:
            self.background.call(self.history.keep_judgement, run.run_id, run, on_done=lambda _none: None,
                                 on_error=self.message.show_warning)

    def _export_failed(self, text: str) -> None:
        self.export_notice.clear_notice()
        self.message.show_error(text)

    def _started(self, run: SweepRun) -> None:
        self.current = run
        self.run_view.set_run(run)

    def _point_finished(self, run: SweepRun) -> None:
        self.current = run
        self.run_view.set_run(run)

    def _finished(self, run: SweepRun) -> None:
        self.current = run
        self.run_view.set_run(run)
        ran = sum(1 for r in run.results if r.ran)
        took = duration_text(sum(r.elapsed_s for r in run.results))
        if run.status is RunStatus.CANCELLED:
            self.progress.show_final(f"Cancelled after {len(run.results)} of {len(run.points)} points — "
                                     "the server is back in its previous settings.")
        else:
            line = f"Finished: {ran} of {len(run.points)} points measured in {took}."
            if run.capacity is not None and run.capacity.sustainable_rps is not None:
                line += f" Capacity: {run.capacity.sustainable_rps:.3g} requests/s."
            self.progress.show_final(line)
        if self.tabs.currentIndex() == 1:
            self.history_view.refresh()
        self._server_changed(self.controller.status)

    def _failed(self, text: str) -> None:
        self.progress.hide()
        self.message.show_error(text)
        self._server_changed(self.controller.status)

    # ---- server state ---------------------------------------------------------------------------
    def _models_listed(self, models: list[LocalModel]) -> None:
        self.editor.set_models([m.name for m in models])

    def _settings_applied(self, _settings: object) -> None:
        self._server_changed(self.controller.status)

    def _list_models(self) -> None:
        if self.controller.status.state.is_running:
            self.controller.list_models()

    def _server_changed(self, status: ServerStatus) -> None:
        if self.sweeps.running:
            return  # the sweep's own restarts; the mode was fixed when it started
        settings = self.controller.settings
        state = status.state
        blocked = ""
        if self.sweeps.behind and state.is_running:
            managed = False
            names = ", ".join(backend.name for backend in self.sweeps.behind)
            why = (f"At a load balancer: only client concurrency varies here, and each point also reads the servers "
                   f"behind it ({names}) for their share of the requests and tokens, from their own counters.")
        elif state is ServerState.RUNNING_ATTACHED:
            who = status.run_by or "another process"
            managed = False
            why = (f"Attached to a server run by {who}: its settings are its own, so only client concurrency "
                   "varies here. To sweep parallel, KV cache and context, stop it and start the server from "
                   "ollama-deck (Server page).")
        elif not self.backend.can("restarts_with_settings"):
            managed = False
            why = f"{self.backend.why_not('restarts_with_settings')} Only client concurrency varies here."
            if not state.is_running:
                blocked = "Start the server on the Server page first: this sweep measures it as it runs."
        elif state is ServerState.RUNNING_MANAGED:
            managed = True
            why = ("Each point restarts the server ollama-deck runs, with that point's settings. When the sweep "
                   f"ends or is cancelled, your settings (parallel {settings.num_parallel}, KV "
                   f"{settings.kv_cache_type}, context {settings.context_length or 'default'}) come back.")
        elif state in (ServerState.NOT_INSTALLED, ServerState.PORT_CONFLICT):
            managed = True
            why = status.message
            blocked = status.message
        else:
            managed = True
            why = ("The server is not running: the sweep starts it with each point's settings and stops it again "
                   "at the end.")
        self._managed = managed
        self.editor.set_server(settings, managed, why)
        self.editor.set_start_blocked(blocked)
        if state.is_running:
            self._list_models()


__all__ = ["KEPT_WORDS", "BenchPage", "ProgressCard", "apply_text", "class_progress_text", "duration_text"]
