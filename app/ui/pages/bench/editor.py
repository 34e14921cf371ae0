"""The sweep editor: which settings to try, the workload, the latency targets, Start and Cancel.

It builds a SweepSpec from its fields and says inline what is wrong; the page decides whether
the server is managed (server settings may vary) or attached (only client concurrency may).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit,
                               QPlainTextEdit, QPushButton, QSpinBox, QStyle, QVBoxLayout, QWidget)

from app.core.bench.workload import (DEFAULT_NUM_PREDICT, DEFAULT_PROMPT_SET, BenchPrompt, LoadPlan, PromptFileError,
                                   parse_prompt_file, prompt_sets)
from app.core.server.settings import KV_CACHE_TYPES, MAX_CONTEXT, MAX_PARALLEL, MIN_CONTEXT, ServerSettings
from app.core.bench.sweep import SweepAxes, SweepPlanError, SweepSpec, parse_int_list
from app.core.bench.scenario_run import REQUESTS_PER_CLASS, ScenarioSpecError, scenario_plan, scenario_spec
from app.core.bench.capacity import open_rate, step_duration
from app.core.bench.compare import with_server_defaults
from app.core.server.mapping import ServerDefaults
from app.ui.pages.bench.capacity_editor import CapacityAsk, CapacityGroup
from app.ui.pages.bench.scenario_editor import ScenarioGroup
from app.ui.pages.bench.targets import TPOT_HINT, TTFT_HINT, TargetFields
from app.ui.widgets.forms import (FieldGroup, InlineMessage, RangedDoubleSpinBox, RangedField, RangedSpinBox,
                                  align_label_columns, guard_form, left_aligned)

FROM_FILE = "__file__"
FA_CHOICES = (("current", "Keep the current setting"), ("on", "On"), ("off", "Off"), ("both", "On and off"))
THINK_CHOICES = (("Off (non-thinking)", False), ("On (thinking)", True), ("Model default", None))
WORKLOAD_CHOICES = (("One prompt", "prompt"), ("A scenario", "scenario"))
PROMPT_TITLES = {"mixed": "All console presets, mixed"}


class SpecError(ValueError):
    """The editor's fields do not make a sweep; the message says which and why."""


FIELDS_MARKED = "Fix the fields marked in red above."


class FieldErrors(SpecError):
    """Fields whose text is not a value: each field's reason is shown next to it (`by_field`)."""

    def __init__(self, by_field: dict[str, str]) -> None:
        super().__init__(FIELDS_MARKED)
        self.by_field = by_field


