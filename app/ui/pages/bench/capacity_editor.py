"""The sweep editor's "Find the capacity": after the sweep, a rate sweep of the scenario at the recommended
point (the CLI's --rate-sweep/--refine). The rates are the CLI's spelling (empty: automatic), checked as they
are typed; the group is disabled, with the reason, for a workload that has no open-loop class to raise."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QLineEdit, QWidget

from app.core.bench.capacity import (GROWTH, REFINE_STEPS, STEP_SECONDS, CapacityError, RateLadder, make_ladder,
                                     rate_sweep_refusal)
from app.core.bench.scenario import Scenario
from app.ui.widgets.forms import FieldGroup, RangedSpinBox, left_aligned

MAX_STEP_SECONDS = 3600


@dataclass(frozen=True)
class CapacityAsk:
    """A rate sweep as asked on the page: its ladder, and each step's seconds (None: the sweep's own stop
    rule, which is STEP_SECONDS when it is automatic, as in the CLI)."""

    ladder: RateLadder
    step_seconds: float | None = None


class CapacityGroup(FieldGroup):
    """The "Find the capacity" fields; `changed` whenever what they ask (or its problem) changes."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Capacity", parent)
        self._refusal = rate_sweep_refusal(None)
        self.enabled = QCheckBox("Find the capacity after the sweep")
        self.enabled.setObjectName("capacity_enabled")
        self.enabled_message = self.add_field(
            "Rate sweep", left_aligned(self.enabled),
            hint="At the recommended point, raise the open-loop classes' arrival rates step by step until a target "
                 "breaks, then refine: the sustainable rate and requests per day. Closed-loop classes run alongside, "
                 "not scaled.")
        self.rates = QLineEdit()
        self.rates.setObjectName("capacity_rates")
        self.rates.setPlaceholderText("automatic")
        self.rates_message = self.add_field(
            "Rates (req/s)", self.rates,
            hint=f"Empty: from half the scenario's rates, ×{GROWTH:g} per step until a step misses. START:STOP "
                 "(e.g. 0.5:8, either side may be left out) or a list (0.5, 1, 2, 4): the open-loop classes' total.")
        self.refine = RangedSpinBox()
        self.refine.setObjectName("capacity_refine")
        self.refine.setRange(0, 10)
        self.refine.setValue(REFINE_STEPS)
        self.refine_message = self.add_field("Refining steps", left_aligned(self.refine),
                                             hint="Bisection steps between the last rate that met the targets and "
                                                  "the first that missed.")
        self.step_seconds = RangedSpinBox()
        self.step_seconds.setObjectName("capacity_step_seconds")
        self.step_seconds.setRange(0, MAX_STEP_SECONDS)
        self.step_seconds.setSpecialValueText("auto")
        self.step_seconds.setSuffix(" s")
        self.step_seconds.setValue(0)
        self.step_seconds_message = self.add_field(
            "Each step", left_aligned(self.step_seconds),
            hint=f"How long each step sends requests. auto: the sweep's Per point (when that is auto too, "
                 f"{STEP_SECONDS:g} s, so a step's request count grows with its rate).")
        self._details = (self.rates, self.refine, self.step_seconds)
        self.enabled.toggled.connect(self._changed)
        self.rates.textChanged.connect(self._changed)
        self.refine.valueChanged.connect(self._changed)
        self.refine.problem_changed.connect(self._changed)
        self.step_seconds.valueChanged.connect(self._changed)
        self.step_seconds.problem_changed.connect(self._changed)
        self._locked = False
        self._show_state()

    # ---- what it asks ----------------------------------------------------------------------------
    @property
    def refusal(self) -> str:
        """Why no rate sweep can run on the workload shown ('' when one can)."""
        return self._refusal

    @property
    def wanted(self) -> bool:
        """True when a rate sweep is asked for and the workload allows one."""
        return self.enabled.isChecked() and not self._refusal

    def problem(self) -> str:
        """Why the fields do not describe a ladder ('' when they do, or when no rate sweep is asked)."""
        if not self.wanted:
            return ""
        for field in (self.refine, self.step_seconds):
            if field.problem():
                return field.problem()
        try:
            make_ladder(self.rates.text().replace(" ", ""), self.refine.value())
        except CapacityError as exc:
            text = str(exc)
            return text[:1].upper() + text[1:]
        return ""

    def ask(self) -> CapacityAsk | None:
        """The rate sweep asked for (None: none); ValueError with the reason when the fields are wrong."""
        if not self.wanted:
            return None
        problem = self.problem()
        if problem:
            raise ValueError(f"Capacity: {problem}")
        seconds = self.step_seconds.value()
        return CapacityAsk(make_ladder(self.rates.text().replace(" ", ""), self.refine.value()),
                           float(seconds) if seconds else None)

    def set_workload(self, scenario: Scenario | None) -> None:
        """The workload shown: a scenario (None: one prompt, or a scenario that cannot be read yet)."""
        refusal = rate_sweep_refusal(scenario)
        if refusal != self._refusal:
            self._refusal = refusal
            self._show_state()
            self.changed.emit()

    def set_running(self, running: bool) -> None:
        """Lock the fields while a sweep runs."""
        self._locked = running
        self._show_state()

    # ---- showing ---------------------------------------------------------------------------------
    def _changed(self) -> None:
        self._show_state()
        self.changed.emit()

    def _show_state(self) -> None:
        usable = not self._refusal and not self._locked
        self.enabled.setEnabled(usable)
        for w in self._details:
            w.setEnabled(usable and self.enabled.isChecked())
        if self._refusal:  # said where the box is, and on it
            reason = f"Not available: {self._refusal}."
            self.enabled_message.show_info(reason)
            self.enabled.setToolTip(reason)
        else:
            self.enabled_message.clear_message()
            self.enabled.setToolTip("")
        messages = ((self.rates, self.rates_message), (self.refine, self.refine_message),
                    (self.step_seconds, self.step_seconds_message))
        problem = self.problem()
        for field, message in messages:
            own = field.problem() if isinstance(field, RangedSpinBox) else problem
            if own and self.wanted and (field is not self.rates or not any(
                    f.problem() for f in (self.refine, self.step_seconds))):
                message.show_error(own)
            else:
                message.clear_message()


__all__ = ["CapacityAsk", "CapacityGroup"]
