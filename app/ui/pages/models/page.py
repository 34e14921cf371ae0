"""The Models page: local and loaded models with their fit on this GPU, pull with progress,
delete, unload, preload, and create a tuned variant."""

from __future__ import annotations

import html
import re
from typing import Any
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QMessageBox, QPushButton, QScrollArea, QSplitter, QVBoxLayout,
                               QWidget)

from app.core.memory.allowance import DEFAULT_ALLOWANCE, RuntimeAllowance
from app.core.memory.estimator import GpuMemory
from app.core.memory.model_fit import FitVerdict
from app.core.memory.verdict import Verdict
from app.core.models import LocalModel, ModelDetails, RunningModel
from app.core.pull_progress import fmt_bytes
from app.core.server.state import ServerStatus
from app.core.telemetry import GpuInfo
from app.ui.pages.context import PageContext
from app.ui.pages.models.create import CreatePanel
from app.ui.pages.models.pull import PullPanel
from app.ui.pages.models.session import ModelsSession
from app.ui.pages.models.table import VERDICT_COLOURS, ModelsTable
from app.ui.widgets.allowance_bridge import AllowanceBridge
from app.ui.widgets.forms import InlineMessage
from app.core.units import MIB

_FP8_SUFFIX_RE = re.compile(r"[-_.]?(fp8|float8|f8|e4m3|e5m2).*$")


def _unavailable_label(name: str) -> QLabel:
    label = QLabel()
    label.setObjectName(name)
    label.setWordWrap(True)
    label.setStyleSheet("color: #f0b429; font-size: 11.5pt;")
    label.hide()
    return label


def ask_to_confirm(parent: QWidget, title: str, text: str) -> bool:
    """A Yes/No question; True for Yes."""
    answer = QMessageBox.question(parent, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                  QMessageBox.StandardButton.No)
    return answer == QMessageBox.StandardButton.Yes


