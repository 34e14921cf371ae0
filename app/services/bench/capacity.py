"""Runs a rate sweep (app/core/bench/capacity.py) at one fixed setting, after a sweep's points.

The sweep runner measures each step at the point it hands over (SweepRunner.run's `after`): the recommended
point of a sweep over server settings, or the sweep's only point. Each step is the sweep's scenario with its
open-loop rates times the step's factor, measured the way a sweep point is (warm-up, GPU readings, the
server's survival, truncation), then judged; the ladder decides the next factor until the sweep is done or
cancelled (SweepRunner.cancel). Qt-free; progress and each judged step are reported through callbacks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.core.bench.capacity import Capacity, CapacityStep, RateLadder, at_factor, check_scalable, judge_step
from app.core.bench.outcome import PointStatus
from app.core.bench.run import SweepRun
from app.core.bench.scenario import Scenario
from app.core.bench.workload import LoadPlan
from app.core.bench.sweep import PointResult
from app.services.bench.sweep_runner import PointMeasure, SweepProgress


@dataclass(frozen=True)
class CapacityProgress:
    """Where a rate sweep stands: step k (from 0), its offered rate, the phase (restarting, loading, warm-up,
    measuring, …) and the request count in words."""

    step: int
    offered_rps: float
    phase: str
    detail: str = ""


# Seeds apart per step: each step's requests draw their own lengths and texts, so a step never finds the
# previous step's prompts in the server's cache (the steps run on one server without restarts).
STEP_SEED_STRIDE = 100_003


def step_workload(plan: LoadPlan, scenario: Scenario, factor: float, order: int) -> LoadPlan:
    """The workload of step `order` (from 0): the scenario at `factor` times its open-loop rates, seeded apart
    from the sweep's points and from every other step."""
    return plan.replace(scenario=at_factor(scenario, factor), seed=plan.seed + (order + 1) * STEP_SEED_STRIDE)


class CapacitySweep:
    """The after-sweep stage that runs a rate ladder; pass it as SweepRunner.run(after=…)."""

    def __init__(self, ladder: RateLadder, on_progress: Callable[[CapacityProgress], None] | None = None,
                 on_step: Callable[[Capacity, CapacityStep], None] | None = None, *,
                 step_seconds: float | None = None) -> None:
        """`step_seconds`: how long each step issues requests (None: the sweep's own stop rule, per step)."""
        if step_seconds is not None and not step_seconds > 0:
            raise ValueError(f"a step must last more than 0 s (asked: {step_seconds:g})")
        self._ladder = ladder
        self._step_seconds = step_seconds
        self._on_progress = on_progress or (lambda _p: None)
        self._on_step = on_step or (lambda _c, _s: None)

    async def __call__(self, run: SweepRun, chosen: PointResult | None, measure: PointMeasure) -> SweepRun:
        """The run with its capacity: every step measured at `chosen`'s setting and judged."""
        scenario = run.spec.workload.scenario
        if scenario is None:
            return run  # nothing to raise: the sweep ran a plain workload
        check_scalable(scenario)
        if chosen is None:
            capacity = Capacity(scenario, self._ladder, targets=run.spec.targets,
                                notes=("No rate sweep: no point of the sweep was measured to run it at.",))
            return replace(run, capacity=capacity)
        setting = chosen.point.label(("parallel", "concurrency"))
        if chosen.point.default:
            where = f"The rate sweep ran at the server's default setting ({setting}) after the sweep."
        elif len(run.points) > 1:
            where = f"The rate sweep ran at the recommended point ({setting}) after the sweep."
        else:
            where = f"The rate sweep ran at the sweep's one setting ({setting})."
        capacity = Capacity(scenario, self._ladder, setting=setting, targets=run.spec.targets, notes=(where,))
        order = 0
        while (factor := capacity.next_factor()) is not None:
            offered = capacity.base_rps * factor
            step_index = order

            def progress(p: SweepProgress, k: int = step_index, rate: float = offered) -> None:
                self._on_progress(CapacityProgress(k, rate, p.phase, p.detail))

            workload = step_workload(run.spec.workload, scenario, factor, order)
            if self._step_seconds is not None:
                workload = workload.replace(requests=None, requests_per_client=None, duration_s=self._step_seconds)
            result = await measure(workload, progress)
            if result is None:
                capacity = replace(capacity, cancelled=True)
                break
            failed = result.status in (PointStatus.FAILED, PointStatus.SKIPPED)
            step = judge_step(factor, result.records, scenario, run.spec.targets, self._ladder, order=order,
                              failure=result.reason if failed else "", failure_detail=result.detail if failed else "",
                              vram_peak_mib=result.gpu.server_peak_mib, gpu_util_pct=result.gpu.util_mean_pct,
                              card_peak_mib=result.gpu.card_peak_mib)
            step = replace(step, events=result.events)
            capacity = capacity.with_step(step)
            if result.contention.contended:
                capacity = replace(capacity, notes=(*capacity.notes, f"The step at {offered:.3g} req/s shared the "
                                                    f"device with other programs ({result.contention.short_text()}): "
                                                    "its figures are not the setting's alone."))
            if result.spoiled:
                capacity = replace(capacity, notes=(*capacity.notes, f"The step at {offered:.3g} req/s saw the server "
                                                    f"do something that skews its figures ("
                                                    f"{', '.join(k.label for k in result.spoiled_by)})."))
            self._on_step(capacity, step)
            order += 1
        return replace(run, capacity=capacity)


__all__ = ["STEP_SEED_STRIDE", "CapacityProgress", "CapacitySweep", "step_workload"]
