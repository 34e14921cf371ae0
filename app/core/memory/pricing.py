"""Price server settings for one model on one GPU: the bridge from the form to the estimator."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.memory import model_fit
from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, LoadSettings, OllamaEra, VramEstimate, era_for_version, estimate
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings
from app.core.units import MIB


# The grid of the "what fits" heat-map: parallel slots (rows) x context per request (columns).
GRID_PARALLEL = (1, 2, 3, 4, 6, 8, 12, 16)
GRID_CONTEXT = (2048, 4096, 8192, 16384, 24576, 32768, 40960, 65536, 131072)


def load_settings_for(settings: ServerSettings, shape: ModelShape, gpu_total_bytes: int,
                      version: str | None, num_batch: int = 512) -> LoadSettings:
    """The load that `ollama serve` with these settings would make for this model.

    A context above the model's training context is clamped, as Ollama does; flash attention
    'auto' counts as on (Ollama enables it for the architectures it supports)."""
    ctx, _source = model_fit.context_for(settings, None, version, gpu_total_bytes, shape.context_length)
    return model_fit.load_settings(settings, ctx, num_batch)


def price(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory, version: str | None) -> VramEstimate:
    """The estimate for these settings (raises EstimateError for impossible inputs)."""
    load = load_settings_for(settings, shape, gpu.total_bytes, version)
    return estimate(shape, load, gpu, era_for_version(version))


@dataclass(frozen=True)
class FitCell:
    """One cell of the heat-map: a verdict, or why there is none."""

    parallel: int
    context: int
    verdict: str  # fits | tight | spills | wont_load | invalid
    total_gpu_bytes: int = 0
    reason: str = ""


def fit_grid(settings: ServerSettings, shape: ModelShape, gpu: GpuMemory, version: str | None,
             parallels: tuple[int, ...] = GRID_PARALLEL,
             contexts: tuple[int, ...] = GRID_CONTEXT) -> list[list[FitCell]]:
    """Verdicts for parallel x context (rows x columns) with the other settings as given."""
    era: OllamaEra = era_for_version(version)
    rows = []
    for p in parallels:
        row = []
        for c in contexts:
            if shape.context_length and c > shape.context_length:
                row.append(FitCell(p, c, "invalid", reason=f"above the model's {shape.context_length} context"))
                continue
            load = load_settings_for(settings.replace(num_parallel=p, context_length=c), shape,
                                     gpu.total_bytes, version)
            try:
                est = estimate(shape, load, gpu, era)
            except EstimateError as exc:
                row.append(FitCell(p, c, "invalid", reason=exc.message))
                continue
            row.append(FitCell(p, c, est.verdict, est.total_gpu_bytes))
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