class ModelsPage(QWidget):
    """Everything about the server's models, kept current with the server's state."""

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._server = server = context.server
        self.backend = backend = context.backend
        self.session = ModelsSession(context.loop, backend.catalog, backend.model_rules.pull_failure_hint,
                                     backend.tuning.setting_name("context_length") or "the context setting", self,
                                     planner=backend.planner)
        self.confirm: Callable[[str, str], bool] = lambda title, text: ask_to_confirm(self, title, text)
        self._gpu_info = context.gpu.info()
        self._gpu_reason = context.gpu.unavailable_reason
        self._fit_gpu: GpuMemory | None = None  # the GPU as the fit panel prices it (set_gpu_memory)
        self._learner = context.runtime_allowance  # the runtime figure learnt on this machine's GPU, where known
        if self._learner is not None:
            self._allowance_bridge = AllowanceBridge(self._learner, self)
            self._allowance_bridge.changed.connect(lambda _allowance: self._reprice())
        self.local: list[LocalModel] = []
        self.running: list[RunningModel] = []
        self.details: dict[str, ModelDetails] = {}
        self.verdicts: dict[str, FitVerdict] = {}
        self._listed_url = ""
        self._held = ""

        title = QLabel("Models")
        title.setObjectName("PageTitle")
        self.refresh_button = QPushButton("Refresh")
        top = QHBoxLayout()
        top.addWidget(title)
        top.addStretch(1)
        top.addWidget(self.refresh_button)
        self.context_label = QLabel()
        self.context_label.setWordWrap(True)
        self.context_label.setStyleSheet("color: #c9cbd3; font-size: 11.5pt;")

        self.table = ModelsTable()
        self.table.setMinimumHeight(170)
        self.verdict_label = QLabel("Select a model to see why it fits or not.")
        self.verdict_label.setObjectName("VerdictText")
        self.verdict_label.setWordWrap(True)
        self.verdict_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict_label.setStyleSheet("font-size: 11.5pt;")
        self.preload_button = QPushButton("Preload")
        self.preload_button.setToolTip("Load into memory now, so the first prompt does not wait for it")
        self.unload_button = QPushButton("Unload")
        self.unload_button.setToolTip("Free its memory now (keep_alive 0)")
        self.delete_button = QPushButton("Delete…")
        self.delete_button.setProperty("danger", True)
        self.variant_button = QPushButton("Create variant from it")
        actions = QHBoxLayout()
        for button in (self.preload_button, self.unload_button, self.delete_button, self.variant_button):
            actions.addWidget(button)
        actions.addStretch(1)
        # What this server does not offer, in one line, in place of buttons that could never work.
        self.not_offered_label = QLabel()
        self.not_offered_label.setObjectName("Dim")
        self.not_offered_label.setWordWrap(True)
        self.not_offered_label.hide()
        self.held_label = QLabel()
        self.held_label.setObjectName("Dim")
        self.held_label.setWordWrap(True)
        self.held_label.hide()
        self.message = InlineMessage(prominent=True)

        upper = QWidget()
        ul = QVBoxLayout(upper)
        ul.setContentsMargins(0, 0, 0, 0)
        ul.setSpacing(8)
        ul.addWidget(self.table, 1)
        ul.addWidget(self.verdict_label)
        ul.addLayout(actions)
        ul.addWidget(self.not_offered_label)
        ul.addWidget(self.held_label)
        ul.addWidget(self.message)
        self.pull_panel = PullPanel(backend.model_rules)
        self.create_panel = CreatePanel(backend.model_rules)
        # Shown above a panel the backend cannot serve, saying why (the panel itself is disabled).
        self.pull_unavailable = _unavailable_label("pull_unavailable")
        self.create_unavailable = _unavailable_label("create_unavailable")
        lower = QWidget()
        ll = QHBoxLayout(lower)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.setSpacing(12)
        self._lower_scrolls: list[QScrollArea] = []
        self._holders: dict[str, QVBoxLayout] = {}
        for panel, why in ((self.pull_panel, self.pull_unavailable), (self.create_panel, self.create_unavailable)):
            holder = QWidget()
            hl = QVBoxLayout(holder)
            hl.setContentsMargins(0, 0, 6, 0)
            hl.addWidget(why)
            hl.addWidget(panel, 1 if panel is self.pull_panel else 0)
            self._holders["pull" if panel is self.pull_panel else "create"] = hl
            if panel is self.create_panel:
                hl.addStretch(1)
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            scroll.setWidget(holder)
            ll.addWidget(scroll, 1)
            self._lower_scrolls.append(scroll)
        self.forms_area = lower
        self._forms_layout = ll
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(upper)
        split.addWidget(lower)
        split.setChildrenCollapsible(False)
        split.setSizes([400, 400])
        outer = QVBoxLayout(self)
        outer.setContentsMargins(16, 12, 16, 12)
        outer.setSpacing(8)
        outer.addLayout(top)
        outer.addWidget(self.context_label)
        outer.addWidget(split, 1)

        self.pull_panel.sizes_for = self._sizes_for
        self.create_panel.context_for = self._variant_context
        self.refresh_button.clicked.connect(self.refresh)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.preload_button.clicked.connect(lambda: self._act("preload"))
        self.unload_button.clicked.connect(lambda: self._act("unload"))
        self.delete_button.clicked.connect(lambda: self._act("delete"))
        self.variant_button.clicked.connect(lambda: self.create_panel.set_base(self.table.selected_name()))
        self.pull_panel.pull_requested.connect(self.pull)
        self.pull_panel.cancel_requested.connect(self.cancel_pull)
        self.create_panel.create_requested.connect(self.create_variant)
        s = self.session
        s.models_loaded.connect(self._on_models)
        s.models_failed.connect(lambda _url, text: self.message.show_error(text))
        s.details_loaded.connect(self._on_details)
        s.details_failed.connect(self._on_details_failed)
        s.verdicts_ready.connect(self._on_verdicts)
        s.pull_progress.connect(lambda _name, snap: self.pull_panel.show_progress(snap))
        s.pull_finished.connect(self._on_pulled)
        s.pull_failed.connect(lambda _name, text: self.pull_panel.show_failed(text))
        s.create_status.connect(self.create_panel.show_status)
        s.create_finished.connect(self._on_created)
        s.create_failed.connect(lambda _name, text: self.create_panel.show_failed(text))
        s.action_finished.connect(self._on_action_done)
        s.action_failed.connect(lambda kind, name, text: self._action_failed(kind, name, text))
        server.status_changed.connect(self._on_status)
        server.running_models_changed.connect(self._on_running)
        server.settings_applied.connect(lambda _s: self._reprice())
        self._held = server.held_reason
        server.held_changed.connect(self._set_held)
        self._offer_capabilities()
        self._on_selection()
        self._on_status(server.status)

    # --- server state -------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The server this page manages."""
        return self._server.settings.base_url

    def _offer_capabilities(self) -> None:
        """Offer pull, create, delete and load/unload only where the backend can: a form or button the
        server could never serve is not shown (and stays disabled), and the page says why in its place."""
        for capability, panel, why in (("pull", self.pull_panel, self.pull_unavailable),
                                       ("create", self.create_panel, self.create_unavailable)):
            reason = self.backend.why_not(capability)
            panel.setEnabled(not reason)
            panel.setVisible(not reason)
            why.setText(reason)
            why.setVisible(bool(reason))
            if reason and panel is self.pull_panel:
                self._holders[capability].addStretch(1)  # the reason at the top, where the form would start
        # Neither form offered: the lower half holds only the two reasons, so give the table the room.
        if not self.backend.can("pull") and not self.backend.can("create"):
            for scroll in self._lower_scrolls:
                scroll.setMaximumHeight(140)
                self._forms_layout.setAlignment(scroll, Qt.AlignmentFlag.AlignTop)
        self.variant_button.setToolTip(self.backend.why_not("create"))
        self.delete_button.setToolTip(self.backend.why_not("delete"))
        if not self.backend.can("load_unload"):
            self.preload_button.setToolTip(self.backend.why_not("load_unload"))
            self.unload_button.setToolTip(self.backend.why_not("load_unload"))
        missing = []
        for capability, buttons in (("load_unload", (self.preload_button, self.unload_button)),
                                    ("delete", (self.delete_button,)), ("create", (self.variant_button,))):
            for button in buttons:
                button.setVisible(self.backend.can(capability))
            if not self.backend.can(capability) and capability != "create":  # create's reason is shown below
                missing.append(self.backend.why_not(capability))
        self.not_offered_label.setText(" ".join(missing))
        self.not_offered_label.setVisible(bool(missing))

    def _on_status(self, status: ServerStatus) -> None:
        if status.state.is_running and self._listed_url != self.base_url:
            self.refresh()
        elif not status.state.is_running:
            self._listed_url = ""
            self.message.show_warning(f"No server at {self.base_url}: start or attach one on the Server page.")
        self._show_context()

    def set_gpu(self, info: GpuInfo | None, reason: str = "") -> None:
        """The GPU the verdicts are priced on (None: unknown, with why)."""
        self._gpu_info, self._gpu_reason = info, reason
        self._reprice()

    def set_gpu_memory(self, gpu: GpuMemory | None) -> None:
        """The GPU as the Server page's fit panel prices it (its size, what other processes hold, the runtime
        allowance), so a verdict here and the panel's price for the same model agree; None: only the size."""
        if gpu == self._fit_gpu:
            return
        self._fit_gpu = gpu
        self._reprice()

    def gpu_memory(self) -> GpuMemory | None:
        """The GPU the verdicts are priced on: the fit panel's when it prices this card, else the card's size
        alone (None: no GPU known)."""
        total = self.gpu_total_bytes
        if total is None:
            return None
        if self._fit_gpu is not None and self._fit_gpu.total_bytes == total:
            return self._fit_gpu
        return GpuMemory.with_allowance(total, allowance=self.allowance)

    @property
    def allowance(self) -> RuntimeAllowance:
        """The runtime figure learnt on this GPU (its model and driver), else the default (a card chosen for another
        machine included); the fit panel's, when the verdicts take its GPU."""
        if self._learner is None or self._gpu_info is None:
            return DEFAULT_ALLOWANCE
        return self._learner.allowance(self._gpu_info)

    @property
    def gpu_total_bytes(self) -> int | None:
        """Total GPU memory in bytes, None when unknown."""
        return int(self._gpu_info.memory_total_mib * MIB) if self._gpu_info else None

    def _show_context(self) -> None:
        s = self._server.settings
        fa = {"auto": "auto (on)", "on": "on", "off": "off"}.get(s.flash_attention, s.flash_attention)
        # unset: the backend's own words for its default ("Default (the model's own)" on llama-server)
        words = self.backend.tuning.texts.context_default
        ctx = f"{s.context_length:,}" if s.context_length else words[:1].lower() + words[1:]
        knobs = f"context {ctx} × {s.num_parallel} parallel, KV {s.kv_cache_type}, flash attention {fa}"
        if self._gpu_info is None:
            self.context_label.setText(
                f"<b style='color:#f0b429'>GPU unknown — no fit verdicts.</b> "
                f"<span style='color:#8b8e99'>{html.escape(self._gpu_reason or 'No GPU was detected.')}</span>")
        else:
            gpu = f"{self._gpu_info.name}, {self._gpu_info.memory_total_mib / 1024:.1f} GiB"
            priced = self.gpu_memory()
            runtime = (priced.allowance if priced is not None else DEFAULT_ALLOWANCE).describe()
            self.context_label.setText(f"<b>Fit</b> on {html.escape(gpu)} under the server settings: {knobs}"
                                       f"<br><span style='color:#8b8e99'>CUDA runtime: {html.escape(runtime)}</span>")

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        """Coming back to the page re-reads the models (the store may have changed elsewhere)."""
        super().showEvent(event)
        if self._server.status.state.is_running and self._listed_url:
            self.refresh()

    def refresh(self) -> None:
        """Read the models again; only new or changed models are read in detail and priced."""
        self._listed_url = self.base_url
        self.message.clear_message()
        known = frozenset(m.digest for m in self.local if m.name in self.details and m.digest)
        self.session.refresh(self.base_url, known)

    def _on_models(self, url: str, local: list[LocalModel], running: list[RunningModel]) -> None:
        if url != self.base_url:
            return
        self.local, self.running = local, running
        # the console's and the sweep's model pickers and the fit panel see a pull or delete at once
        self._server.publish_models(local)
        names = {m.name for m in local}
        self.details = {k: v for k, v in self.details.items() if k in names}
        self.table.set_models(local, running, self.verdicts)
        self.create_panel.set_models([m.name for m in local])
        self._on_selection()

    def _on_running(self, running: list[RunningModel]) -> None:
        self.running = running
        self.table.set_models(self.local, running, self.verdicts)
        self._on_selection()

    def _on_details(self, name: str, details: ModelDetails) -> None:
        self.details[name] = details
        self._reprice()
        self.create_panel.recheck()

    def _on_details_failed(self, name: str, text: str) -> None:
        """A model whose metadata cannot be read: its row says so, with the reason, instead of a verdict."""
        self.details.pop(name, None)
        self.verdicts[name] = FitVerdict(Verdict.UNKNOWN, None, "", f"Its metadata cannot be read, so there is no "
                                         f"verdict: {html.escape(text)}")
        self.table.set_models(self.local, self.running, self.verdicts)
        self._on_selection()

    def _reprice(self) -> None:
        self._show_context()
        sizes = {m.name: m.size_bytes for m in self.local}
        entries = {name: (d.facts, sizes[name]) for name, d in self.details.items() if name in sizes}
        if entries:
            self.session.compute_verdicts(entries, self._server.settings, self._server.status.version,
                                          self.gpu_memory(), self._gpu_reason)

    def _on_verdicts(self, verdicts: dict[str, FitVerdict]) -> None:
        self.verdicts.update(verdicts)
        self.table.set_models(self.local, self.running, self.verdicts)
        self._on_selection()

    # --- selection and actions --------------------------------------------------------------
    def _set_held(self, reason: str) -> None:
        self._held = reason
        self._on_selection()

    def _on_selection(self) -> None:
        name = self.table.selected_name()
        free = not self._held  # a sweep measuring the server: loading, unloading or deleting would skew it
        can = self.backend.can
        self.variant_button.setEnabled(bool(name) and can("create"))
        self.delete_button.setEnabled(bool(name) and free and can("delete"))
        loaded = any(r.name == name for r in self.running)
        self.unload_button.setEnabled(loaded and free and can("load_unload"))
        self.preload_button.setEnabled(bool(name) and not loaded and free and can("load_unload"))
        self.held_label.setText(f"Preload, Unload and Delete wait: {self._held}" if self._held else "")
        self.held_label.setVisible(bool(self._held))
        verdict = self.verdicts.get(name)
        if not name:
            self.verdict_label.setText("Select a model to see why it fits or not.")
        elif verdict is None:
            self.verdict_label.setText(f"{name}: reading its metadata…")
        else:
            colour = VERDICT_COLOURS.get(verdict.verdict, "#8b8e99")
            self.verdict_label.setText(
                f"<b style='color:{colour}'>{verdict.label}</b> — {verdict.explanation}"
                + (f" <span style='color:#8b8e99'>(num_ctx {verdict.num_ctx:,} from {verdict.context_source})</span>"
                   if verdict.num_ctx else ""))

    def _act(self, kind: str) -> None:
        name = self.table.selected_name()
        if not name:
            return
        if kind == "delete":
            size = next((fmt_bytes(m.size_bytes) for m in self.local if m.name == name), "")
            if not self.confirm("Delete model", f"Delete {name} ({size}) from the server's store? "
                                                "Pulling it again downloads it again."):
                return
        self.message.clear_message()
        self.session.act(self.base_url, kind, name)

    def _on_action_done(self, kind: str, name: str) -> None:
        if kind == "delete":
            self._store_changed()
            self.message.show_warning(f"Deleted {name}.")
        else:
            self.session.running(self.base_url)

    def _action_failed(self, kind: str, name: str, text: str) -> None:
        self.message.show_error(f"Could not {kind} {name}: {text}")

    # --- pull and create ---------------------------------------------------------------------
    def pull(self, name: str) -> None:
        """Start pulling name:tag."""
        self.pull_panel.set_busy(True, name)
        self.session.pull(self.base_url, name)

    def cancel_pull(self) -> None:
        """Stop the pull now."""
        self.session.cancel_pull()
        self.pull_panel.show_cancelled()

    def _on_pulled(self, name: str) -> None:
        self.pull_panel.show_done(name)
        self._store_changed()

    def create_variant(self, body: dict[str, Any]) -> None:
        """Send a checked create-variant request body."""
        self.create_panel.set_busy(True)
        self.session.create(self.base_url, body)

    def _on_created(self, name: str) -> None:
        self.create_panel.show_done(name)
        self._store_changed()

    def _store_changed(self) -> None:
        """A model was pulled, created or deleted: read the store again (the list then reaches the
        other pages too, see _on_models)."""
        self.refresh()

    def _sizes_for(self, typed: str) -> tuple[int | None, int | None]:
        """Parameter count of the local model a typed FP8 tag stands for (qwen3:14b-fp8 -> qwen3:14b)
        and the GPU's bytes, to price the real quantizations."""
        stem = _FP8_SUFFIX_RE.sub("", typed.strip().lower())
        details = self.details.get(stem) or self.details.get(f"{stem}:latest")
        count = details.model_info.get("general.parameter_count") if details is not None else None
        return (count if isinstance(count, int) else None), self.gpu_total_bytes

    def _variant_context(self, base: str) -> dict[str, Any]:
        details = self.details.get(base) or self.details.get(f"{base}:latest")
        model = next((m for m in self.local if m.name in (base, f"{base}:latest")), None)
        context: dict[str, Any] = {"local_names": {m.name for m in self.local}, "gpu_total_bytes": self.gpu_total_bytes}
        if model is not None:
            context["base_quantization"] = model.quantization_level
        if details is not None:
            ctx = details.arch_value("context_length")
            count = details.model_info.get("general.parameter_count")
            context["training_context"] = ctx if isinstance(ctx, int) else None
            context["parameter_count"] = count if isinstance(count, int) else None
        return context

    def shutdown(self) -> None:
        """Cancel a pull and close connections (call on quit)."""
        self.session.shutdown()


__all__ = ["ModelsPage"]
