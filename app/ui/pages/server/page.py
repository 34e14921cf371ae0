"""The Server page: settings form, server state and controls, and the live server log."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QMessageBox,
    QTabWidget,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.core.memory.estimator import VramEstimate
from app.core.memory.verdict import Verdict, risky_apply_words
from app.core.server.applied import carry_edits
from app.core.server.mapping import PROGRAM, OptionSpec
from app.core.server.state import ExternalKind, ServerState, ServerStatus
from app.core.server.settings import ServerSettings
from app.services.guarded_apply import ApplyReport
from app.ui.widgets.adaptive_splitter import AdaptiveSplitter
from app.ui.widgets.banner import Banner
from app.ui.widgets.forms import guard_form
from app.ui.widgets.wrapping_text import WrappingText
from app.ui.widgets.theme import STATE_COLOURS
from app.ui.pages.context import PageContext
from app.ui.pages.server.fit_panel import FitPanel
from app.ui.pages.server.settings_fields import exposure_notice
from app.ui.pages.server.logged_command import LoggedCommand
from app.ui.pages.server.settings_form import SettingsForm
from app.ui.pages.server.slots_view import SlotsView

LOG_MAX_LINES = 5000


class LogView(QWidget):
    """The server's stdout/stderr, newest at the bottom, bounded in length."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        title = QLabel("Server log")
        title.setObjectName("SectionTitle")
        title.setStyleSheet("font-weight: 600;")
        self.follow = QCheckBox("Follow")
        self.follow.setChecked(True)
        clear = QPushButton("Clear")
        bar.addWidget(title)
        bar.addStretch(1)
        bar.addWidget(self.follow)
        bar.addWidget(clear)
        self.text = QPlainTextEdit()
        self.text.setObjectName("LogView")
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(LOG_MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setPlaceholderText("The log of a server started by ollama-deck appears here.")
        clear.clicked.connect(lambda: self.text.clear())
        lay.addLayout(bar)
        lay.addWidget(self.text, 1)

    def append_lines(self, lines: list[str]) -> None:
        """Append a batch of lines (one layout pass for the batch)."""
        if not lines:
            return
        self.text.appendPlainText("\n".join(line.rstrip("\n") for line in lines))
        if self.follow.isChecked():  # to the newest line, keeping the start of long lines in view
            bar = self.text.verticalScrollBar()
            bar.setValue(bar.maximum())

    def plain_text(self) -> str:
        return self.text.toPlainText()


class StatusCard(QFrame):
    """The server's state in words, with details and the reason behind disabled controls."""

    def __init__(self, parent: QWidget | None = None, *, program: OptionSpec | None = None,
                 server_name: str = "the server") -> None:
        super().__init__(parent)
        self._program = program  # the backend's option naming its server program, if it has one
        self._server_name = server_name  # the backend's own name for its server, e.g. "llama-server"
        self.setObjectName("StatusCard")
        self.setStyleSheet("#StatusCard { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 8px; }"
                           "#StatusCard QLabel { background: transparent; }")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 14, 16, 14)
        top = QHBoxLayout()
        self.pill = QLabel()
        self.pill.setObjectName("StatePill")
        self.title = QLabel()
        self.title.setStyleSheet("font-size: 14pt; font-weight: 600;")
        self.title.setWordWrap(True)
        top.addWidget(self.pill, 0, Qt.AlignmentFlag.AlignTop)
        top.addWidget(self.title, 1)
        lay.addLayout(top)
        self.message = WrappingText()  # a URL or path in it wraps, not past the panel
        lay.addWidget(self.message)
        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        self._details: dict[str, WrappingText] = {}
        for row, key in enumerate(("Address", "Version", "Process", "Binary")):
            k = QLabel(key)
            k.setObjectName("Dim")
            v = WrappingText("—")  # a program's path wraps inside, not past the panel
            grid.addWidget(k, row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(v, row, 1)
            self._details[key] = v
        grid.setColumnStretch(1, 1)
        lay.addLayout(grid)

    def set_status(self, status: ServerStatus, settings: ServerSettings) -> None:
        colour = STATE_COLOURS.get(status.state, "#9a9da8")
        self.pill.setText(status.state.value)
        self.pill.setStyleSheet(f"background: {colour};")
        title = _TITLES.get(status.state, "").replace("{server}", self._server_name)
        title = title[:1].upper() + title[1:]  # "the server is …" starts a sentence
        self.title.setText(_ORPHAN_TITLE if status.orphan else title)
        self.message.setText(status.message)
        self.message.setVisible(bool(status.message))
        self._details["Address"].setText(settings.base_url)
        self._details["Version"].setText(status.version or "—")
        if status.exit_code is not None:
            pid = f"pid {status.pid} " if status.pid else ""
            self._details["Process"].setText(f"{pid}exited with code {status.exit_code}")
        elif status.pid and status.state is not ServerState.CRASHED:
            # Starting and stopping are only ever the app's own server (one it launched or is shutting down).
            ours = status.state in (ServerState.RUNNING_MANAGED, ServerState.STARTING, ServerState.STOPPING)
            owner = "managed by ollama-deck" if ours else (status.run_by or "not ours")
            owner = "left running by an earlier ollama-deck, managed again" if status.orphan else owner
            self._details["Process"].setText(f"pid {status.pid} ({owner})")
        else:
            self._details["Process"].setText("—")
        chosen = str(self._program.value_in(settings)) if self._program is not None else ""
        self._details["Binary"].setText(status.binary or chosen or "not found")


_TITLES = {
    ServerState.NOT_INSTALLED: "{server} is not installed",
    ServerState.STOPPED: "No server is running",
    ServerState.STARTING: "Starting the server…",
    ServerState.RUNNING_MANAGED: "Running, managed by ollama-deck",
    ServerState.RUNNING_ATTACHED: "Attached to a running server",
    ServerState.STOPPING: "Stopping the server…",
    ServerState.CRASHED: "The server stopped unexpectedly",
    ServerState.PORT_CONFLICT: "The port is taken by something else",
}


_ORPHAN_TITLE = "Running, left behind by an earlier ollama-deck"
_LOG_PLACEHOLDER = "The log of a server started by ollama-deck appears here."
_ORPHAN_LOG_PLACEHOLDER = ("This server was started by an earlier ollama-deck that was closed without stopping it: "
                           "its lines are read from its log file, and if none appear here its log is not "
                           "available (the status above says which). Stop and start it to see a new log.")
_ATTACHED_LOG_PLACEHOLDERS = {
    ExternalKind.SYSTEMD: "Following the service's journal (journalctl -u ollama.service); its lines appear here.",
    ExternalKind.TRAY_APP: "Following the desktop app's ~/.ollama/logs/server.log; its lines appear here.",
    ExternalKind.OTHER: (
        "This server was not started by ollama-deck and its log cannot be found from here: a server run "
        "in a terminal writes to that terminal.\n"
        "A systemd service logs to the journal: journalctl -u ollama -f\n"
        "The desktop app writes ~/.ollama/logs/server.log"
    ),
}


def log_placeholder(status: ServerStatus) -> str:
    """What the empty log view says for a server in this state."""
    if status.state is ServerState.RUNNING_ATTACHED:
        return _ATTACHED_LOG_PLACEHOLDERS[status.external_kind or ExternalKind.OTHER]
    if status.orphan:
        return _ORPHAN_LOG_PLACEHOLDER
    return _LOG_PLACEHOLDER


class ServerPage(QWidget):
    """Edits settings and drives the server through the context's server view-model, in the backend's
    view of the settings (its tuning mapping: options, names and checks) and with its planner (the launch its
    server makes for a model, which the fit panel prices)."""

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        controller = context.server
        settings = controller.settings  # the settings the server runs, or starts, with
        mapping, planner = context.backend.tuning, context.backend.planner
        self._mapping = mapping
        # A server the backend only attaches to (started on its own machine) is neither restarted nor given settings.
        self._restarts = context.backend.can("restarts_with_settings")
        self._no_restart_reason = "" if self._restarts else context.backend.why_not("restarts_with_settings")
        self.controller = controller
        self._applied = settings
        self._status = controller.status
        self._busy = False
        self._held = controller.held_reason
        self._asked: ServerSettings | None = None  # what this page's own last apply asked for
        self._apply_banner = False  # the banner shows an apply's outcome (replaced when the next one starts)

        self.form = SettingsForm(mapping=mapping)
        self.form.set_settings(settings)
        form_scroll = QScrollArea()
        form_scroll.setWidgetResizable(True)
        form_scroll.setWidget(self.form)
        form_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(10)
        self.card = StatusCard(program=next((o for o in mapping.options if o.kind == PROGRAM), None),
                               server_name=mapping.texts.server_name)
        rl.addWidget(self.card)

        buttons = QHBoxLayout()
        self.start_button = QPushButton("Start server")
        self.start_button.setProperty("accent", True)
        self.stop_button = QPushButton("Stop")
        self.apply_button = QPushButton("Apply settings")
        self.apply_button.setProperty("accent", True)
        for b in (self.start_button, self.stop_button, self.apply_button):
            b.setMinimumHeight(36)
            buttons.addWidget(b)
        if not self._restarts:
            self.start_button.setText("Attach")
            self.apply_button.setVisible(False)
        buttons.addStretch(1)
        rl.addLayout(buttons)
        self.reason_label = QLabel()
        self.reason_label.setObjectName("Dim")
        self.reason_label.setWordWrap(True)
        rl.addWidget(self.reason_label)
        self.logged_command = LoggedCommand()
        rl.addWidget(self.logged_command)


        self.banner = Banner()
        rl.addWidget(self.banner)
        # the backend's planner prices the launch its server really makes, and says the command where it plans one
        self.fit_panel = FitPanel(mapping=mapping, planner=planner, learner=context.runtime_allowance)
        self.fit_panel.set_settings(settings)
        self.log_view = LogView()
        self.tabs = QTabWidget()
        self.tabs.setObjectName("ServerTabs")
        self.fit_tab_index = self.tabs.addTab(self.fit_panel, self.fit_panel.price_title)
        self.fit_panel.title_changed.connect(lambda title: self.tabs.setTabText(self.fit_tab_index, title))
        self.hint_box = QFrame()
        self.hint_box.setObjectName("HintBox")
        self.hint_box.setStyleSheet("#HintBox { background: #132a3a; border: 1px solid #2f6f9a; border-radius: 6px; }"
                                    "#HintBox QLabel { background: transparent; }")
        hl = QVBoxLayout(self.hint_box)
        hint_title = QLabel("How to apply these settings to this server")
        hint_title.setStyleSheet("font-weight: 600;")
        self.hint_text = QLabel()
        self.hint_text.setWordWrap(True)
        self.hint_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        mono = QFont("DejaVu Sans Mono")
        mono.setPointSizeF(10)
        self.hint_text.setFont(mono)
        copy = QPushButton("Copy")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.hint_text.text()))
        hl.addWidget(hint_title)
        hl.addWidget(self.hint_text)
        hl.addWidget(copy, 0, Qt.AlignmentFlag.AlignRight)
        hl.addStretch(1)
        self.tabs.addTab(self.log_view, "Server log")
        self.hint_tab_index = self.tabs.addTab(self.hint_box, "Apply on this server")
        self.tabs.setTabVisible(self.hint_tab_index, False)
        self.tabs.setMinimumHeight(430)
        rl.addWidget(self.tabs, 1)
        self.confirm_dialog: QMessageBox | None = None

        right_scroll = QScrollArea()
        right_scroll.setWidgetResizable(True)
        right_scroll.setWidget(right)
        right_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # each side at least as wide as its content needs (it scrolls down, never sideways, nothing cut)
        for area, content in ((form_scroll, self.form), (right_scroll, right)):
            area.setMinimumWidth(content.minimumSizeHint().width() + area.verticalScrollBar().sizeHint().width()
                                 + 2 * area.frameWidth())
        split = AdaptiveSplitter(lead=1)  # too narrow for both, the status and its buttons come first
        split.addWidget(form_scroll)
        split.addWidget(right_scroll)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([500, 740])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 12)
        title = QLabel("Server")
        title.setObjectName("PageTitle")
        outer.addWidget(title)
        outer.addWidget(split, 1)

        self.start_button.clicked.connect(self._start)
        self.stop_button.clicked.connect(self._stop)
        self.apply_button.clicked.connect(self._apply)
        self.form.edited.connect(lambda _s: self._refresh())
        self.form.edited.connect(self.fit_panel.set_settings)
        self.fit_panel.model_selected.connect(controller.fetch_model_shape)
        self.fit_panel.grid_cell_chosen.connect(self._use_grid_cell)
        controller.model_params_ready.connect(self.fit_panel.set_model_params)
        controller.model_shape_ready.connect(self.fit_panel.set_model_shape)
        controller.models_listed.connect(lambda models: self.fit_panel.set_models([m.name for m in models]))
        controller.version_changed.connect(self.fit_panel.set_version)
        controller.apply_checked.connect(self._on_apply_checked)
        self.form.validity_changed.connect(lambda _ok: self._refresh())
        controller.status_changed.connect(self.set_status)
        controller.log_lines.connect(self.log_view.append_lines)
        controller.busy_changed.connect(self._set_busy)
        controller.held_changed.connect(self._set_held)
        controller.error.connect(lambda text: self.banner.show_message(text, "error"))
        controller.settings_applied.connect(self._on_applied)
        guard_form(self)  # the fit panel's choices too: scrolling the page never changes them
        self.set_status(controller.status)

    def show_slots(self, view: QWidget) -> None:
        """Add the per-slot progress as a tab (only for a backend that reports slots)."""
        self.slots_view = view
        self.tabs.insertTab(1, view, "Slots")
        if isinstance(view, SlotsView):  # its samples carry the command line the server's log gave
            view.command_logged.connect(self.logged_command.set_command)

    # --- reactions ------------------------------------------------------------------------
    def set_status(self, status: ServerStatus) -> None:
        """Show a new server status and enable what makes sense in it."""
        was_running, was_managed = self._status.state.is_running, self._status.state is ServerState.RUNNING_MANAGED
        self._status = status
        if status.state.is_running and (not was_running or not self.fit_panel.model_combo.count()):
            self.controller.list_models()
        self.card.set_status(status, self._applied)
        if status.state is ServerState.CRASHED and status.last_log_lines:
            self.banner.show_message(
                f"{status.message}\nLast log lines:\n" + "\n".join(status.last_log_lines[-8:]), "error")
        elif status.state is ServerState.PORT_CONFLICT:
            self.banner.show_message(status.message, "error")
        elif status.state is ServerState.RUNNING_MANAGED and not was_managed and self._exposure_notice():
            self.banner.show_message(self._exposure_notice(), "warning")  # every start, however it was asked for
        attached = status.state is ServerState.RUNNING_ATTACHED and bool(status.apply_hint)
        self.tabs.setTabVisible(self.hint_tab_index, attached)
        self.log_view.text.setPlaceholderText(log_placeholder(status))
        self.hint_text.setText(status.apply_hint)
        self.logged_command.set_running(status.state.is_running)
        self._refresh()

    def _on_applied(self, settings: ServerSettings) -> None:
        """Settings put in force, by this page or elsewhere (a sweep's winner): the form shows them, with
        whatever the user was still editing kept on top."""
        before, self._applied = self._applied, settings
        if settings != self._asked:
            self._clear_apply_banner()  # another apply began: the last one's outcome is history
        shown = self.form.settings()
        if shown != settings:
            self.form.set_settings(carry_edits(shown, before, settings))
            self.fit_panel.set_settings(self.form.settings())
        self._refresh()

    def _clear_apply_banner(self) -> None:
        if self._apply_banner:
            self._apply_banner = False
            self.banner.clear()

    def _set_busy(self, busy: bool) -> None:
        self._busy = busy
        self._refresh()

    def _set_held(self, reason: str) -> None:
        self._held = reason
        if reason:
            self._clear_apply_banner()  # a sweep restarts the server: the last apply's outcome no longer holds
        self._refresh()

    def _refresh(self) -> None:
        state = self._status.state
        valid = self.form.validation().ok
        dirty = self.form.settings() != self._applied
        transitional = state in (ServerState.STARTING, ServerState.STOPPING) or self._busy or bool(self._held)
        can_start = state in (ServerState.STOPPED, ServerState.CRASHED) and not transitional
        self.start_button.setEnabled(can_start and valid)
        self.stop_button.setEnabled(self._status.can_stop and not self._busy and not self._held)
        self.apply_button.setEnabled(valid and dirty and not transitional)
        self.apply_button.setText("Apply and restart" if state is ServerState.RUNNING_MANAGED else "Apply settings")
        reasons = [self._held] if self._held else []
        if self._no_restart_reason:
            reasons.append(self._no_restart_reason)
        if not valid:
            reasons.append("Fix the fields marked in red to apply or start.")
        if self._status.stop_disabled_reason and state is ServerState.RUNNING_ATTACHED:
            reasons.append("Stop is disabled: " + self._status.stop_disabled_reason)
        if state is ServerState.NOT_INSTALLED:
            name = self._mapping.texts.server_name
            reasons.append(f"Start is disabled until the {name} program is found (install {name} or set its path).")
        if state is ServerState.PORT_CONFLICT:
            reasons.append("Start is disabled: choose another port or free this one.")
        if dirty and valid and state is ServerState.RUNNING_ATTACHED:
            reasons.append("This server is not ours: applying saves the settings; the 'Apply on this server' "
                           "tab says how to use them there.")
        self.reason_label.setText("\n".join(reasons))
        self.reason_label.setVisible(bool(reasons))

    def _start(self) -> None:
        self.banner.clear()
        if self.form.settings() != self._applied:
            self._asked = self.form.settings()
            self.controller.apply(self._asked, then_start=True)
        else:
            self.controller.start()

    def _stop(self) -> None:
        self.controller.stop()

    def _apply(self) -> None:
        self.banner.clear()
        settings = self.form.settings()
        est = self.fit_panel.estimate
        if est is not None and est.verdict in (Verdict.SPILLS, Verdict.WONT_LOAD):
            self._confirm_risky(settings, est)
            return
        self._apply_now(settings)

    def _apply_now(self, settings: ServerSettings) -> None:
        self._asked = settings
        model = self.fit_panel.model_name or None
        self.controller.apply(settings, model=model, predicted=self.fit_panel.estimate)

    def _confirm_risky(self, settings: ServerSettings, est: VramEstimate) -> None:
        """Ask before applying settings predicted to spill or not to load (non-blocking dialog)."""
        title, consequence = risky_apply_words(est, self.fit_panel.model_name, self._mapping.texts.server_name)
        box = QMessageBox(QMessageBox.Icon.Warning, title, consequence, QMessageBox.StandardButton.NoButton, self)
        box.setObjectName("ConfirmRiskyApply")
        apply_anyway = box.addButton("Apply anyway", QMessageBox.ButtonRole.AcceptRole)
        keep_current = box.addButton("Keep current settings", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep_current)

        def done(_result: int) -> None:
            if box.clickedButton() is apply_anyway:
                self._apply_now(settings)
            self.confirm_dialog = None

        box.finished.connect(done)
        self.confirm_dialog = box
        box.open()

    def _on_apply_checked(self, report: ApplyReport) -> None:
        self._apply_banner = True
        if report.judgement.keep:
            notice = self._exposure_notice() if self._status.state is ServerState.RUNNING_MANAGED else ""
            self.banner.show_message("\n".join(t for t in ("Applied. " + report.judgement.reason, notice) if t),
                                     "warning" if notice else "info")  # the restart's warning stays in view
            return
        if report.tried == self._asked and report.restored is not None:
            # This page's own values, rolled back: they stay in the form to be edited and tried again.
            self.form.set_settings(carry_edits(self.form.settings(), report.restored, report.tried))
            self.fit_panel.set_settings(self.form.settings())
            self._refresh()
        text = "Rolled back to the last good settings. " + report.judgement.reason
        if not report.rollback_ok:
            text += " The server did not come back with the restored settings either; see the server log."
        self.banner.show_message(text, "error")

    def _exposure_notice(self) -> str:
        """The warning for the settings the server runs with, when they open it to others."""
        return exposure_notice(self.controller.settings, self._mapping)

    def _use_grid_cell(self, parallel: int, context: int) -> None:
        """Put a heat-map cell's parallel and context into the form."""
        self.form.set_settings(self.form.settings().replace(num_parallel=parallel, context_length=context))
        self.fit_panel.set_settings(self.form.settings())
        self._refresh()
