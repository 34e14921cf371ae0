"""Will a local model fit the GPU under the server's settings? The estimator, fed the launch the
backend's server plans for the model (its LoadPlanner: the request, the model's own parameters, the
server's settings and its defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, VramEstimate
from app.core.memory.pricing import price_load
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
                gpu: GpuMemory | None, gpu_unknown_reason: str = "", *, planner: LoadPlanner,
                context_setting: str = "the context setting") -> FitVerdict:
    """Price a model (its facts, with the model's own context and batch when it sets them, and size on disk)
    on this GPU (its size, what others hold and the runtime allowance, as every surface prices it) under
    these settings, through the one price (pricing.price_load). Without a known GPU the verdict is
    "unknown" and says why."""
    try:
        shape = facts.shape(size_bytes)
        if gpu is None:
            plan = planner.plan(settings, shape, size_bytes, None, server_version=version,
                                model_num_ctx=facts.own_context, model_num_batch=facts.own_batch,
                                context_setting=context_setting)
            why = gpu_unknown_reason or "no GPU was detected"
            return FitVerdict(Verdict.UNKNOWN, plan.num_ctx, plan.context_source,
                              f"GPU unknown ({why}), so there is no verdict; it would load with num_ctx "
                              f"{plan.num_ctx} × {plan.parallel} parallel ({plan.context_source}).")
        priced = price_load(planner, settings, shape, gpu, version, size_bytes=size_bytes,
                            model_num_ctx=facts.own_context, model_num_batch=facts.own_batch,
                            context_setting=context_setting)
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, None, "", f"Cannot estimate this model: {exc.user_text()}")
    est = priced.estimate
    return FitVerdict(est.verdict, priced.plan.num_ctx, priced.plan.context_source, est.explanation, est)


__all__ = ["FitVerdict", "fit_verdict"]
