"""The Prompt console page: talk to a model in thinking or non-thinking mode and see each reply's
figures; fire a burst of identical prompts; compare both modes side by side."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QFileDialog, QHBoxLayout, QLabel, QMenu, QPlainTextEdit,
                               QPushButton, QScrollArea, QSpinBox, QStackedWidget, QToolButton,
                               QVBoxLayout, QWidget)

from app.core.console.output_length import DEFAULT_NUM_PREDICT, NO_CAP, cap_note
from app.services.prompts import MAX_BURST, PromptRequest
from app.core.console.conversation import (ab_json, ab_markdown, burst_csv, burst_json, conversation_json,
                                   conversation_markdown)
from app.core.errors import DeckError
from app.core.models import LocalModel
from app.core.console.presets import BUILTIN_PRESETS, Preset
from app.ui.pages.context import PageContext
from app.ui.pages.prompt.ab import AbView
from app.ui.pages.prompt.burst import BurstView
from app.ui.pages.prompt.controls import SEGMENT_STYLE, ConsoleControls
from app.ui.pages.prompt.figures import ReplyFigures
from app.ui.pages.prompt.presets import PresetBar
from app.ui.pages.prompt.reply import REPLY_STYLE, Conversation, ReplyView
from app.ui.pages.prompt.session import ConsoleRun, ConsoleSession, Drained
from app.ui.widgets.adaptive_splitter import AdaptiveSplitter
from app.ui.widgets.elided_label import ElidedLabel
from app.ui.widgets.forms import InlineMessage
from app.core.units import MIB

MODES = (("chat", "Chat"), ("burst", "Burst"), ("ab", "A/B"))
MAX_FILE_BYTES = 4 * MIB
EXPORT_FILTERS = {"md": "Markdown (*.md)", "json": "JSON (*.json)", "csv": "CSV (*.csv)"}


class ConsolePage(QWidget):
    """Prompt console wired to the context's server (for its URL and state), loop thread, console client,
    token meter and presets; the figures are named in the backend's words."""

    _presets_save_failed = Signal(str)
    _presets_saved_notice = Signal(str)  # a copy the save kept, named for the user

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._server_name = context.server_name  # how the status line names the server, e.g. "llama-server"
        words = self._words = context.backend.reply_words  # the server's names for a reply's figures
        self.setStyleSheet(REPLY_STYLE + SEGMENT_STYLE)
        self._loop = context.loop
        self._server = context.server
        self._write_file = context.write_file
        preset_store = self._preset_store = context.presets
        self.session = ConsoleSession(context.loop, context.backend.console, context.meter, self,
                                      watchdog=context.watchdog, counter_factory=context.backend.prompt_counter,
                                      catalog_factory=context.backend.catalog
                                      if context.backend.capabilities.lists_loaded else None)
        self.run: ConsoleRun | None = None
        self._last_chat_run: ConsoleRun | None = None
        self._views: dict[ConsoleRun, ReplyView] = {}
        self.history: list[dict[str, str]] = []
        self._models_url = ""
        self._burst_request: PromptRequest | None = None  # what the last finished burst sent, for its export
        self._ab_request: PromptRequest | None = None  # the same for the last finished A/B comparison

        title = QLabel("Prompt console")
        title.setObjectName("PageTitle")
        self.mode_group = QButtonGroup(self)
        mode_row = QHBoxLayout()
        mode_row.setSpacing(0)
        self.mode_buttons: dict[str, QPushButton] = {}
        for i, (key, text) in enumerate(MODES):
            button = QPushButton(text)
            button.setObjectName("ThinkSegment")
            button.setProperty("segment", "first" if i == 0 else "last" if i == len(MODES) - 1 else "middle")
            button.setCheckable(True)
            button.setMinimumWidth(90)
            self.mode_group.addButton(button, i)
            self.mode_buttons[key] = button
            mode_row.addWidget(button)
        self.mode_buttons["chat"].setChecked(True)
        self.ab_hint = ElidedLabel(min_width_px=80, whole_first=True)  # why A/B is off, beside its button
        self.ab_hint.setObjectName("Dim")
        self.ab_hint.hide()
        self.server_label = ElidedLabel(min_width_px=120)  # gives way to the mode buttons and the A/B hint
        self.server_label.setObjectName("Dim")
        self.server_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        top = QHBoxLayout()
        top.addWidget(title)
        top.addSpacing(24)
        top.addLayout(mode_row)
        top.addSpacing(10)
        top.addWidget(self.ab_hint)
        top.addWidget(self.server_label, 1)

        self.controls = ConsoleControls(words=words)
        controls_scroll = QScrollArea()
        controls_scroll.setWidgetResizable(True)
        controls_scroll.setWidget(self.controls)
        controls_scroll.setMinimumWidth(330)

        self.figures = ReplyFigures(words=words)
        self.conversation = Conversation(words=words)
        chat = QWidget()
        cl = QVBoxLayout(chat)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(10)
        cl.addWidget(self.figures)
        cl.addWidget(self.conversation, 1)
        self.burst_view = BurstView(words=words)
        self.ab_view = AbView(words=words)
        self.stack = QStackedWidget()
        for widget in (chat, self.burst_view, self.ab_view):
            self.stack.addWidget(widget)

        loaded = preset_store.load() if preset_store is not None else None
        self.presets = PresetBar(loaded.presets if loaded else list(BUILTIN_PRESETS), self._preset_fields,
                                 self._save_presets)
        if loaded:
            self.presets.show_load_problems(loaded.problems)
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setObjectName("prompt")
        self.prompt_edit.setPlaceholderText("Type a prompt, or pick a test prompt above…  (Ctrl+Enter sends)")
        # 96 px where there is room; down to 3 lines when a message above it needs the height (at 720 px high).
        self.prompt_edit.setMinimumHeight(60)
        self.prompt_edit.setMaximumHeight(96)
        self.prompt_edit.setStyleSheet("font-size: 12pt;")
        self.load_file_button = QPushButton("Load file…")
        self.copies_label = QLabel("Copies")
        self.copies = QSpinBox()
        self.copies.setObjectName("copies")
        self.copies.setRange(1, MAX_BURST)
        self.copies.setValue(8)
        self.copies.setToolTip(f"How many identical requests to send at once (1–{MAX_BURST})")
        self.markdown_check = QCheckBox("Markdown")
        self.markdown_check.setChecked(True)
        self.markdown_check.setToolTip("Show finished answers rendered (headings, lists, tables, code); "
                                       "off shows the raw text. Answers stream as plain text either way.")
        self.export_button = QToolButton()
        self.export_button.setText("Export ▾")
        self.export_button.setObjectName("ExportConversation")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self._export_menus = {mode: QMenu(self.export_button) for mode in ("chat", "burst", "ab")}
        self._export_menus["chat"].addAction("Conversation as Markdown…", lambda: self._export_dialog("md"))
        self._export_menus["chat"].addAction("Conversation as JSON…", lambda: self._export_dialog("json"))
        self._export_menus["burst"].addAction("Burst replies as CSV…", lambda: self._export_dialog("csv"))
        self._export_menus["burst"].addAction("Burst as JSON (with the summary)…", lambda: self._export_dialog("json"))
        self._export_menus["ab"].addAction("Comparison as Markdown…", lambda: self._export_dialog("md"))
        self._export_menus["ab"].addAction("Comparison as JSON…", lambda: self._export_dialog("json"))
        self.export_button.setMenu(self._export_menus["chat"])
        self.export_status = ElidedLabel()  # cut to its room: the buttons beside it keep their size
        self.export_status.setObjectName("Dim")
        self.clear_button = QPushButton("Clear")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setProperty("danger", True)
        self.send_button = QPushButton("Send")
        self.send_button.setProperty("accent", True)
        for button in (self.stop_button, self.send_button):
            button.setMinimumWidth(110)
            button.setMinimumHeight(38)
        self.message = InlineMessage(prominent=True)
        buttons = QHBoxLayout()
        buttons.addWidget(self.load_file_button)
        buttons.addSpacing(12)
        buttons.addWidget(self.copies_label)
        buttons.addWidget(self.copies)
        buttons.addStretch(1)
        buttons.addWidget(self.markdown_check)
        buttons.addWidget(self.export_button)
        for button in (self.clear_button, self.stop_button, self.send_button):
            buttons.addWidget(button)

        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.setSpacing(8)
        rl.addWidget(self.stack, 1)
        rl.addWidget(self.presets)
        rl.addWidget(self.prompt_edit)
        rl.addWidget(self.message)
        rl.addLayout(buttons)
        self.export_status.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        rl.addWidget(self.export_status)  # a row of its own, under the buttons, shown while it says something
        split = AdaptiveSplitter(lead=1)  # too narrow for both, the reply and the Send button come first
        split.addWidget(controls_scroll)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setSizes([360, 900])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 12)
        outer.setSpacing(10)
        outer.addLayout(top)
        outer.addWidget(split, 1)

        self.mode_group.idClicked.connect(self._on_mode)
        self.send_button.clicked.connect(self.send)
        self.stop_button.clicked.connect(self.stop)
        self.clear_button.clicked.connect(self.clear)
        self.markdown_check.toggled.connect(self.conversation.set_markdown)
        self.load_file_button.clicked.connect(self._load_file)
        for keys in ("Ctrl+Return", "Ctrl+Enter"):
            QShortcut(QKeySequence(keys), self).activated.connect(self.send)
        self.controls.model_changed.connect(self._on_model_changed)
        self.controls.thinking_changed.connect(self._refresh_buttons)
        self.controls.refresh_requested.connect(self.refresh_models)
        self.presets.preset_chosen.connect(self.apply_preset)
        self._presets_save_failed.connect(self.presets.show_save_error)
        self._presets_saved_notice.connect(self.presets.message.show_warning)
        self.session.models_loaded.connect(self._on_models)
        self.session.models_failed.connect(lambda _url, text: self.controls.show_models_error(text))
        self.session.details_loaded.connect(lambda model, d: self.controls.set_details(model, d))
        self.session.details_failed.connect(lambda model, text: self.controls.set_details(model, None, text))
        self.session.run_progress.connect(self._on_progress)
        self.session.run_finished.connect(self._on_finished)
        self._server.status_changed.connect(self._on_status)
        self._server.models_listed.connect(self._on_listed_elsewhere)  # a pull or delete on the Models page
        self._on_mode(0)
        self._on_status(self._server.status)

    # --- server and models ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The server this page talks to."""
        return self._server.settings.base_url

    @property
    def mode(self) -> str:
        """'chat', 'burst' or 'ab'."""
        return MODES[self.mode_group.checkedId()][0]

    def _on_status(self, status: Any) -> None:
        version = f" · {self._server_name} {status.version}" if status.version else ""
        self.server_label.setText(f"{self.base_url} · {status.state.value}{version}")
        if status.state.is_running and self._models_url != self.base_url:
            self.refresh_models()
        elif not status.state.is_running:
            self._models_url = ""
            self.controls.show_models_error(f"No server answers at {self.base_url}: start or attach one on "
                                            "the Server page.")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        """Coming back to the page re-reads the models (one may have been pulled meanwhile)."""
        super().showEvent(event)
        if self._server.status.state.is_running and self._models_url:
            self.refresh_models()

    def refresh_models(self) -> None:
        """Read the local models again."""
        self._models_url = self.base_url
        self.session.refresh_models(self.base_url)

    def _on_models(self, url: str, models: list[LocalModel]) -> None:
        if url == self.base_url:
            self.controls.set_models(models)

    def _on_listed_elsewhere(self, models: list[LocalModel]) -> None:
        if self._models_url == self.base_url:  # the page has listed this server's models before
            self.controls.set_models(models)

    def _on_model_changed(self, model: str) -> None:
        self.controls.set_details(model, None)
        if model:
            self.session.load_details(self.base_url, model)

    # --- presets --------------------------------------------------------------------------
    def _preset_fields(self) -> dict[str, Any]:
        return {"prompt": self.prompt_edit.toPlainText(), "think": self.controls.thinking_choice(),
                "system": self.controls.system(), "num_predict": self._preset_cap()}

    def _preset_cap(self) -> int | None:
        # None is the console's default cap (a shipped preset stays unedited at it); a preset keeps no "no cap".
        value = self.controls.num_predict.value()
        return None if value in (NO_CAP, DEFAULT_NUM_PREDICT) else value

    def apply_preset(self, preset: Preset) -> None:
        """Fill the prompt, mode, system prompt and num_predict from a preset."""
        self.prompt_edit.setPlainText(preset.prompt)
        if not self.controls.set_think(preset.think):
            # The switch stays off: a preset never changes a control the model does not offer.
            self.presets.message.show_warning(
                f"This preset asks for thinking; not applied: {self.controls.model()} cannot think, so the "
                "prompt goes without it (pick a model that can think to use the preset's mode).")
        self.controls.system_edit.setPlainText(preset.system)
        # A preset without its own cap gets the console's default one, not "no cap".
        self.controls.num_predict.setValue(preset.num_predict or DEFAULT_NUM_PREDICT)

    def _save_presets(self, presets: list[Preset]) -> None:
        store = self._preset_store
        if store is None:
            return

        async def work() -> None:
            try:
                notes = await asyncio.to_thread(store.save, presets)
                if notes:
                    self._presets_saved_notice.emit(" ".join(notes))
            except DeckError as exc:
                self._presets_save_failed.emit(exc.user_text())
            except Exception as exc:  # noqa: BLE001 - any failure is shown, the edits stay on screen
                self._presets_save_failed.emit(f"Could not save the presets: {exc!r}")

        self._loop.submit(work())

    def _load_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Insert a text file into the prompt")
        if path:
            self.insert_file(Path(path))

    def insert_file(self, path: Path) -> None:
        """Append a text file (a long document) to the prompt."""
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                self.message.show_error(f"{path.name} is over {MAX_FILE_BYTES // MIB} MiB; use a shorter text.")
                return
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            self.message.show_error(f"Could not read {path}: {exc.strerror or exc}")
            return
        current = self.prompt_edit.toPlainText()
        self.prompt_edit.setPlainText(f"{current}\n\n{text}" if current.strip() else text)
        self.message.clear_message()

    # --- sending --------------------------------------------------------------------------
    def _on_mode(self, _id: int) -> None:
        self.stack.setCurrentIndex(self.mode_group.checkedId())
        burst = self.mode == "burst"
        self.copies.setVisible(burst)
        self.copies_label.setVisible(burst)
        chat = self.mode == "chat"
        for widget in (self.clear_button, self.markdown_check):
            widget.setVisible(chat)
        exportable = self.mode in self._export_menus
        self.export_button.setVisible(exportable)
        self.export_status.setVisible(exportable and bool(self.export_status.full_text()))
        if exportable:
            self.export_button.setMenu(self._export_menus[self.mode])
        self.send_button.setText({"chat": "Send", "burst": "Send burst", "ab": "Compare"}[self.mode])
        self._refresh_buttons()

    def set_mode(self, mode: str) -> None:
        """Switch to 'chat', 'burst' or 'ab'."""
        self.mode_buttons[mode].setChecked(True)
        self._on_mode(self.mode_group.checkedId())

    def ab_unavailable(self) -> str:
        """Why A/B cannot run on the chosen model ('' when it can, or while that is unknown)."""
        why = self.controls.thinking_reason()
        return f"A/B compares thinking with non-thinking, and {self.controls.model()} cannot think: {why}" if why else ""

    def _refresh_buttons(self) -> None:
        running = self.run is not None
        ab_off = self.ab_unavailable()
        self.send_button.setEnabled(not running and not (self.mode == "ab" and ab_off))
        self.send_button.setToolTip(ab_off if self.mode == "ab" else "")
        self.stop_button.setEnabled(running)
        something = {"chat": bool(self.conversation.turns), "burst": self.burst_view.summary is not None,
                     "ab": self._ab_request is not None}[self.mode]
        self.export_button.setEnabled(something and not running)
        for button in self.mode_buttons.values():
            button.setEnabled(not running)
        ab = self.mode_buttons["ab"]
        ab.setEnabled(not running and not ab_off)
        ab.setToolTip(ab_off or "The same prompt with thinking and without, side by side, and what thinking costs")
        self.ab_hint.setText("A/B needs a model that can think" if ab_off else "")
        self.ab_hint.setToolTip(ab_off)
        self.ab_hint.setVisible(bool(ab_off))

    def send(self) -> ConsoleRun | None:
        """Send the prompt in the current mode; None (with a message) when it cannot be sent."""
        if self.run is not None:
            return None
        model, prompt = self.controls.model(), self.prompt_edit.toPlainText()
        problem = ("Choose a model first (none is listed? Pull one on the Models page)." if not model else
                   "Type a prompt or pick a test prompt." if not prompt.strip() else
                   "A/B needs a model with the thinking capability." if self.mode == "ab"
                   and self.controls.thinking_supported is False else "")
        if problem:
            self.message.show_error(problem)
            return None
        self.message.clear_message()
        if self._server.held_reason:
            self.message.show_warning("A benchmark sweep is running: this request competes with its measured "
                                      "requests and changes its figures.")
        request = PromptRequest(model=model, prompt=prompt, think=self.controls.think_value(),
                                system=self.controls.system(), options=self.controls.options(),
                                history=tuple(self.history) if self.mode == "chat" else ())
        if self.mode == "chat":
            turn = self.conversation.add_turn(prompt, model, request.think, request.system or "")
            self.figures.clear()
            run = self.session.start(self.base_url, "chat", request)
            self._views[run] = turn.reply
            self._last_chat_run = run
        elif self.mode == "burst":
            self.burst_view.reset(self.copies.value())
            run = self.session.start(self.base_url, "burst", request, copies=self.copies.value())
        else:
            think = request.think if isinstance(request.think, str) else True
            self.ab_view.reset(think)
            self._ab_request = None  # the view now shows a new comparison
            run = self.session.start(self.base_url, "ab", request, think=think)
        self.run = run
        self._refresh_buttons()
        return run

    def stop(self) -> None:
        """Stop what is streaming, at once."""
        if self.run is None:
            return
        self.session.stop(self.run)
        self.run = None
        self._refresh_buttons()

    def clear(self) -> None:
        """Forget the conversation (stopping a reply in progress)."""
        self.stop()
        self.history = []
        self.conversation.clear()
        self.figures.clear()
        self.export_status.clear()
        self.export_status.hide()
        self._refresh_buttons()

    # --- export ---------------------------------------------------------------------------
    def _export_dialog(self, kind: str) -> None:
        what, export = {"chat": ("conversation", self.export_conversation), "burst": ("burst", self.export_burst),
                        "ab": ("comparison", self.export_comparison)}[self.mode]
        stamp = time.strftime("%Y%m%d-%H%M")
        path, _ = QFileDialog.getSaveFileName(self, f"Export {what}", f"{what}-{stamp}.{kind}", EXPORT_FILTERS[kind])
        if path:
            export(kind, Path(path))

    def export_conversation(self, kind: str, path: Path) -> bool:
        """Write the conversation as Markdown ('md') or JSON ('json'), atomically; says where, or why not."""
        records = self.conversation.records()
        if not records:
            self.message.show_error("Nothing to export yet: send a prompt first.")
            return False
        stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
        text = (conversation_markdown(records, self.base_url, stamp, words=self._words) if kind == "md"
                else conversation_json(records, self.base_url, stamp))
        return self._write_export(path, text, f"{len(records)} turn{'s' if len(records) != 1 else ''}")

    def export_burst(self, kind: str, path: Path) -> bool:
        """Write the last burst's replies as CSV ('csv') or JSON with its summary ('json')."""
        view = self.burst_view
        if view.summary is None:
            self.message.show_error("Nothing to export yet: send a burst first and let it finish.")
            return False
        records = view.records()
        if kind == "csv":
            text = burst_csv(records)
        else:
            sent = self._burst_request
            text = burst_json(records, view.summary, sent.model if sent else "", sent.think if sent else None,
                              sent.prompt if sent else "", self.base_url, time.strftime("%Y-%m-%d %H:%M:%S %z"))
        return self._write_export(path, text, f"{len(records)} replies")

    def export_comparison(self, kind: str, path: Path) -> bool:
        """Write the last A/B comparison as Markdown ('md') or JSON ('json')."""
        if self._ab_request is None:
            self.message.show_error("Nothing to export yet: run a comparison first and let it finish.")
            return False
        with_thinking, without = self.ab_view.records(self._ab_request)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S %z")
        text = (ab_markdown(with_thinking, without, self.ab_view.cost, self.base_url, stamp, words=self._words)
                if kind == "md" else ab_json(with_thinking, without, self.ab_view.cost, self.base_url, stamp))
        return self._write_export(path, text, "the comparison")

    def _write_export(self, path: Path, text: str, what: str) -> bool:
        try:
            self._write_file(path, text.encode("utf-8"))
        except OSError as exc:
            self.message.show_error(f"Could not export to {path}: {exc.strerror or exc}")
            return False
        self.message.clear_message()
        self.export_status.setText(f"Saved {what} to {path.name}")
        self.export_status.setToolTip(str(path))
        self.export_status.show()
        return True

    def _on_progress(self, run: ConsoleRun, drained: Drained) -> None:
        if run.kind == "chat":
            view = self._views.get(run)
            if view is not None:
                view.append(drained.thinking.get(0, ""), drained.content.get(0, ""))
                if 0 in drained.live:
                    view.set_live(drained.live[0])
            if run is self.run and 0 in drained.live:
                self.figures.show_stats(drained.live[0], live=True)
        elif run.kind == "burst":
            self.burst_view.update_live(drained.live)
            for outcome in drained.outcomes:
                self.burst_view.finish_reply(outcome)
        else:
            for index in set(drained.thinking) | set(drained.content):
                column = self.ab_view.column(index)
                column.reply.append(drained.thinking.get(index, ""), drained.content.get(index, ""))
            for index, stats in drained.live.items():
                self.ab_view.column(index).reply.set_live(stats)
                self.ab_view.column(index).show_stats(stats)
            for outcome in drained.outcomes:
                self.ab_view.finish_reply(outcome)

    def _on_finished(self, run: ConsoleRun) -> None:
        if run.kind == "chat":
            outcome = run.outcomes.get(0)
            view = self._views.pop(run, None)
            if view is not None:
                view.finish(outcome, stopped=run.stopped)
                if outcome is not None:
                    view.show_note(cap_note(run.request.options.num_predict, outcome.stats.done_reason,
                                            "raise num_predict under Options"))
            if outcome is not None and outcome.stats.streamed_tokens and run is self._last_chat_run:
                self.figures.show_stats(outcome.stats)
            if outcome is not None and outcome.error is None and outcome.content:
                self.history += [{"role": "user", "content": run.request.prompt},
                                 {"role": "assistant", "content": outcome.content}]
        elif run.kind == "burst":
            self.burst_view.finish(run.stopped)
            self._burst_request = run.request
        else:
            for index in (0, 1):
                if index not in run.outcomes:
                    self.ab_view.column(index).reply.finish(None, stopped=run.stopped)
            if all(i in run.outcomes and run.outcomes[i].ok for i in (0, 1)):
                self.ab_view.show_cost(run.outcomes[0].stats, run.outcomes[1].stats)
            self._ab_request = run.request
        if run.error:
            self.message.show_error(run.error)
        if run is self.run:
            self.run = None
            self._refresh_buttons()

    def shutdown(self) -> None:
        """Stop streaming and close connections (call on quit)."""
        self.stop()
        self.session.shutdown()


__all__ = ["ConsolePage"]