class SweepEditor(QWidget):
    """Builds the SweepSpec; emits start_requested / cancel_requested."""

    start_requested = Signal(object)  # SweepSpec
    cancel_requested = Signal()
    refresh_models = Signal()

    def __init__(self, setting_name: Callable[[str], str] = lambda field: "", parent: QWidget | None = None, *,
                 write_file: Callable[[Path, bytes], None] | None = None,
                 server_defaults: ServerDefaults | None = None) -> None:
        """`setting_name` gives what the server calls a settings field (the backend's mapping); `write_file`
        writes a file atomically (the scenario's Save as…); `server_defaults`: the tuning the server runs with when
        told none (the comparison's "before"; None: no comparison offered)."""
        super().__init__(parent)
        self.setObjectName("SweepEditor")
        self._setting_name = setting_name
        self._server_defaults = server_defaults
        self._managed = True
        self._base = ServerSettings()
        self._file_prompts: tuple[BenchPrompt, ...] | None = None
        self._prompt_rows: list[QWidget] = []  # the caption and field of each row only one prompt uses
        self.scenario = ScenarioGroup(write_file)
        self.capacity = CapacityGroup()
        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 8, 0)
        root.setSpacing(10)
        self.mode_label = QLabel()
        self.mode_label.setObjectName("ModeLabel")
        self.mode_label.setWordWrap(True)
        root.addWidget(self.mode_label)
        groups = [self._build_target(), self._build_axes(), self._build_workload(), self.scenario,
                  self.capacity, self._build_targets()]
        for g in groups:
            root.addWidget(g)
        align_label_columns(groups)
        self.summary = QLabel()
        self.summary.setObjectName("Dim")
        self.summary.setWordWrap(True)
        self.message = InlineMessage(prominent=True)
        self.message.setObjectName("EditorMessage")
        self.start_button = QPushButton("Start sweep")
        self.start_button.setObjectName("StartSweep")
        self.start_button.setProperty("accent", True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("CancelSweep")
        self.cancel_button.setEnabled(False)
        root.addWidget(self.summary)
        root.addWidget(self.message)
        root.addWidget(left_aligned(self.start_button, self.cancel_button))
        root.addStretch(1)
        self.start_button.clicked.connect(self._start)
        self.cancel_button.clicked.connect(self.cancel_requested)
        for signal in (self.parallel.textChanged, self.clients.textChanged, self.context.textChanged,
                       self.requests.valueChanged, self.stop_unit.currentIndexChanged, self.fa.currentIndexChanged,
                       self.model.editTextChanged, self.loop_mode.currentIndexChanged,
                       self.workload_kind.currentIndexChanged, self.scenario.changed, self.capacity.changed,
                       self.compare.toggled,
                       *[box.toggled for box in self.kv_boxes.values()],
                       *[field.problem_changed for field in self._ranged_fields()]):
            signal.connect(self._refresh_summary)
        self.workload_kind.currentIndexChanged.connect(self._show_workload)
        self.scenario.changed.connect(self._capacity_workload)
        guard_form(self)
        self._show_workload()
        self._refresh_summary()

    # ---- building --------------------------------------------------------------------------------
    def _build_target(self) -> FieldGroup:
        group = FieldGroup("Model")
        self.model = QComboBox()
        self.model.setObjectName("model")
        self.model.setEditable(True)
        self.model.setMinimumWidth(200)
        if (line := self.model.lineEdit()) is not None:  # an editable combo always has one
            line.setPlaceholderText("e.g. qwen3:14b")
        refresh = QPushButton()
        refresh.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_BrowserReload))
        refresh.setToolTip("Read the model list from the server again")
        refresh.setFixedWidth(40)
        refresh.clicked.connect(self.refresh_models)
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.model, 1)
        lay.addWidget(refresh)
        self.model_message = group.add_field("Model", row, hint="Loaded once per point and warmed before measuring.")
        return group

    def _build_axes(self) -> FieldGroup:
        group = FieldGroup("Settings to try")
        self.parallel = QLineEdit("1, 2, 4, 8")
        self.parallel.setObjectName("parallel")
        self.parallel_message = group.add_field(
            "Parallel", self.parallel, env_name=self._setting_name("num_parallel"),
            hint=f"The articles' “batch size”. Each value restarts the server. Values 1 to {MAX_PARALLEL}.")
        self.clients = QLineEdit()
        self.clients.setObjectName("clients")
        self.clients.setPlaceholderText("same as parallel")
        self.clients_message = group.add_field(
            "Clients", self.clients,
            hint="Concurrent requests. Above parallel they queue in the server — the web-UI queue "
                 "effect — and TTFT grows.")
        self.kv_boxes = {kv: QCheckBox(kv) for kv in KV_CACHE_TYPES}
        for kv, box in self.kv_boxes.items():
            box.setObjectName(f"kv_{kv}")
        self.kv_message = group.add_field("KV cache", left_aligned(*self.kv_boxes.values(), spacing=14),
                                          env_name=self._setting_name("kv_cache_type"),
                                          hint="q8_0 and q4_0 need flash attention.")
        self.context = QLineEdit()
        self.context.setObjectName("context")
        self.context_message = group.add_field("Context", self.context, env_name=self._setting_name("context_length"),
                                               hint=f"Tokens per slot, e.g. 8192, 16384 ({MIN_CONTEXT} to {MAX_CONTEXT}). "
                                                    "Empty: keep the current.")
        self.fa = QComboBox()
        self.fa.setObjectName("flash_attention")
        for key, text in FA_CHOICES:
            self.fa.addItem(text, key)
        group.add_field("Flash attn", self.fa, env_name=self._setting_name("flash_attention"))
        self.force = QCheckBox("run points predicted not to fit")
        self.force.setObjectName("force")
        group.add_field("Force", self.force)
        self.compare = QCheckBox("also measure the server's defaults")
        self.compare.setObjectName("compare_defaults")
        self.compare_message = group.add_field(
            "Before/after", left_aligned(self.compare),
            hint="The server's own default tuning as one more point, reported against the recommended setting per "
                 "class (latency, tokens/s, VRAM, GPU use, requests/day with the capacity).")
        self.compare.setVisible(self._server_defaults is not None)
        self._server_widgets = [self.parallel, self.context, self.fa, self.force, self.compare,
                                *self.kv_boxes.values()]
        return group

    def _build_workload(self) -> FieldGroup:
        group = FieldGroup("Workload")
        self.workload_kind = QComboBox()
        self.workload_kind.setObjectName("workload_kind")
        self.workload_kind.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.workload_kind.setMinimumContentsLength(14)
        for text, key in WORKLOAD_CHOICES:
            self.workload_kind.addItem(text, key)
        group.add_field("Measure", self.workload_kind,
                        hint="One prompt: a preset or a file, at one load. A scenario: several kinds of request at "
                             "once, each with its own rate, lengths and targets.")
        self.loop_mode = QComboBox()
        self.loop_mode.setObjectName("loop_mode")
        self.loop_mode.addItem("Closed loop", "closed")
        self.loop_mode.addItem("Open loop (Poisson)", "open")
        self.rate = RangedDoubleSpinBox()
        self.rate.setObjectName("rate")
        self.rate.setRange(0.1, 1000.0)
        self.rate.setValue(2.0)
        self.rate.setSuffix(" req/s")
        self.rate.setEnabled(False)
        self._prompt_row(group, group.add_field("Load", self.loop_mode,
                                                hint="Closed: each client sends its next request when the last ends."))
        self.rate_message = group.add_field("Arrival rate", self.rate,
                                            hint="Open loop only; Clients then caps requests in flight.")
        self._prompt_row(group, self.rate_message)
        self.requests = RangedSpinBox()
        self.requests.setObjectName("requests")
        self.requests.setRange(0, 100_000)
        self.requests.setSpecialValueText("auto")
        self.requests.setValue(0)
        self.stop_unit = QComboBox()
        self.stop_unit.setObjectName("stop_unit")
        self.stop_unit.addItem("requests", "requests")
        self.stop_unit.addItem("seconds", "seconds")
        self.requests_message = group.add_field("Per point", left_aligned(self.requests, self.stop_unit),
                        hint="Counted after the warm-up. auto: 4 requests per client, at least 8; a scenario "
                             f"{REQUESTS_PER_CLASS} per class.")
        self.prompts = QComboBox()
        self.prompts.setObjectName("prompts")
        self.prompts.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.prompts.setMinimumContentsLength(14)
        for key in prompt_sets():
            self.prompts.addItem(PROMPT_TITLES.get(key, _preset_title(key)), key)
        self.prompts.addItem("From a file…", FROM_FILE)
        self.prompts.setCurrentIndex(max(0, self.prompts.findData(DEFAULT_PROMPT_SET)))
        self.prompt_message = group.add_field("Prompts", self.prompts,
                                              hint="The console's presets; a file holds one prompt per line or JSON Lines.")
        self._prompt_row(group, self.prompt_message)
        self.num_predict = RangedSpinBox()
        self.num_predict.setObjectName("num_predict")
        self.num_predict.setRange(0, 32768)
        self.num_predict.setSpecialValueText("no cap")
        self.num_predict.setValue(DEFAULT_NUM_PREDICT)
        self.num_predict_message = group.add_field("Output tokens", self.num_predict, hint="num_predict per request.")
        self._prompt_row(group, self.num_predict_message)
        self.think = QComboBox()
        self.think.setObjectName("think")
        for text, value in THINK_CHOICES:
            self.think.addItem(text, value)
        self._prompt_row(group, group.add_field("Thinking", self.think,
                                                hint="Thinking adds tokens; high concurrency usually runs it off."))
        self.loop_mode.currentIndexChanged.connect(lambda: self.rate.setEnabled(self.loop_mode.currentData() == "open"))
        self.prompts.activated.connect(self._prompt_choice)
        return group

    def _prompt_row(self, group: FieldGroup, message: Any) -> None:
        """Keep the row just added (its caption and its field) as one shown for a one-prompt workload only."""
        self._prompt_rows += [group.labels[-1], message.parentWidget()]

    def _show_workload(self) -> None:
        scenario = self.uses_scenario
        for widget in self._prompt_rows:
            widget.setVisible(not scenario)
        self.scenario.setVisible(scenario)
        self._capacity_workload()

    def _capacity_workload(self) -> None:
        """Tell the capacity fields the workload (a scenario being fixed keeps what they had)."""
        if not self.uses_scenario:
            self.capacity.set_workload(None)
            return
        try:
            self.capacity.set_workload(self.scenario.scenario())
        except ValueError:
            pass  # the scenario's own message says what to fix

    @property
    def uses_scenario(self) -> bool:
        """True when the workload is a scenario (else one prompt)."""
        return bool(self.workload_kind.currentData() == "scenario")

    def use_scenario(self, key: str) -> None:
        """Measure a scenario: a built-in by name."""
        self.workload_kind.setCurrentIndex(self.workload_kind.findData("scenario"))
        self.scenario.use(key)

    def set_thinking_control(self, can: bool, why: str = "") -> None:
        """Whether the server switches thinking per request (else a scenario's thinking shares are not used)."""
        self.scenario.set_thinking_control(can, why)

    def _build_targets(self) -> FieldGroup:
        group = FieldGroup("Targets for the recommendation")
        self.targets = TargetFields()
        self.ttft, self.tpot, self.success = self.targets.widgets
        self.target_messages = (group.add_field("TTFT p95 ≤", self.ttft, hint=TTFT_HINT),
                                group.add_field("TPOT p95 ≤", self.tpot, hint=TPOT_HINT),
                                group.add_field("Success ≥", self.success))
        return group

    # ---- state from the page -------------------------------------------------------------------
    def set_models(self, names: list[str]) -> None:
        """Offer these model names, keeping what was typed."""
        current = self.model.currentText()
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItems(names)
        self.model.setEditText(current or (names[0] if names else ""))
        self.model.blockSignals(False)

    def set_server(self, settings: ServerSettings, managed: bool, why: str) -> None:
        """The server's current settings, and whether its settings may vary (why: the explanation)."""
        first = self._base == ServerSettings() and not any(b.isChecked() for b in self.kv_boxes.values())
        self._base = settings
        self._managed = managed
        if first or not any(b.isChecked() for b in self.kv_boxes.values()):
            for kv, box in self.kv_boxes.items():
                box.setChecked(kv == settings.kv_cache_type)
        self.context.setPlaceholderText(f"current ({settings.context_length or 'the server default'})")
        self.fa.setItemText(0, f"Keep the current ({settings.flash_attention})")
        for widget in self._server_widgets:
            widget.setEnabled(managed)
        if managed:
            self.compare_message.clear_message()
        else:  # the default is set by restarting the server, which only one ollama-deck started can do
            self.compare_message.show_info("Not available: the server's defaults are measured by restarting it on "
                                           "them, which needs a server ollama-deck starts.")
        self.set_mode_text(why, warning=not managed)
        self._refresh_summary()

    def set_mode_text(self, text: str, warning: bool = False) -> None:
        """The line above the fields saying what a sweep will do to the server."""
        self.mode_label.setText(text)
        colour, border = ("#ffe8b0", "#f0b429") if warning else ("#d6efff", "#2f6f9a")
        self.mode_label.setStyleSheet(f"QLabel {{ color: {colour}; border: 1px solid {border}; border-radius: 6px; "
                                      "padding: 6px 8px; background: rgba(76, 194, 255, 0.06); }")

    def set_running(self, running: bool) -> None:
        """Lock the fields while a sweep runs."""
        for kind in (QLineEdit, QComboBox, QSpinBox, QDoubleSpinBox, QCheckBox, QPlainTextEdit):  # ranged ones too
            for child in self.findChildren(kind):
                child.setEnabled(not running and (self._managed or child not in self._server_widgets))
        self.rate.setEnabled(not running and self.loop_mode.currentData() == "open")
        self.scenario.save_button.setEnabled(not running)
        self.capacity.set_running(running)
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def set_start_blocked(self, reason: str) -> None:
        """Disable Start with a reason (e.g. no server can be reached); empty re-enables it."""
        self.start_button.setEnabled(not reason)
        self.start_button.setToolTip(reason)

    # ---- the spec --------------------------------------------------------------------------------
    def spec(self) -> SweepSpec:
        """The sweep the fields describe; raises SpecError with the reason."""
        self._check_fields()
        model = self.model.currentText().strip()
        if not model:
            raise SpecError("Choose a model to benchmark.")
        self.capacity_ask()  # its problem, if any, before the rest
        clients = self._int_list("clients")
        try:
            if self._managed:
                parallel = self._int_list("parallel")
                contexts = self._int_list("context")
                kvs = tuple(kv for kv, box in self.kv_boxes.items() if box.isChecked())
                if not kvs:
                    raise SpecError("Tick at least one KV-cache type.")
                fa = {"current": None, "on": ("on",), "off": ("off",), "both": ("on", "off")}[self.fa.currentData()]
                axes = SweepAxes(parallel, clients, kvs, contexts, fa)
            else:
                axes = SweepAxes(None, clients if self.uses_scenario else clients or (1, 2, 4, 8))
        except SweepPlanError as exc:
            raise SpecError(str(exc)) from None
        if self.uses_scenario:
            return self._compared(self._scenario_spec(model, axes))
        open_loop = self.loop_mode.currentData() == "open"
        if open_loop and axes.concurrency is None:
            axes = SweepAxes(axes.parallel, (0,), axes.kv_cache_types, axes.context_lengths, axes.flash_attention)
        stop_value, unit = self.requests.value(), self.stop_unit.currentData()
        plan = LoadPlan(model=model, prompts=self._prompts(), mode="open" if open_loop else "closed",
                        rate_rps=self.rate.value() if open_loop else 0.0,
                        requests=stop_value if unit == "requests" and stop_value else None,
                        duration_s=float(stop_value) if unit == "seconds" and stop_value else None,
                        requests_per_client=4 if not stop_value else None,
                        num_predict=self.num_predict.value() or None, think=self.think.currentData())
        targets = self.targets.targets()
        spec = SweepSpec(self._base, axes, plan, targets, managed=self._managed, force=self.force.isChecked())
        try:
            spec.plan()
        except SweepPlanError as exc:
            raise SpecError(str(exc)) from None
        return self._compared(spec)

    def _compared(self, spec: SweepSpec) -> SweepSpec:
        """With "Before/after" ticked (on a managed server): the spec with the server's defaults as a point."""
        if not (self.compare.isChecked() and self._managed and self._server_defaults is not None):
            return spec
        try:
            return with_server_defaults(spec, self._server_defaults)
        except SweepPlanError as exc:
            raise SpecError(f"Before/after: {exc}") from None

    def _scenario_spec(self, model: str, axes: SweepAxes) -> SweepSpec:
        """The sweep of the scenario shown, over `axes` (no cap on requests in flight unless Clients sets one)."""
        try:
            scenario = self.scenario.scenario()
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        stop_value, unit = self.requests.value(), self.stop_unit.currentData()
        requests = stop_value if unit == "requests" and stop_value else None
        duration = float(stop_value) if unit == "seconds" and stop_value else None
        if self.capacity.wanted:
            duration = step_duration(requests, duration)  # as the CLI's --rate-sweep does
        try:
            plan = scenario_plan(model, scenario, requests=requests, duration_s=duration)
            return scenario_spec(self._base, axes, plan, self.targets.targets(), managed=self._managed,
                                 force=self.force.isChecked())
        except (ScenarioSpecError, SweepPlanError) as exc:
            raise SpecError(str(exc)) from None

    def capacity_ask(self) -> CapacityAsk | None:
        """The rate sweep to run after the sweep (None: none asked); SpecError with the reason."""
        try:
            return self.capacity.ask()
        except ValueError as exc:
            raise SpecError(str(exc)) from None

    # Each list field: (its bounds, whether it may be empty, and whether it only counts on a managed server).
    _LISTS: dict[str, tuple[int, int | None, bool]] = {
        "parallel": (1, MAX_PARALLEL, True), "clients": (1, None, False), "context": (MIN_CONTEXT, MAX_CONTEXT, True)}

    def _int_list(self, name: str) -> tuple[int, ...] | None:
        text = getattr(self, name).text()
        low, high, _server = self._LISTS[name]
        if not text.strip() and name != "parallel":
            return None  # empty: clients follow parallel; the context stays as it is
        return parse_int_list(text, "", low, high)

    def list_problems(self) -> dict[str, str]:
        """Each sweep list's reason for not being a list of values ('' where it is one), by field name."""
        problems: dict[str, str] = {}
        for name, (_low, _high, server) in self._LISTS.items():
            problems[name] = ""
            if server and not self._managed:
                continue  # disabled: an attached server keeps its own
            try:
                self._int_list(name)
            except SweepPlanError as exc:
                problems[name] = str(exc)
        return problems

    def _ranged_fields(self) -> list[RangedField]:
        return [self.requests, self.num_predict, self.rate, *self.targets.widgets]

    def _check_fields(self) -> None:
        """Show each field's problem next to it; raise FieldErrors when a field cannot be read."""
        messages = {"parallel": self.parallel_message, "clients": self.clients_message,
                    "context": self.context_message}
        errors: dict[str, str] = {}
        for name, problem in self.list_problems().items():
            if problem:
                messages[name].show_error(problem)
                errors[name] = problem
            else:
                messages[name].clear_message()
        ranged = (self.requests_message, self.num_predict_message, self.rate_message, *self.target_messages)
        for field, message in zip(self._ranged_fields(), ranged, strict=True):
            if field.problem():
                message.show_error(field.problem())
                errors[field.objectName()] = field.problem()
            elif field.refused():
                message.show_warning(field.refused())
            else:
                message.clear_message()
        if errors:
            raise FieldErrors(errors)

    def _prompts(self) -> tuple[BenchPrompt, ...]:
        key = self.prompts.currentData()
        if key == FROM_FILE:
            if not self._file_prompts:
                raise SpecError("Choose a prompt file (Prompts → From a file…).")
            return self._file_prompts
        return prompt_sets()[key]

    def load_prompt_file(self, path: str) -> bool:
        """Use the prompts in a file; a problem is shown under Prompts and False returned."""
        try:
            prompts = parse_prompt_file(Path(path).read_text(encoding="utf-8"), Path(path).name)
        except (OSError, UnicodeDecodeError) as exc:
            self.prompt_message.show_error(f"Cannot read {path}: {getattr(exc, 'strerror', None) or exc}.")
            return False
        except PromptFileError as exc:
            self.prompt_message.show_error(str(exc))
            return False
        self._file_prompts = prompts
        self.prompts.setCurrentIndex(self.prompts.findData(FROM_FILE))
        self.prompts.setItemText(self.prompts.currentIndex(), f"{Path(path).name} ({len(prompts)} prompts)")
        self.prompt_message.clear_message()
        return True

    def _prompt_choice(self) -> None:
        if self.prompts.currentData() == FROM_FILE:
            path, _ = QFileDialog.getOpenFileName(self, "Prompts for the benchmark", "",
                                                  "Prompts (*.txt *.jsonl *.json);;All files (*)")
            if path:
                self.load_prompt_file(path)

    def _refresh_summary(self) -> None:
        try:
            spec = self.spec()
        except SpecError as exc:
            self.summary.setText("")
            self.message.show_warning(str(exc)) if self.model.currentText().strip() else self.message.clear_message()
            return
        self.message.clear_message()
        plan = spec.plan()
        restarts = len({p.settings for p in plan.points}) if spec.managed else 0
        text = f"{len(plan.points)} point{'s' if len(plan.points) != 1 else ''}"
        if restarts:
            text += f", {restarts} server restart{'s' if restarts != 1 else ''}"
        text += f" · {spec.workload.describe(per_point_clients=True)}."
        ask = self.capacity_ask()
        scenario = spec.workload.scenario
        if ask is not None and scenario is not None:
            text += f" Then the capacity at the recommended point: {ask.ladder.describe(open_rate(scenario))}."
        self.summary.setText(text)

    def _start(self) -> None:
        try:
            spec = self.spec()
        except SpecError as exc:
            self.message.show_error(str(exc))
            return
        self.message.clear_message()
        self.start_requested.emit(spec)


def _preset_title(key: str) -> str:
    from app.core.console.presets import builtin

    preset = builtin(key)
    return preset.title if preset else key


__all__ = ["FieldErrors", "SpecError", "SweepEditor"]
