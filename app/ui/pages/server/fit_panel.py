"""The fit panel: what the settings in the form cost in VRAM and host RAM, what else would fit, and
the llama-server command the server will run for them."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from app.core.errors import EstimateError
from app.core.memory.allowance import DEFAULT_ALLOWANCE, AllowanceSource, RuntimeAllowance
from app.core.memory.estimator import GpuMemory, VramEstimate
from app.core.memory.host import HostMemory
from app.core.memory.launch_plan import LaunchPlan, SettingsPlanner
from app.core.model_shape import ModelShape
from app.core.memory.pricing import fit_grid, price_load
from app.core.ports.planner import LoadPlanner
from app.core.memory.verdict import VERDICTS, Verdict, verdict_label
from app.core.server.mapping import NeutralTuning, TuningMapping
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB
from app.services.runtime_learner import RuntimeLearner
from app.ui.widgets.allowance_bridge import AllowanceBridge
from app.ui.widgets.wrapping_text import WrappingText
from app.ui.pages.server.fit_widgets import SEGMENT_COLOURS, SEGMENT_LABELS, VERDICT_COLOURS, VERDICT_WORDS, FitHeatmap, VramBar

DEBOUNCE_MS = 150
# the runtime row's word for where its figure comes from (the whole line is its tooltip and the GPU line)
_SOURCE_WORDS = {AllowanceSource.LEARNED: "learnt", AllowanceSource.GIVEN: "given",
                 AllowanceSource.DEFAULT: "default"}
# Card sizes offered when no NVIDIA GPU can be read here (pricing for a card elsewhere).
PRICING_CARDS_GIB = (8, 12, 16, 24, 32, 48, 80)
# The card list's first entry, and its default: this machine without a GPU, priced against its RAM.
NO_GPU_CARD = 0
NO_GPU_CARD_TEXT = "This computer's RAM"


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


class FitPanel(QFrame):
    """Recomputes the estimate (debounced) whenever the settings, model or GPU change."""

    model_selected = Signal(str)  # a model name the page should fetch metadata for
    title_changed = Signal(str)  # "VRAM price" or "RAM price": what the panel prices now
    estimate_changed = Signal(object)  # VramEstimate | None
    grid_cell_chosen = Signal(int, int)  # parallel, context: the user clicked the heat-map
    gpu_changed = Signal(object)  # GpuMemory | None: the GPU as the panel prices it now (gpu_memory())

    def __init__(self, parent: QWidget | None = None, *, mapping: TuningMapping | None = None,
                 planner: LoadPlanner | None = None, learner: RuntimeLearner | None = None) -> None:
        """`learner` gives the runtime allowance learnt on this machine's GPU (None: the default is priced)."""
        super().__init__(parent)
        self.setObjectName("FitPanel")
        self._mapping: TuningMapping = mapping if mapping is not None else NeutralTuning()
        # the launch the backend's server makes for a model: what is priced, and the command it will run
        self._planner: LoadPlanner = planner if planner is not None else SettingsPlanner()
        self.setStyleSheet("#FitPanel { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 8px; }"
                           "#FitPanel QLabel { background: transparent; }")
        self._settings = ServerSettings()
        self._shape: ModelShape | None = None
        self._shape_error = ""
        self._own: tuple[int | None, int | None] = (None, None)  # the picked model's own num_ctx, num_batch
        self._version: str | None = None
        self.price_title = ""  # "VRAM price" or "RAM price", the tab's name for the panel
        self._gpu_total = 0  # no GPU known: the computer's RAM until a GPU is read or a card chosen
        self._gpu_others = 0
        self._gpu_reserved = 0  # the driver's reserve: no process can have it
        self._gpu_measured = False
        # the runtime figure priced per process on this machine's GPU: learnt there (and updated as loads teach
        # it), else the default; a card chosen for another machine is priced with the default
        self._learnt: RuntimeAllowance = learner.allowance() if learner is not None else DEFAULT_ALLOWANCE
        if learner is not None:
            self._allowance_bridge = AllowanceBridge(learner, self)
            self._allowance_bridge.changed.connect(self.set_allowance)
        self._host: HostMemory | None = None
        self._estimate: VramEstimate | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.recompute)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 12, 14, 12)
        lay.setSpacing(8)
        self.title = title = QLabel()
        title.setObjectName("fit_title")
        title.setStyleSheet("font-size: 13pt; font-weight: 600;")
        lay.addWidget(title)

        pick = QHBoxLayout()
        pick.addWidget(QLabel("Model"))
        self.model_combo = QComboBox()
        self.model_combo.setObjectName("fit_model")
        # both pickers shrink to a dozen characters (their full text in the tooltip), so that the panel
        # fits beside the form at 1280x720
        self.model_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.model_combo.setMinimumContentsLength(12)
        self.model_combo.setPlaceholderText("no local models yet")
        self.model_combo.currentTextChanged.connect(self._model_changed)
        pick.addWidget(self.model_combo, 1)
        self.card_combo = QComboBox()
        self.card_combo.setObjectName("fit_card")
        self.card_combo.addItem(NO_GPU_CARD_TEXT, NO_GPU_CARD)
        for g in PRICING_CARDS_GIB:
            self.card_combo.addItem(f"{g} GiB card", g)
        self.card_combo.setCurrentIndex(0)
        self.card_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.card_combo.setMinimumContentsLength(len(NO_GPU_CARD_TEXT))  # its longest choice, whole
        self.card_combo.setToolTip("No NVIDIA GPU can be read here: the settings are priced against this "
                                   "computer's RAM, or for the card you choose (to plan for another machine).")
        self.card_combo.currentIndexChanged.connect(self._card_changed)
        pick.addWidget(self.card_combo)
        lay.addLayout(pick)
        self.gpu_label = QLabel()
        self.gpu_label.setObjectName("Dim")
        self.gpu_label.setWordWrap(True)
        lay.addWidget(self.gpu_label)

        self.bar = VramBar()
        lay.addWidget(self.bar)
        legend = QGridLayout()
        legend.setHorizontalSpacing(10)
        legend.setVerticalSpacing(2)
        self.legend_values: dict[str, QLabel] = {}
        for i, key in enumerate(SEGMENT_COLOURS):
            swatch = QLabel("■")
            swatch.setStyleSheet(f"color: {SEGMENT_COLOURS[key] if key != 'free' else '#3a3d49'};")
            name = QLabel(SEGMENT_LABELS[key])
            value = QLabel("—")
            value.setStyleSheet("font-weight: 600;")
            self.legend_values[key] = value
            row, col = divmod(i, 2)
            cell = QHBoxLayout()
            cell.setSpacing(5)
            cell.addWidget(swatch)
            cell.addWidget(name)
            cell.addWidget(value)
            cell.addStretch(1)
            legend.addLayout(cell, row, col)
        lay.addLayout(legend)

        self.verdict_label = QLabel("—")
        self.verdict_label.setObjectName("fit_verdict")
        self.verdict_label.setStyleSheet("font-size: 14pt; font-weight: 700;")
        self.verdict_label.setWordWrap(True)
        lay.addWidget(self.verdict_label)
        self.explanation = QLabel()
        self.explanation.setObjectName("fit_explanation")
        self.explanation.setWordWrap(True)
        self.explanation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.explanation)
        self.host_label = QLabel()
        self.host_label.setObjectName("fit_host")
        self.host_label.setWordWrap(True)
        lay.addWidget(self.host_label)
        self.command_label = WrappingText()  # long paths wrap inside, never widening the panel
        self.command_label.setObjectName("fit_command")
        self.command_label.setStyleSheet("QTextEdit { font-family: monospace; color: #c9cbd3; background: transparent; "
                                         "border: none; }")
        self.command_label.setVisible(False)
        lay.addWidget(self.command_label)

        self.heat_title = heat_title = QLabel()
        heat_title.setStyleSheet("font-weight: 600; margin-top: 6px;")
        heat_title.setWordWrap(True)
        lay.addWidget(heat_title)
        self.heatmap = FitHeatmap()
        self.heatmap.cell_clicked.connect(self.grid_cell_chosen)
        lay.addWidget(self.heatmap, 1)
        # the colour keys, in one label that wraps on a narrow panel
        self.keys_label = QLabel()
        self.keys_label.setObjectName("fit_keys")
        self.keys_label.setWordWrap(True)
        self.keys_label.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.keys_label)
        self._show_keys(greyed=False)
        self.heat_note = QLabel()
        self.heat_note.setObjectName("Dim")
        self.heat_note.setWordWrap(True)
        lay.addWidget(self.heat_note)
        self._show_gpu_line()
        self.recompute()

    # --- inputs ---------------------------------------------------------------------------
    def set_settings(self, settings: ServerSettings) -> None:
        """New form values: recompute after a short pause in typing."""
        self._settings = settings
        self._timer.start()

    def set_version(self, version: str | None) -> None:
        self._version = version
        self._timer.start()

    def set_models(self, names: list[str]) -> None:
        """The local models to pick from; keeps the current pick when it is still there."""
        current = self.model_combo.currentText()
        self.model_combo.blockSignals(True)
        self.model_combo.clear()
        self.model_combo.addItems(names)
        if current in names:
            self.model_combo.setCurrentText(current)
        elif names:
            self.model_combo.setCurrentIndex(0)
        self.model_combo.blockSignals(False)
        if self.model_combo.currentText() != current or (names and self._shape is None):
            self._model_changed(self.model_combo.currentText())

    def set_model_params(self, name: str, own_context: int | None, own_batch: int | None) -> None:
        """The picked model's own num_ctx and num_batch (None where it sets none), which the server loads it
        with; its shape follows (set_model_shape), which prices."""
        if name == self.model_combo.currentText():
            self._own = (own_context, own_batch)

    def set_model_shape(self, name: str, shape: ModelShape | None, error: str = "") -> None:
        """Metadata of the picked model arrived (or could not be read: error says why)."""
        if name != self.model_combo.currentText():
            return
        self._shape = shape
        self._shape_error = error
        self.recompute()

    def set_host(self, host: HostMemory | None) -> None:
        """The computer's RAM a load can have (None: not known, not checked)."""
        if host == self._host:
            return
        self._host = host
        self._timer.start()

    def set_gpu(self, total_bytes: int | None, used_by_others_bytes: int = 0, reserved_bytes: int = 0) -> None:
        """The GPU's real size, what other processes use and what the driver reserves; None: no GPU readable here."""
        self._gpu_measured = total_bytes is not None
        self.card_combo.setVisible(not self._gpu_measured)
        if total_bytes is not None:
            if (total_bytes, used_by_others_bytes, reserved_bytes) == (self._gpu_total, self._gpu_others,
                                                                       self._gpu_reserved):
                return
            self._gpu_total = total_bytes
            self._gpu_others = max(0, used_by_others_bytes)
            self._gpu_reserved = max(0, reserved_bytes)
        else:
            self._gpu_total = int(self.card_combo.currentData()) * GIB
            self._gpu_others = 0
            self._gpu_reserved = 0
        self._show_gpu_line()
        self._timer.start()
        self.gpu_changed.emit(self.gpu_memory())

    def set_allowance(self, allowance: RuntimeAllowance) -> None:
        """A new runtime figure for this machine's GPU (learnt from a load): price with it from now on."""
        if allowance == self._learnt:
            return
        self._learnt = allowance
        self._show_gpu_line()
        self._timer.start()
        if self._gpu_measured:
            self.gpu_changed.emit(self.gpu_memory())  # the Models page's verdicts take the new figure too

    @property
    def allowance(self) -> RuntimeAllowance:
        """The runtime figure priced per process now, with its source."""
        return self._learnt if self._gpu_measured else DEFAULT_ALLOWANCE

    # --- outputs --------------------------------------------------------------------------
    @property
    def estimate(self) -> VramEstimate | None:
        return self._estimate

    @property
    def priced_settings(self) -> ServerSettings:
        """The settings the estimate prices (the form's, as last given)."""
        return self._settings

    @property
    def model_name(self) -> str:
        return self.model_combo.currentText()

    def gpu_memory(self) -> GpuMemory | None:
        """The GPU priced against; None when the chosen card is "No GPU" (the server runs on the CPU). The one
        place the panel builds it: the heat-map, the price and the Models page's verdicts (gpu_changed) use it."""
        if self._gpu_total <= 0:
            return None
        return GpuMemory.with_allowance(self._gpu_total, self._gpu_others, self._gpu_reserved, self.allowance)

    def recompute(self) -> None:
        """Price the current settings and refresh bar, verdict and heat-map (GUI thread, ~ms)."""
        self._timer.stop()
        est = None
        if self._shape is None:
            self._show_empty(self._shape_error or ("Pick a model to price these settings."
                                                   if self.model_combo.count() else
                                                   "Prices appear once the server lists its local models."))
        else:
            gpu = self.gpu_memory()
            try:
                priced = price_load(self._planner, self._settings, self._shape, gpu, self._version, self._host,
                                    model_num_ctx=self._own[0], model_num_batch=self._own[1])
            except EstimateError as exc:
                self._show_empty(exc.user_text())
            else:
                est = priced.estimate
                self._show_estimate(est, self._shape, priced.plan)
        if est is not self._estimate:
            self._estimate = est
            self.estimate_changed.emit(est)

    def _show_keys(self, greyed: bool) -> None:
        """The verdicts' colours, and grey (above the model's training context) when the map has such cells."""
        keys = [(VERDICT_COLOURS[v], VERDICT_WORDS[v]) for v in VERDICTS]
        if greyed:
            keys.append((_bright(VERDICT_COLOURS[Verdict.INVALID]), "above the model's training context"))
        self.keys_label.setText(" &nbsp; ".join(
            f"<span style='color: {colour}; font-weight: 600; white-space: nowrap;'>■&nbsp;{html.escape(words, quote=False)}</span>"
            for colour, words in keys))

    def _show_heat_note(self, default_ctx: int | None, training_ctx: int | None, cpu_only: bool) -> None:
        """Say what the heat-map's star, outline and grey columns mean (only the marks it shows)."""
        parts = []
        if default_ctx is not None:
            on = "without a GPU" if cpu_only else "on this card"
            parts.append(f"★ {_possessive(self._mapping.texts.server_name)} default context {on} "
                         f"({default_ctx // 1024}k)")
        parts.append("outlined: the form's choice")
        if training_ctx is not None:
            parts.append(f"grey: above the model's training context ({training_ctx:,} tokens)")
        parts.append("click a cell to use it")
        self.heat_note.setText(" · ".join(parts))
        self._show_keys(greyed=training_ctx is not None)
        self.keys_label.setToolTip("" if training_ctx is None else
                                   f"The model was trained for {training_ctx:,} tokens of context: "
                                   "a longer context per request is not offered.")

    def _show_empty(self, text: str) -> None:
        self.host_label.setText("")
        self.command_label.setVisible(False)
        self.bar.set_parts(self._gpu_total, [("others", self._gpu_others), ("reserved", self._gpu_reserved)], None)
        for v in self.legend_values.values():
            v.setText("—")
        self.verdict_label.setText("—")
        self.verdict_label.setStyleSheet("font-size: 14pt; font-weight: 700; color: #8b8e99;")
        self.explanation.setText(text)
        self.heatmap.set_grid([], None, None)
        self.heat_note.setText("")
        self._show_keys(greyed=False)

    def _show_estimate(self, est: VramEstimate, shape: ModelShape, plan: LaunchPlan) -> None:
        if est.cpu_only:
            self._show_cpu_bar(est)
        else:
            kv_gpu = est.kv_gpu_bytes
            outside = self._gpu_others + self._gpu_reserved
            used = est.weights_gpu_bytes + kv_gpu + est.compute_bytes + est.overhead_bytes + outside
            parts = [("weights", est.weights_gpu_bytes), ("kv", kv_gpu), ("compute", est.compute_bytes),
                     ("overhead", est.overhead_bytes), ("others", self._gpu_others), ("reserved", self._gpu_reserved)]
            self.bar.set_parts(self._gpu_total, parts, est.peak_gpu_bytes + outside)
            values = dict(parts, free=max(0, self._gpu_total - used))
            for key, label in self.legend_values.items():
                label.setText(_gib(values[key]))
            # the runtime row: the figure priced, to the MiB, and where it came from (learnt, given, default)
            runtime = self.legend_values["overhead"]
            runtime.setText(f"{est.overhead_bytes / MIB:.0f} MiB {_SOURCE_WORDS[est.allowance.source]}")
            runtime.setToolTip(f"CUDA runtime per process: {est.allowance.describe()}")
        colour = VERDICT_COLOURS[est.verdict]
        self.verdict_label.setStyleSheet(f"font-size: 14pt; font-weight: 700; color: {_bright(colour)};")
        if est.cpu_only:
            self.verdict_label.setText(
                f"{verdict_label(est.verdict)} — {_gib(est.host_bytes)} of RAM · {est.processor}")
        else:
            self.verdict_label.setText(
                f"{verdict_label(est.verdict)} — {_gib(est.total_gpu_bytes)} at load, peak {_gib(est.peak_gpu_bytes)}, "
                f"headroom {_gib(est.headroom_bytes)} · {est.processor}")
        notes = " ".join(est.notes)
        self.explanation.setText(est.explanation + (f" {notes}" if notes else ""))
        self.host_label.setText(_host_text(est))
        gpu = self.gpu_memory()
        # the command the server will run, where its backend plans one (empty: nothing to show)
        self.command_label.setText("\n".join(plan.launch_lines))
        self.command_label.setVisible(bool(plan.launch_lines))
        # the star: the context the backend's server picks by itself on this GPU, where it has such a rule
        default_ctx = self._mapping.default_context_length(self._version, self._gpu_total or None,
                                                           self._settings.gpu_overhead_mib * MIB)
        grid = fit_grid(self._settings, shape, gpu, self._version, host=self._host, planner=self._planner,
                        model_num_batch=self._own[1])
        self.heat_title.setText("What fits: parallel requests × context per request "
                                + ("(GiB of RAM, no GPU)" if est.cpu_only else "(GiB on the GPU)"))
        self.heatmap.set_grid(grid, (plan.parallel, plan.num_ctx), default_ctx,
                              "of RAM" if est.cpu_only else "on the GPU")
        greyed = any(cell.verdict is Verdict.INVALID and cell.context > (shape.context_length or 0) > 0
                     for row in grid for cell in row)
        self._show_heat_note(default_ctx if any(c.context == default_ctx for c in grid[0]) else None,
                             shape.context_length if greyed else None, est.cpu_only)

    def _show_cpu_bar(self, est: VramEstimate) -> None:
        """No GPU: the bar is the computer's RAM and what the load puts there."""
        host = self._host
        total = host.total_bytes if host and host.total_bytes else max(est.host_bytes, 1)
        others = max(0, total - host.available_bytes) if host else 0
        parts = [("weights", est.weights_cpu_bytes), ("kv", est.kv_bytes), ("compute", est.host_compute_bytes),
                 ("overhead", 0), ("others", others), ("reserved", 0)]
        self.bar.set_parts(total, parts, est.host_bytes + others)
        known = host is not None and bool(host.total_bytes)
        values = dict(parts, free=max(0, total - others - est.host_bytes))
        for key, label in self.legend_values.items():
            # Until this computer's memory is read, what others hold and what is free are not known.
            label.setText(_gib(values[key]) if known or key not in ("others", "free") else "—")

    # --- internals ------------------------------------------------------------------------
    def _model_changed(self, name: str) -> None:
        self._shape = None
        self._own = (None, None)
        self._shape_error = f"Reading {name}…" if name else ""
        self.recompute()
        if name:
            self.model_selected.emit(name)

    def _card_changed(self, _index: int) -> None:
        if not self._gpu_measured:
            self.set_gpu(None)

    def _show_gpu_line(self) -> None:
        on_ram = not self._gpu_measured and self._gpu_total <= 0
        self.heat_title.setText("What fits: parallel requests × context per request "
                                + ("(GiB of RAM, no GPU)" if on_ram else "(GiB on the GPU)"))
        title = "RAM price" if on_ram else "VRAM price"
        if title != self.price_title:
            self.price_title = title
            self.title.setText(f"{title} of these settings")
            self.title_changed.emit(title)
        if on_ram:
            self.gpu_label.setText("No NVIDIA GPU can be read here: pricing a server that runs on the CPU, against "
                                   "this computer's RAM. Choose a card on the right to price for one instead.")
        elif self._gpu_measured:
            reserve = (f" and the driver reserves {_gib(self._gpu_reserved)}" if self._gpu_reserved else "")
            self.gpu_label.setText(
                f"Priced against this GPU: {_gib(self._gpu_total)}, of which other processes use "
                f"{_gib(self._gpu_others)}{reserve}. CUDA runtime: {self.allowance.describe()}.")
        else:
            self.gpu_label.setText(
                "No NVIDIA GPU can be read here: pricing for the card chosen on the right. CUDA runtime: "
                f"{self.allowance.describe()}.")


def _host_text(est: VramEstimate) -> str:
    """Host RAM needed against available, and what happens when it is not there."""
    need = f"Host RAM: {_gib(est.host_bytes)} needed"
    if est.host_available_bytes is None:
        return need + " (the computer's free memory is not known here, so it is not checked)."
    text = f"{need} of {_gib(est.host_available_bytes)} available"
    if est.host_verdict is Verdict.WONT_LOAD:
        return text + " — the computer runs out of memory."
    if est.host_verdict is Verdict.TIGHT:
        return text + f" — tight: under {_gib(1 << 30)} would be left."
    return text + "."


def _possessive(name: str) -> str:
    """"Ollama" -> "Ollama's", "the server" -> "The server's" (it starts a sentence)."""
    name = name[:1].upper() + name[1:] if name.startswith("the ") else name
    return name + ("'" if name.endswith("s") else "'s")


def _bright(colour: str) -> str:
    """A lighter shade of a verdict colour for text on the dark panel."""
    c = colour.lstrip("#")
    r, g, b = (int(c[i:i + 2], 16) for i in (0, 2, 4))

    def mix(v: int) -> int:
        return min(255, int(v + (255 - v) * 0.35))

    return f"#{mix(r):02x}{mix(g):02x}{mix(b):02x}"

