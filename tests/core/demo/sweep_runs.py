"""Finished sweeps as the benchmark history keeps them, for the demo's sweep step."""

from __future__ import annotations

from app.core.bench.outcome import PointStatus, RunStatus
from app.core.bench.run import SweepRun
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import Fingerprint, GpuFigures, PointResult, SweepAxes, SweepSpec
from app.core.bench.workload import LoadPlan
from app.core.server.settings import ServerSettings


def kept_run(model: str, targets: LatencyTargets = LatencyTargets(1000, 100)) -> SweepRun:
    """A finished parallel 1, 2 sweep of `model` on llama-server: 4 requests of 40 tokens per point, each taking
    2 s divided by the point's parallel (parallel 2 the faster), first tokens after 0.1 s."""
    spec = SweepSpec(ServerSettings(backend="llama_server", num_parallel=4), SweepAxes(parallel=(1, 2)),
                     LoadPlan(model, requests=4), targets)
    plan = spec.plan()
    results = []
    for p in plan.points:
        recs = tuple(RequestRecord(i, 0.0, 0.0, 2.0 / p.settings.num_parallel, first_token_s=0.1, output_tokens=40,
                                   output_chunks=40, itl_s=(0.01,) * 39) for i in range(4))
        results.append(PointResult(p, PointStatus.OK, stats=summarize(recs, targets), records=recs,
                                   gpu=GpuFigures()))
    run = SweepRun(spec, Fingerprint(model=model, backend_kind="llama_server"), plan.points, plan.varying,
                   tuple(results), started_at="2026-08-01T12:00:00+02:00")
    return run.finished(RunStatus.FINISHED, "2026-08-01T12:05:00+02:00")
