"""llama-server's load planner: it launches with the settings as given (see tuning.arguments: -c is the
context per slot × -np, the batches only when set, -ngl from the GPU-layers option). Without -c each slot
gets the model's training context — llama.cpp's --fit (on by default) sizes the cache for the training
context in every slot when the cache is not unified, as an explicit -np makes it — and --fit cuts that
context where the GPU cannot hold it. `-ngl all` (the option's -1) keeps every layer on the GPU: --fit then
cuts an unset context but moves no layers.

Two extra flags change the unset context (common/fit.cpp and llama-context.cpp): with --kv-unified the
slots share one cache of the training context, and with --fit off the training context is split between
the slots (each rounded up to 256 tokens)."""

from __future__ import annotations

from dataclasses import replace

from app.backends.llama_server.tuning import extra_flags, n_gpu_layers
from app.core.memory.estimator import GpuMemory, LoadRules
from app.core.memory.launch_plan import DEFAULT_CONTEXT, LaunchPlan, SettingsPlanner
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings

UNIFIED_FLAGS = frozenset({"--kv-unified", "-kvu"})
FIT_FLAGS = frozenset({"--fit", "-fit"})
NOT_UNIFIED_FLAGS = frozenset({"--no-kv-unified", "-no-kvu"})
PAD = 256  # llama.cpp pads a slot's context to this (GGML_PAD in llama_context)


def _unset_context_rule(settings: ServerSettings) -> str:
    """"unified", "fit_off" or "" (each slot the training context), from the extra flags (the last wins)."""
    unified = fit_off = False
    for use in extra_flags(settings.extra_settings).uses:
        if use.flag in UNIFIED_FLAGS:
            unified = True
        elif use.flag in NOT_UNIFIED_FLAGS:
            unified = False
        elif use.flag in FIT_FLAGS and use.values:
            fit_off = use.values[0].lower() in ("off", "false", "0")
    return "unified" if unified else "fit_off" if fit_off else ""


class LlamaServerPlanner:
    """The LoadPlanner of llama-server (app.core.ports.planner): SettingsPlanner's rules, with the extra flags
    that change an unset context."""

    def __init__(self) -> None:
        # "C": the label the estimate command's JSON ("era") has always given a llama-server build.
        self._settings_planner = SettingsPlanner(
            server_name="llama-server", label="C",
            description="llama-server: the layers -ngl gives, the context --fit leaves",
            gpu_layers=n_gpu_layers)  # -ngl: a negative count is `all`

    def rules(self, server_version: str | None = None) -> LoadRules:
        """llama.cpp's --fit, whatever the build."""
        return self._settings_planner.rules(server_version)

    def plan(self, settings: ServerSettings, shape: ModelShape, size_bytes: int | None = None,
             gpu: GpuMemory | None = None, *, server_version: str | None = None, model_num_ctx: int | None = None,
             model_num_batch: int | None = None, model_num_gpu: int | None = None,
             context_setting: str = "the context setting") -> LaunchPlan:
        """The launch for these settings (see the module's words)."""
        rule = "" if model_num_ctx or settings.context_length else _unset_context_rule(settings)
        if not rule:
            return self._settings_planner.plan(settings, shape, size_bytes, gpu, server_version=server_version,
                                               model_num_ctx=model_num_ctx, model_num_batch=model_num_batch,
                                               model_num_gpu=model_num_gpu, context_setting=context_setting)
        # price the launch without the GPU (no --fit cut of a per-slot context), then share the training context
        plan = self._settings_planner.plan(settings, shape, size_bytes, None, server_version=server_version,
                                           model_num_batch=model_num_batch, model_num_gpu=model_num_gpu)
        training = shape.context_length or DEFAULT_CONTEXT
        per_slot = max(1, training // plan.parallel)
        if rule == "unified":
            source = (f"llama-server's default, the model's {training} in one cache the slots share (--kv-unified)"
                      if plan.parallel > 1 else "llama-server's default, the model's training context")
            return replace(plan, num_ctx=per_slot, context_source=source)
        per_slot = min(training, -(-per_slot // PAD) * PAD)
        return replace(plan, num_ctx=per_slot,
                       context_source=f"llama-server's default with --fit off, the model's {training} split between "
                                      f"{plan.parallel} slots")


LLAMA_SERVER_PLANNER = LlamaServerPlanner()

__all__ = ["LLAMA_SERVER_PLANNER", "LlamaServerPlanner"]
