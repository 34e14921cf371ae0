"""A scenario as a sweep and its results per class: what the CLI and the Benchmark page both build and show.

`scenario_spec` turns a scenario and the sweep's axes into a SweepSpec (one LoadPlan with the scenario, no
cap on requests in flight unless the axes set one); `scenario_results` gives each measured point's
statistics per class, with the prompt tokens the workload asked for beside those the server counted;
`scenario_json` adds the scenario and those results to a run's JSON document.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from app.core.bench.run import SweepRun
from app.core.bench.scenario import Scenario
from app.core.bench.stats import ClassStats, LatencyTargets, RequestRecord, class_stats
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings

REQUESTS_PER_CLASS = 8  # a scenario's default request count per class


class ScenarioSpecError(ValueError):
    """The scenario and the sweep's other settings do not make a sweep; the message says why."""


def scenario_plan(model: str, scenario: Scenario, *, requests: int | None = None, duration_s: float | None = None,
                  warmup_requests: int | None = None) -> LoadPlan:
    """The load plan of a scenario: `requests` over all classes (default REQUESTS_PER_CLASS per class unless a
    duration is set). ScenarioSpecError lists its problems."""
    if requests is None and duration_s is None:
        requests = REQUESTS_PER_CLASS * len(scenario.classes)
    plan = LoadPlan(model=model, scenario=scenario, concurrency=0, requests=requests, duration_s=duration_s,
                    warmup_requests=warmup_requests)
    problems = [p for p in plan.problems() if "in-flight" not in p]  # the cap is set per point
    if problems:
        raise ScenarioSpecError(" ".join(problems))
    return plan


def scenario_spec(base: ServerSettings, axes: SweepAxes, plan: LoadPlan, targets: LatencyTargets, *,
                  managed: bool, force: bool = False) -> SweepSpec:
    """The sweep of a scenario's plan over `axes` (no cap on requests in flight unless they set clients). Raises
    SweepPlanError when the points cannot be planned."""
    if axes.concurrency is None:
        axes = replace(axes, concurrency=(0,))
    spec = SweepSpec(base, axes, plan, targets, managed=managed, force=force)
    spec.plan()
    return spec


@dataclass(frozen=True)
class ClassResult:
    """One class at one point: its statistics, and the prompt tokens asked for and those the server used
    (evaluated plus cached), each a mean over its successful requests where known (NaN where none is)."""

    stats: ClassStats
    requested_prompt_tokens: float
    delivered_prompt_tokens: float = math.nan

    @property
    def verdict(self) -> str:
        """"targets met", "no targets", or what was missed."""
        return class_verdict(self.stats)


@dataclass(frozen=True)
class PointClasses:
    """Every class's result at one measured point."""

    index: int  # the point's index in the sweep
    label: str  # the point in words (its varying settings)
    classes: tuple[ClassResult, ...]


def class_verdict(s: ClassStats) -> str:
    """The class's outcome in words: "targets met", "no targets", or the targets missed."""
    if s.met is True:
        return "targets met"
    if s.missed:
        return ("missed: " if s.met is False else "") + "; ".join(s.missed)
    return "no targets"


def _mean(values: list[int]) -> float:
    return sum(values) / len(values) if values else math.nan


def requested_prompt_mean(records: Sequence[RequestRecord], name: str) -> float:
    """The mean prompt tokens the workload asked the server to count for a class's successful requests."""
    return _mean([r.expected_prompt_tokens for r in records
                  if not r.warmup and r.ok and r.request_class == name and r.expected_prompt_tokens is not None])


def delivered_prompt_mean(records: Sequence[RequestRecord], name: str) -> float:
    """The mean prompt tokens the server used (evaluated plus cached) for a class's successful requests."""
    return _mean([n for r in records if not r.warmup and r.ok and r.request_class == name
                  and (n := r.delivered_prompt_tokens) is not None])


def scenario_results(run: SweepRun) -> list[PointClasses]:
    """Per measured point, each of the scenario's classes; [] without a scenario."""
    scenario = run.spec.workload.scenario
    if scenario is None:
        return []
    names = [c.name for c in scenario.classes]
    targets = {c.name: c.targets for c in scenario.classes}
    out = []
    for r in run.results:
        if r.stats is None:
            continue
        stats = class_stats(r.records, names, targets)
        out.append(PointClasses(r.point.index, r.point.label(run.varying),
                                tuple(ClassResult(s, requested_prompt_mean(r.records, s.name),
                                                  delivered_prompt_mean(r.records, s.name)) for s in stats)))
    return out


def scenario_json(run: SweepRun, data: dict[str, object]) -> None:
    """Add the scenario and its per-class results to a run's JSON (no change without a scenario)."""
    scenario = run.spec.workload.scenario
    if scenario is None:
        return
    data["scenario"] = scenario.to_json()
    data["classes"] = [{"point": p.index, "classes": [c.stats.to_json() for c in p.classes]}
                       for p in scenario_results(run)]


__all__ = ["REQUESTS_PER_CLASS", "ClassResult", "PointClasses", "ScenarioSpecError", "class_verdict",
           "delivered_prompt_mean", "requested_prompt_mean", "scenario_json", "scenario_plan", "scenario_results", "scenario_spec"]
