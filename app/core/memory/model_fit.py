"""Will a local model fit the GPU under the server's settings? The estimator, fed the way Ollama
picks each knob (request > model's Modelfile > server environment > version default)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from app.core.errors import EstimateError
from app.core.memory.estimator import GpuMemory, LoadSettings, VramEstimate, era_for_version, estimate
from app.core.memory.verdict import Verdict, verdict_label
from app.core.model_shape import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")



def _version_tuple(version: str | None) -> tuple[int, int, int] | None:
    m = _VERSION_RE.match((version or "").strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def ollama_default_context_length(version: str | None, gpu_total_bytes: int | None,
                                  gpu_overhead_bytes: int = 0) -> int:
    """num_ctx (tokens) Ollama uses when nothing sets it, for its version and the GPU's bytes less
    the GPU-overhead setting's bytes: 2048 up to 0.6.6, 4096 until 0.15.5, then 4096 below 23 GiB, 32768
    from 23 GiB, 262144 from 47 GiB (4096 when the GPU is unknown).

    Ollama's own rule, kept in core beside the other version rules the pricing needs (core cannot
    import the Ollama backend); the pricing and the pages call this one."""
    v = _version_tuple(version)
    if v is not None and v <= (0, 6, 6):
        return 2048
    if v is not None and v < (0, 15, 5):
        return 4096
    if gpu_total_bytes is None:
        return 4096
    vram = gpu_total_bytes - gpu_overhead_bytes
    if vram >= 47 * GIB:
        return 262144
    return 32768 if vram >= 23 * GIB else 4096


def context_for(settings: ServerSettings, model_num_ctx: int | None, version: str | None,
                gpu_total_bytes: int | None, training_context: int | None = None, *,
                context_setting: str = "the context setting") -> tuple[int, str]:
    """The num_ctx a plain request gets and where it comes from (tokens, words); Ollama clamps it
    to the model's training context. `context_setting` is what the server calls the setting."""
    if model_num_ctx:
        ctx, source = model_num_ctx, "the model's num_ctx"
    elif settings.context_length:
        ctx, source = settings.context_length, context_setting
    else:
        ctx = ollama_default_context_length(version, gpu_total_bytes, settings.gpu_overhead_mib * MIB)
        source = "Ollama's default"
    if training_context and ctx > training_context:
        return training_context, f"{source}, clamped to the model's {training_context}"
    return ctx, source


def load_settings(settings: ServerSettings, num_ctx: int, num_batch: int | None = None) -> LoadSettings:
    """The estimator's LoadSettings for the server settings (flash attention "auto" counts as on,
    as Ollama turns it on for the models that support it)."""
    return LoadSettings(num_ctx=num_ctx, parallel=max(1, settings.num_parallel),
                        kv_cache_type=settings.kv_cache_type,
                        flash_attention=settings.flash_attention != "off",
                        num_batch=num_batch or 512, gpu_overhead_bytes=settings.gpu_overhead_mib * MIB)


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


def _int_param(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def fit_verdict(show: dict[str, Any], size_bytes: int, settings: ServerSettings, version: str | None,
                gpu_total_bytes: int | None, gpu_unknown_reason: str = "", *,
                context_setting: str = "the context setting") -> FitVerdict:
    """Price a model (its metadata dict as the server shows it, and size on disk) on this GPU under these settings.

    `show` may carry "parameters" (Modelfile text) for the model's own num_ctx/num_batch.
    Without a known GPU the verdict is "unknown" and says why.
    """
    params = _modelfile_parameters(str(show.get("parameters") or ""))
    try:
        shape = shape_from_show(show, size_bytes)
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, None, "", f"Cannot estimate this model: {exc.user_text()}")
    num_ctx, source = context_for(settings, _int_param(params.get("num_ctx")), version, gpu_total_bytes,
                                  shape.context_length, context_setting=context_setting)
    if gpu_total_bytes is None:
        why = gpu_unknown_reason or "no GPU was detected"
        return FitVerdict(Verdict.UNKNOWN, num_ctx, source,
                          f"GPU unknown ({why}), so there is no verdict; it would load with num_ctx "
                          f"{num_ctx} × {settings.num_parallel} parallel ({source}).")
    num_batch = _int_param(params.get("num_batch"))
    parallel_settings = settings
    # Ollama ≥ 0.30 picks the batch (and, for some architectures, one slot) itself. ollama_launch
    # builds on this module's context rule, so it is imported here, not at the top.
    from app.core.memory.ollama_launch import OllamaGpus, ollama_plans_launch, plan_launch  # noqa: PLC0415

    if ollama_plans_launch(settings, version):
        plan = plan_launch(settings, shape, OllamaGpus(gpu_total_bytes, gpu_total_bytes), version,
                           file_bytes=size_bytes, model_num_ctx=num_ctx, model_num_batch=num_batch)
        num_batch, parallel_settings = plan.num_batch, settings.replace(num_parallel=plan.parallel)
    try:
        est = estimate(shape, load_settings(parallel_settings, num_ctx, num_batch),
                       GpuMemory(total_bytes=gpu_total_bytes), era_for_version(version))
    except EstimateError as exc:
        return FitVerdict(Verdict.UNKNOWN, num_ctx, source, f"Cannot estimate this model: {exc.user_text()}")
    return FitVerdict(est.verdict, num_ctx, source, est.explanation, est)


def _modelfile_parameters(text: str) -> dict[str, str]:
    """First value of each PARAMETER line of the model's parameters text (Modelfile syntax)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and key not in out:
            out[key] = value.strip().strip('"')
    return out


__all__ = ["FitVerdict", "ollama_default_context_length", "context_for", "fit_verdict", "load_settings"]
