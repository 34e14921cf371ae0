"""Ollama's load planner: the launch it really makes for a model, by its version's rules.

Up to 0.11.10 (era A) its own legacy estimate places the layers; up to 0.29 (era B) its Go engine
places them by trial allocations; from 0.30 (era C) it plans the llama-server launch itself (the
automatic batch, one slot for some architectures) and llama-server's --fit places the layers. The
default context is Ollama's by version and VRAM in every era.
"""

from __future__ import annotations

from app.backends.ollama.launch import predicted_lines
from app.backends.ollama.launch_plan import OllamaEra, OllamaGpus, context_for, era_for_version, plan_launch
from app.backends.ollama.legacy import LegacyEstimate, legacy_estimate
from app.core.memory.estimator import FIT_TARGET_MARGIN_BYTES, GpuMemory, LoadRules, LoadSettings
from app.core.memory.launch_plan import LaunchPlan
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings
from app.core.units import MIB

# The batch Ollama passes before 0.30 when the model sets none (api/types.go, DefaultOptions).
LEGACY_BATCH = 512


def own_estimate(shape: ModelShape, load: LoadSettings, free_bytes: int) -> LegacyEstimate:
    """Ollama ≤ 0.11.10's own estimate of a load, which places its layers (bytes)."""
    return legacy_estimate(shape, load.num_ctx, load.num_batch, load.parallel, load.kv_cache_type,
                           load.flash_attention, free_bytes, load.gpu_overhead_bytes, load.num_gpu)


ERA_RULES = {
    OllamaEra.A: LoadRules(label="A", description="era A (Ollama <= 0.11.10, legacy estimate places layers)",
                           server_name="Ollama", fit_margin_bytes=0, own_estimate=own_estimate),
    OllamaEra.B: LoadRules(label="B", description="era B (Ollama 0.11.11-0.29, Go engine)",
                           server_name="Ollama", fit_margin_bytes=0),
    OllamaEra.C: LoadRules(label="C", description="era C (Ollama >= 0.30, llama-server --fit)",
                           server_name="Ollama", fit_margin_bytes=FIT_TARGET_MARGIN_BYTES),
}


def _gpus(gpu: GpuMemory | None) -> OllamaGpus:
    """The estimator's GPU as Ollama's scheduler sees it (no GPU: OllamaGpus.none())."""
    return OllamaGpus.none() if gpu is None or not gpu.total_bytes else OllamaGpus(gpu.total_bytes, gpu.free_bytes)


class OllamaPlanner:
    """The LoadPlanner of an Ollama server (app.core.ports.planner)."""

    def rules(self, server_version: str | None = None) -> LoadRules:
        """The era's placement (EstimateError for a version that cannot be read)."""
        return ERA_RULES[era_for_version(server_version)]

    def plan(self, settings: ServerSettings, shape: ModelShape, size_bytes: int | None = None,
             gpu: GpuMemory | None = None, *, server_version: str | None = None, model_num_ctx: int | None = None,
             model_num_batch: int | None = None, model_num_gpu: int | None = None,
             context_setting: str = "the context setting") -> LaunchPlan:
        """From 0.30 the launch Ollama plans for llama-server, shown as its command line; before, the
        settings with Ollama's default context and a batch of 512. A batch or micro-batch in the settings
        (Ollama has no server setting for them: a request's num_batch) is priced as given."""
        era = era_for_version(server_version)
        overhead = settings.gpu_overhead_mib * MIB
        asked_batch = None if model_num_batch else settings.batch_size
        ubatch = settings.micro_batch_size
        if era is OllamaEra.C:
            launch = plan_launch(settings, shape, _gpus(gpu), server_version, file_bytes=size_bytes,
                                 model_num_ctx=model_num_ctx, model_num_batch=model_num_batch or asked_batch,
                                 model_num_gpu=model_num_gpu, context_setting=context_setting)
            notes = launch.notes + ((f"Ollama passes -ub {launch.num_batch} (equal to -b); the micro-batch "
                                     f"priced is the {ubatch} asked for",) if ubatch else ())
            return LaunchPlan(num_ctx=launch.num_ctx, context_source=launch.context_source, parallel=launch.parallel,
                              num_batch=launch.num_batch,
                              batch_source="the batch setting" if asked_batch else launch.batch_source,
                              flash_attention=launch.flash_attention, kv_cache_type=settings.kv_cache_type,
                              rules=ERA_RULES[era], num_ubatch=ubatch, num_gpu=launch.num_gpu,
                              gpu_overhead_bytes=overhead, launch_lines=tuple(predicted_lines(launch)), notes=notes)
        ctx, source = context_for(settings, model_num_ctx, server_version, gpu.total_bytes if gpu else None,
                                  shape.context_length, context_setting=context_setting)
        batch = model_num_batch or asked_batch or LEGACY_BATCH
        batch_source = ("the model's num_batch" if model_num_batch else "the batch setting" if asked_batch
                        else "Ollama's default")
        # before 0.30 Ollama ran its own runner, not llama-server: there is no such command to show
        return LaunchPlan(num_ctx=ctx, context_source=source, parallel=max(1, settings.num_parallel), num_batch=batch,
                          batch_source=batch_source, flash_attention=settings.flash_attention,
                          kv_cache_type=settings.kv_cache_type, rules=ERA_RULES[era], num_ubatch=ubatch,
                          num_gpu=model_num_gpu, gpu_overhead_bytes=overhead)


OLLAMA_PLANNER = OllamaPlanner()

__all__ = ["ERA_RULES", "LEGACY_BATCH", "OLLAMA_PLANNER", "OllamaPlanner", "own_estimate"]
