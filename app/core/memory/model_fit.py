"""Will a local model fit the GPU under the server's settings? The estimator, fed the launch the
backend's server plans for the model (its LoadPlanner: the request, the model's own parameters, the
server's settings and its defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, VramEstimate, estimate
from app.core.memory.verdict import Verdict, verdict_label
from app.core.model_facts import ModelFacts
from app.core.ports.planner import LoadPlanner
from app.core.server.settings import ServerSettings


@dataclass(frozen=True)
class FitVerdict:
    """The verdict for one model: fits | tight | spills | wont_load | unknown, and why."""

    verdict: Verdict
    num_ctx: int | None
    context_source: str
    explanation: str
    estimate: VramEstimate | None = None

    @property
    def label(self) -> str:
        """The verdict in a word or two."""
        return verdict_label(self.verdict)


def fit_verdict(facts: ModelFacts, size_bytes: int, settings: ServerSettings, version: str | None,
                gpu_total_bytes: int | None, gpu_unknown_reason: str = "", *, planner: LoadPlanner,
                context_setting: str = "the context setting") -> FitVerdict:
    """Price a model (its facts, with the model's own context and batch when it sets them, and size on disk)
    on this GPU under these settings. Without a known GPU the verdict is "unknown" and says why.
    """
    try:
        shape = facts.shape(size_bytes)
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, None, "", f"Cannot estimate this model: {exc.user_text()}")
    gpu = None if gpu_total_bytes is None else GpuMemory(total_bytes=gpu_total_bytes)
    try:
        plan = planner.plan(settings, shape, size_bytes, gpu, server_version=version,
                            model_num_ctx=facts.own_context,
                            model_num_batch=facts.own_batch, context_setting=context_setting)
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, None, "", f"Cannot estimate this model: {exc.user_text()}")
    num_ctx, source = plan.num_ctx, plan.context_source
    if gpu is None:
        why = gpu_unknown_reason or "no GPU was detected"
        return FitVerdict(Verdict.UNKNOWN, num_ctx, source,
                          f"GPU unknown ({why}), so there is no verdict; it would load with num_ctx "
                          f"{num_ctx} × {settings.num_parallel} parallel ({source}).")
    try:
        est = estimate(shape, plan.load_settings(), gpu, plan.rules)
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, num_ctx, source, f"Cannot estimate this model: {exc.user_text()}")
    return FitVerdict(est.verdict, num_ctx, source, est.explanation, est)


__all__ = ["FitVerdict", "fit_verdict"]
