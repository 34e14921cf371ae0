"""The three latency-target fields (TTFT p95, TPOT p95, success), shared by the sweep editor and the
re-judge row of a run's recommendation card."""

from __future__ import annotations

from PySide6.QtWidgets import QDoubleSpinBox, QSpinBox

from app.core.bench.stats import LatencyTargets

TTFT_HINT = "Time to first token, queueing included."
TPOT_HINT = "Time per output token after the first (100 ms ≈ 10 tokens/s)."


class TargetFields:
    """Owns the spin boxes; `targets()` reads them, `set_targets()` fills them."""

    def __init__(self, prefix: str = "") -> None:
        self.ttft = QSpinBox()
        self.ttft.setObjectName(f"{prefix}ttft_target")
        self.ttft.setRange(10, 600_000)
        self.ttft.setSuffix(" ms")
        self.tpot = QSpinBox()
        self.tpot.setObjectName(f"{prefix}tpot_target")
        self.tpot.setRange(1, 10_000)
        self.tpot.setSuffix(" ms")
        self.success = QDoubleSpinBox()
        self.success.setObjectName(f"{prefix}success_target")
        self.success.setRange(50.0, 100.0)
        self.success.setSuffix(" %")
        self.set_targets(LatencyTargets())
        self.ttft.setToolTip(TTFT_HINT)
        self.tpot.setToolTip(TPOT_HINT)

    @property
    def widgets(self) -> tuple:
        return self.ttft, self.tpot, self.success

    def targets(self) -> LatencyTargets:
        return LatencyTargets(float(self.ttft.value()), float(self.tpot.value()), self.success.value() / 100)

    def set_targets(self, targets: LatencyTargets) -> None:
        """Fill the fields; a target that was off (None) shows the default."""
        default = LatencyTargets()
        self.ttft.setValue(round(targets.ttft_p95_ms if targets.ttft_p95_ms is not None else default.ttft_p95_ms))
        self.tpot.setValue(round(targets.tpot_p95_ms if targets.tpot_p95_ms is not None else default.tpot_p95_ms))
        self.success.setValue(targets.min_success * 100)
