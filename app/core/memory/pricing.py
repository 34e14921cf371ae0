"""Price server settings for one model on one GPU (or none): the bridge from the form to the estimator.

From Ollama 0.30 the load is the one Ollama itself plans (ollama_launch: the automatic batch by
context and VRAM, the default context by VRAM, capped at the training context)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.memory import model_fit
from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, LoadSettings, OllamaEra, VramEstimate, era_for_version, estimate
from app.core.memory.host import HostMemory
from app.core.memory.verdict import Verdict
from app.core.memory.ollama_launch import LaunchPlan, OllamaGpus, ollama_plans_launch, plan_launch
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings
from app.core.units import MIB


# The grid of the "what fits" heat-map: parallel slots (rows) x context per request (columns).
GRID_PARALLEL = (1, 2, 3, 4, 6, 8, 12, 16)
GRID_CONTEXT = (2048, 4096, 8192, 16384, 24576, 32768, 40960, 65536, 131072)


def ollama_gpus(gpu: GpuMemory | None) -> OllamaGpus:
    """The estimator's GPU as Ollama's scheduler sees it (no GPU: OllamaGpus.none())."""
    return OllamaGpus.none() if gpu is None else OllamaGpus(gpu.total_bytes, gpu.free_bytes)


def launch_plan_for(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None,
                    version: str | None) -> LaunchPlan:
    """What Ollama ≥ 0.30 will pass to llama-server for this model with these settings."""
    return plan_launch(settings, shape, ollama_gpus(gpu), version)


def load_settings_for(settings: ServerSettings, shape: ModelShape, gpu_total_bytes: int | None,
                      version: str | None, num_batch: int | None = None,
                      gpu_free_bytes: int | None = None) -> LoadSettings:
    """The load that `ollama serve` with these settings would make for this model (bytes of the GPU,
    None or 0 for none).

    A context above the model's training context is clamped, as Ollama does; flash attention
    'auto' counts as on (Ollama enables it for the architectures it supports). From 0.30 the batch
    is Ollama's automatic one unless num_batch is given; before (and for other servers), 512."""
    ctx, _source = model_fit.context_for(settings, None, version, gpu_total_bytes, shape.context_length)
    if num_batch is None and ollama_plans_launch(settings, version):
        total = gpu_total_bytes or 0
        gpus = OllamaGpus(total, total if gpu_free_bytes is None else gpu_free_bytes) if total else OllamaGpus.none()
        plan = plan_launch(settings, shape, gpus, version)
        settings, num_batch = settings.replace(num_parallel=plan.parallel), plan.num_batch
    return model_fit.load_settings(settings, ctx, num_batch)


def price(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory | None, version: str | None,
          host: HostMemory | None = None) -> VramEstimate:
    """The estimate for these settings on this GPU (None: no GPU) and host (raises EstimateError for
    impossible inputs)."""
    load = load_settings_for(settings, shape, gpu.total_bytes if gpu else None, version,
                             gpu_free_bytes=gpu.free_bytes if gpu else None)
    return estimate(shape, load, gpu, era_for_version(version), host)


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
             contexts: tuple[int, ...] = GRID_CONTEXT, host: HostMemory | None = None) -> list[list[FitCell]]:
    """Verdicts for parallel x context (rows x columns) with the other settings as given."""
    era: OllamaEra = era_for_version(version)
    rows = []
    for p in parallels:
        row = []
        for c in contexts:
            if shape.context_length and c > shape.context_length:
                row.append(FitCell(p, c, Verdict.INVALID, reason=f"above the model's training context "
                                                                 f"({shape.context_length:,} tokens)"))
                continue
            load = load_settings_for(settings.replace(num_parallel=p, context_length=c), shape,
                                     gpu.total_bytes if gpu else None, version,
                                     gpu_free_bytes=gpu.free_bytes if gpu else None)
            try:
                est = estimate(shape, load, gpu, era, host)
            except EstimateError as exc:
                row.append(FitCell(p, c, Verdict.INVALID, reason=exc.message))
                continue
            row.append(FitCell(p, c, est.verdict, est.host_bytes if est.cpu_only else est.total_gpu_bytes))
        rows.append(row)
    return rows


def others_bytes(gpu_used_mib: float, server_mib: float, server_running: bool, loaded_vram_bytes: int) -> int:
    """GPU memory (bytes) used by processes other than the Ollama server, from one NVML reading.

    With the server running, its share is NVML's per-process figure when known, else what
    the server says its loaded models hold."""
    if math.isnan(gpu_used_mib):
        return 0
    if not server_running:
        return int(gpu_used_mib * MIB)
    ours = server_mib * MIB if not math.isnan(server_mib) else loaded_vram_bytes
    return max(0, int(gpu_used_mib * MIB - ours))
