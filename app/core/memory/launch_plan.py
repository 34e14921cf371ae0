"""The launch a server will really make for one model, as the memory model prices it.

Each backend plans its own launch (app.core.ports.planner.LoadPlanner): a server that picks knobs by
itself (a default context by GPU memory, an automatic batch, one slot for some architectures) says
so in its plan. SettingsPlanner is a llama.cpp server started with the settings as given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, LoadRules, LoadSettings, VramEstimate, estimate
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


# llama.cpp's --fit (common/fit.cpp, common_params_fit_impl): it never cuts an unset context below this
# many tokens per slot (common_params::fit_params_min_ctx), and rounds a cut context down to 256 per slot.
FIT_MIN_CONTEXT = 4096
FIT_CONTEXT_ALIGN = 256

# Layers a server is told to put on the GPU, from its settings: None lets --fit place them, a negative
# count is every layer (the settings' "all"), else that many.
GpuLayers = Callable[[ServerSettings], int | None]


@dataclass(frozen=True)
class SettingsPlanner:
    """A llama.cpp server started with the settings as given: the context per slot (without one, each slot
    gets the model's training context, cut by --fit where the GPU cannot hold it), the batches (llama.cpp's
    2048/512 when unset), and the layers as the settings force them (`gpu_layers`) or as --fit places them.

    Without -c llama.cpp's --fit (on by default) sizes the KV cache for the training context in every slot
    (common/fit.cpp: n_ctx = n_ctx_train x the slots when the cache is not unified), and where that does
    not fit the free memory less --fit's margin it cuts the context, down to 4096 tokens a slot, before
    anything else."""

    server_name: str = "the server"
    label: str = "fit"
    description: str = "llama.cpp's --fit places the layers"
    gpu_layers: GpuLayers | None = None

    def rules(self, server_version: str | None = None) -> LoadRules:
        """llama.cpp's --fit, whatever the build."""
        return LoadRules(label=self.label, description=self.description, server_name=self.server_name)

    def plan(self, settings: ServerSettings, shape: ModelShape, size_bytes: int | None = None,
             gpu: GpuMemory | None = None, *, server_version: str | None = None, model_num_ctx: int | None = None,
             model_num_batch: int | None = None, model_num_gpu: int | None = None,
             context_setting: str = "the context setting") -> LaunchPlan:
        """The launch for these settings; the file size changes nothing here, the GPU only a default context
        --fit has to cut."""
        parallel = max(1, settings.num_parallel)
        if model_num_batch:
            batch, batch_source = model_num_batch, "the model's num_batch"
        elif settings.batch_size:
            batch, batch_source = settings.batch_size, "the batch setting"
        else:
            batch, batch_source = DEFAULT_BATCH, f"{self.server_name}'s default"
        ubatch = settings.micro_batch_size or min(DEFAULT_UBATCH, batch)
        num_gpu = self._layers(settings, shape, model_num_gpu)
        rules = self.rules(server_version)
        base = LaunchPlan(num_ctx=1, context_source="", parallel=parallel, num_batch=batch,
                          batch_source=batch_source, flash_attention=settings.flash_attention,
                          kv_cache_type=settings.kv_cache_type, rules=rules, num_ubatch=ubatch, num_gpu=num_gpu,
                          gpu_overhead_bytes=settings.gpu_overhead_mib * MIB)
        if model_num_ctx or settings.context_length:
            ctx, source = ((model_num_ctx, "the model's num_ctx") if model_num_ctx
                           else (settings.context_length or 0, context_setting))
            ctx, source = clamped_context(ctx, source, shape.context_length)
            return replace(base, num_ctx=ctx, context_source=source)
        training = shape.context_length or DEFAULT_CONTEXT
        source = (f"{self.server_name}'s default, the model's training context"
                  + (" in each slot" if parallel > 1 else ""))
        full = replace(base, num_ctx=training, context_source=source)
        cut = fitted_context(full, shape, gpu)
        if cut is None or cut >= training:
            return full
        return replace(full, num_ctx=cut, context_source=f"{source}, cut from {training} by --fit to fit the GPU",
                       notes=(f"{training} tokens a slot do not fit the GPU, so --fit cuts the context to {cut} "
                              f"(it cuts the context before it moves layers)",))

    def _layers(self, settings: ServerSettings, shape: ModelShape, model_num_gpu: int | None) -> int | None:
        """Layers forced onto the GPU: the model's (or the request's) num_gpu, else the settings' count."""
        if model_num_gpu is not None:
            return model_num_gpu
        told = self.gpu_layers(settings) if self.gpu_layers is not None else None
        if told is None:
            return None
        return shape.n_layer + 1 if told < 0 else told


def fitted_context(plan: LaunchPlan, shape: ModelShape, gpu: GpuMemory | None) -> int | None:
    """The context per slot --fit leaves a launch whose context was left to the server (tokens; None: no GPU
    or no cut needed). As common/fit.cpp does it: the memory at the full context and at 4096 a slot, the
    context interpolated between them to what the free memory less --fit's margin holds, rounded down to
    256 a slot, never below 4096 a slot."""
    if gpu is None or gpu.total_bytes <= 0:
        return None
    full_ctx = plan.num_ctx
    least = min(FIT_MIN_CONTEXT, full_ctx)
    if full_ctx <= least:
        return None
    try:
        full = estimate(shape, plan.load_settings(), gpu, plan.rules)
        low = estimate(shape, replace(plan, num_ctx=least).load_settings(), gpu, plan.rules)
    except EstimateError:
        return None
    target = gpu.free_bytes - plan.gpu_overhead_bytes - plan.rules.fit_margin_bytes
    used_full, used_low = _projected(full), _projected(low)
    if used_full <= target:
        return None
    if target <= used_low or used_full <= used_low:
        return least
    n = plan.parallel
    total = least * n + (full_ctx - least) * n * (target - used_low) // (used_full - used_low)
    align = FIT_CONTEXT_ALIGN * n
    return max(total - total % align, least * n) // n


def _projected(est: VramEstimate) -> int:
    """What --fit weighs for a launch: its buffers with the layers the launch puts on the GPU, all of them
    unless a count is forced (bytes)."""
    return est.total_gpu_bytes if est.forced_layers else est.full_offload_gpu_bytes


__all__ = ["DEFAULT_BATCH", "DEFAULT_CONTEXT", "DEFAULT_UBATCH", "FIT_CONTEXT_ALIGN", "FIT_MIN_CONTEXT", "GpuLayers", "LaunchPlan",
           "SettingsPlanner", "clamped_context", "fitted_context"]
