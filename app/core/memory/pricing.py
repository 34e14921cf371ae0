"""Price server settings for one model on one GPU (or none): the bridge from the form to the estimator.

The load priced is the one the backend's server really makes (its LoadPlanner: a context or batch it
picks by itself, its layer placement), not the form's numbers as they stand."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, VramEstimate, estimate
from app.core.memory.host import HostMemory
from app.core.memory.launch_plan import LaunchPlan
from app.core.memory.verdict import Verdict
from app.core.model_shape import ModelShape
from app.core.ports.planner import LoadPlanner
from app.core.server.settings import ServerSettings
from app.core.units import MIB


# The grid of the "what fits" heat-map: parallel slots (rows) x context per request (columns).
GRID_PARALLEL = (1, 2, 3, 4, 6, 8, 12, 16)
GRID_CONTEXT = (2048, 4096, 8192, 16384, 24576, 32768, 40960, 65536, 131072)


@dataclass(frozen=True)
class Priced:
    """One setting priced: the launch the server makes for it and what that launch holds (bytes)."""

    plan: LaunchPlan
    estimate: VramEstimate


def price_load(planner: LoadPlanner, settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None,
               version: str | None, host: HostMemory | None = None, *, size_bytes: int | None = None,
               model_num_ctx: int | None = None, model_num_batch: int | None = None,
               model_num_gpu: int | None = None, context_setting: str = "the context setting") -> Priced:
    """The one price of a setting, behind every surface that shows one: the launch `planner`'s server at
    `version` makes for this model on this GPU (None: none) — its context, batch, flash attention, slots and
    layer rules, the model's own num_ctx/num_batch/num_gpu where it sets them — and that launch's estimate
    against the GPU and the host. Raises EstimateError for impossible inputs or an unreadable version."""
    plan = planner.plan(settings, shape, size_bytes, gpu, server_version=version, model_num_ctx=model_num_ctx,
                        model_num_batch=model_num_batch, model_num_gpu=model_num_gpu,
                        context_setting=context_setting)
    return Priced(plan, estimate(shape, plan.load_settings(), gpu, plan.rules, host))


def plan_for(planner: LoadPlanner, settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None,
             version: str | None) -> LaunchPlan:
    """The launch the server at `version` makes for this model with these settings on this GPU (None: none)."""
    return planner.plan(settings, shape, None, gpu, server_version=version)


def price(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None, version: str | None,
          host: HostMemory | None = None, *, planner: LoadPlanner) -> VramEstimate:
    """price_load's estimate alone (raises EstimateError for impossible inputs)."""
    return price_load(planner, settings, shape, gpu, version, host).estimate


@dataclass(frozen=True)
class FitCell:
    """One cell of the heat-map: a verdict, or why there is none."""

    parallel: int
    context: int
    verdict: Verdict  # fits | tight | spills | wont_load | invalid
    total_gpu_bytes: int = 0
    reason: str = ""


def fit_grid(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None, version: str | None,
             parallels: tuple[int, ...] = GRID_PARALLEL,
             contexts: tuple[int, ...] = GRID_CONTEXT, host: HostMemory | None = None, *,
             planner: LoadPlanner, model_num_batch: int | None = None) -> list[list[FitCell]]:
    """Verdicts for parallel x context (rows x columns) with the other settings as given, each priced by
    price_load (a cell's context is the request's own, so the model's num_ctx does not replace it; its
    num_batch does, where it sets one)."""
    rows = []
    for p in parallels:
        row = []
        for c in contexts:
            if shape.context_length and c > shape.context_length:
                row.append(FitCell(p, c, Verdict.INVALID, reason=f"above the model's training context "
                                                                 f"({shape.context_length:,} tokens)"))
                continue
            try:
                est = price_load(planner, settings.replace(num_parallel=p, context_length=c), shape, gpu, version,
                                 host, model_num_batch=model_num_batch).estimate
            except EstimateError as exc:
                row.append(FitCell(p, c, Verdict.INVALID, reason=exc.message))
                continue
            row.append(FitCell(p, c, est.verdict, est.host_bytes if est.cpu_only else est.total_gpu_bytes))
        rows.append(row)
    return rows


def others_bytes(gpu_used_mib: float, server_mib: float, server_running: bool, loaded_vram_bytes: int) -> int:
    """GPU memory (bytes) used by processes other than the server, from one NVML reading.

    `gpu_used_mib` is the reading's used memory as nvidia-smi shows it: where the driver reports its reserve
    apart (GpuSample.memory_reserved_mib), used leaves it out and the caller prices it as
    GpuMemory.reserved_bytes; where it does not, used holds it and it is counted here, once either way.
    With the server running, its share is NVML's per-process figure when known, else what
    the server says its loaded models hold."""
    if math.isnan(gpu_used_mib):
        return 0
    if not server_running:
        return int(gpu_used_mib * MIB)
    ours = server_mib * MIB if not math.isnan(server_mib) else loaded_vram_bytes
    return max(0, int(gpu_used_mib * MIB - ours))
