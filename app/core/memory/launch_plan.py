"""The launch a server will really make for one model, as the memory model prices it.

Each backend plans its own launch (app.core.ports.planner.LoadPlanner): a server that picks knobs by
itself (a default context by GPU memory, an automatic batch, one slot for some architectures) says
so in its plan. SettingsPlanner is a llama.cpp server started with the settings as given.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.memory.estimator import GpuMemory, LoadRules, LoadSettings
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings
from app.core.units import MIB

# llama.cpp's own defaults (common/common.h): -b 2048, -ub 512, and a 4096-token context for a model
# that names no training context.
DEFAULT_BATCH = 2048
DEFAULT_UBATCH = 512
DEFAULT_CONTEXT = 4096


@dataclass(frozen=True)
class LaunchPlan:
    """What the server will load one model with (tokens, counts; sources in words) and the rules it
    places the layers by."""

    num_ctx: int  # per slot, after the clamp to the training context
    context_source: str
    parallel: int
    num_batch: int
    batch_source: str
    flash_attention: str  # on | off | auto; auto counts as on (the servers turn it on where supported)
    kv_cache_type: str  # the KV-cache type asked for
    rules: LoadRules
    num_ubatch: int | None = None  # None: equal to num_batch
    num_gpu: int | None = None  # layers forced onto the GPU; None: the rules place them
    gpu_overhead_bytes: int = 0  # memory the server is told to leave free per GPU
    launch_lines: tuple[str, ...] = ()  # the exact command the server will run, to show before it loads
    notes: tuple[str, ...] = ()

    @property
    def ctx_total(self) -> int:
        """The context over all slots (tokens)."""
        return self.num_ctx * self.parallel

    def load_settings(self) -> LoadSettings:
        """The estimator's LoadSettings for this launch."""
        return LoadSettings(num_ctx=self.num_ctx, parallel=self.parallel, kv_cache_type=self.kv_cache_type,
                            flash_attention=self.flash_attention != "off", num_batch=self.num_batch,
                            num_ubatch=self.num_ubatch, num_gpu=self.num_gpu,
                            gpu_overhead_bytes=self.gpu_overhead_bytes)


def clamped_context(ctx: int, source: str, training_context: int | None) -> tuple[int, str]:
    """ctx (tokens) clamped to the model's training context, with the words saying so."""
    if training_context and ctx > training_context:
        return training_context, f"{source}, clamped to the model's {training_context}"
    return ctx, source


@dataclass(frozen=True)
class SettingsPlanner:
    """A llama.cpp server started with the settings as given: the context per slot (without one, the
    model's training context shared by the slots), the batches (llama.cpp's 2048/512 when unset), and
    --fit placing the layers."""

    server_name: str = "the server"
    label: str = "fit"
    description: str = "llama.cpp's --fit places the layers"

    def rules(self, server_version: str | None = None) -> LoadRules:
        """llama.cpp's --fit, whatever the build."""
        return LoadRules(label=self.label, description=self.description, server_name=self.server_name)

    def plan(self, settings: ServerSettings, shape: ModelShape, size_bytes: int | None = None,
             gpu: GpuMemory | None = None, *, server_version: str | None = None, model_num_ctx: int | None = None,
             model_num_batch: int | None = None, context_setting: str = "the context setting") -> LaunchPlan:
        """The launch for these settings; the GPU and the file size change nothing here."""
        parallel = max(1, settings.num_parallel)
        if model_num_ctx:
            ctx, source = model_num_ctx, "the model's num_ctx"
        elif settings.context_length:
            ctx, source = settings.context_length, context_setting
        else:
            training = shape.context_length or DEFAULT_CONTEXT
            ctx = max(1, training // parallel)
            source = (f"{self.server_name}'s default, the model's {training}"
                      + (f" shared by {parallel} slots" if parallel > 1 else ""))
        ctx, source = clamped_context(ctx, source, shape.context_length)
        if model_num_batch:
            batch, batch_source = model_num_batch, "the model's num_batch"
        elif settings.batch_size:
            batch, batch_source = settings.batch_size, "the batch setting"
        else:
            batch, batch_source = DEFAULT_BATCH, f"{self.server_name}'s default"
        ubatch = settings.micro_batch_size or min(DEFAULT_UBATCH, batch)
        return LaunchPlan(num_ctx=ctx, context_source=source, parallel=parallel, num_batch=batch,
                          batch_source=batch_source, flash_attention=settings.flash_attention,
                          kv_cache_type=settings.kv_cache_type, rules=self.rules(server_version),
                          num_ubatch=ubatch, gpu_overhead_bytes=settings.gpu_overhead_mib * MIB)


__all__ = ["DEFAULT_BATCH", "DEFAULT_CONTEXT", "DEFAULT_UBATCH", "LaunchPlan", "SettingsPlanner", "clamped_context"]
