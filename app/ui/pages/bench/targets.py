"""The three latency-target fields (TTFT p95, TPOT p95, success), shared by the sweep editor and the
re-judge row of a run's recommendation card."""

from __future__ import annotations

from app.core.bench.stats import LatencyTargets
from app.ui.widgets.forms import RangedDoubleSpinBox, RangedSpinBox

TTFT_HINT = "Time to first token, queueing included."
TPOT_HINT = "Time per output token after the first (100 ms ≈ 10 tokens/s)."



def _first(*values: float | None) -> float:
    """The first value that is set (milliseconds); 0 when none is."""
    return next((v for v in values if v is not None), 0.0)


def _match(field: RangedSpinBox | RangedDoubleSpinBox, value: float) -> None:
    if field.value() == value:  # equal values emit nothing: the two fields do not echo each other
        return
    if isinstance(field, RangedSpinBox):
        field.setValue(int(value))  # a whole-number field: its twin sends whole numbers
    else:
        field.setValue(value)


class TargetFields:
    """Owns the spin boxes; `targets()` reads them, `set_targets()` fills them."""

    def __init__(self, prefix: str = "") -> None:
        self.ttft = RangedSpinBox()
        self.ttft.setObjectName(f"{prefix}ttft_target")
        self.ttft.setRange(10, 600_000)
        self.ttft.setSuffix(" ms")
        self.tpot = RangedSpinBox()
        self.tpot.setObjectName(f"{prefix}tpot_target")
        self.tpot.setRange(1, 10_000)
        self.tpot.setSuffix(" ms")
        self.success = RangedDoubleSpinBox()
        self.success.setObjectName(f"{prefix}success_target")
        self.success.setRange(50.0, 100.0)
        self.success.setSuffix(" %")
        self.set_targets(LatencyTargets())
        self.ttft.setToolTip(TTFT_HINT)
        self.tpot.setToolTip(TPOT_HINT)

    @property
    def widgets(self) -> tuple[RangedSpinBox, RangedSpinBox, RangedDoubleSpinBox]:
        return self.ttft, self.tpot, self.success

    def follow(self, other: TargetFields) -> None:
        """Show the same targets as `other`, both ways: one set of targets however many places edit it."""
        pairs: tuple[tuple[RangedSpinBox | RangedDoubleSpinBox, RangedSpinBox | RangedDoubleSpinBox], ...] = (
            (self.ttft, other.ttft), (self.tpot, other.tpot), (self.success, other.success))
        for mine, theirs in pairs:
            mine.valueChanged.connect(lambda value, field=theirs: _match(field, value))
            theirs.valueChanged.connect(lambda value, field=mine: _match(field, value))
        other.set_targets(self.targets())

    def targets(self) -> LatencyTargets:
        return LatencyTargets(float(self.ttft.value()), float(self.tpot.value()), self.success.value() / 100)

    def set_targets(self, targets: LatencyTargets) -> None:
        """Fill the fields; a target that was off (None) shows the default."""
        default = LatencyTargets()
        self.ttft.setValue(round(_first(targets.ttft_p95_ms, default.ttft_p95_ms)))
        self.tpot.setValue(round(_first(targets.tpot_p95_ms, default.tpot_p95_ms)))
        self.success.setValue(targets.min_success * 100)
