"""What Ollama decides by itself before it loads a model: its memory logic by version (the eras),
the default context by version and VRAM, and from 0.30, before it starts llama-server, the per-slot
context, the slots, the prompt batch, flash attention, the KV type and how the weights are loaded.

Pure rules read from Ollama v0.32.15 (commit b7871fc0d1d8), each cited by file and function, so the
estimator prices what Ollama really passes on rather than what the form shows. The command line
itself is written by app/backends/ollama/launch.py from an OllamaLaunch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from app.core.errors import EstimateError
from app.core.memory.launch_plan import clamped_context
from app.core.model_shape import ModelShape
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB


class OllamaEra(str, Enum):
    """Which memory logic an Ollama version uses (see ollama-facts.md)."""

    A = "A"  # ≤ 0.11.10: bundled llama.cpp runner, placement by the legacy formula
    B = "B"  # 0.11.11 – 0.29: Go engine, placement by trial allocations
    C = "C"  # ≥ 0.30: upstream llama-server with --fit


_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")
# llama-server's own builds ("b6123-abc1234", or "local build" when none is stamped in) are upstream
# llama.cpp with --fit: the memory logic of era C.
_LLAMA_CPP_BUILD_RE = re.compile(r"^(b\d+\b|local build$)")


def era_for_version(version: str | None) -> OllamaEra:
    """Era of an Ollama version string such as "0.11.10" or "v0.30.2-rc1" (a llama-server build such as
    "b6123-abc1234" is era C); None means current."""
    if version is None or _LLAMA_CPP_BUILD_RE.match(version.strip()):
        return OllamaEra.C
    m = _VERSION_RE.match(version.strip())
    if not m:
        raise EstimateError(f"cannot read Ollama version {version!r}", "Use the form 0.12.3, as the server reports its version.")
    v = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    if v <= (0, 11, 10):
        return OllamaEra.A
    if v < (0, 30, 0):
        return OllamaEra.B
    return OllamaEra.C


def _version_tuple(version: str | None) -> tuple[int, int, int] | None:
    m = _VERSION_RE.match((version or "").strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def ollama_default_context_length(version: str | None, gpu_total_bytes: int | None,
                                  gpu_overhead_bytes: int = 0) -> int:
    """num_ctx (tokens) Ollama uses when nothing sets it, for its version and the GPU's bytes less
    the GPU-overhead setting's bytes: 2048 up to 0.6.6, 4096 until 0.15.5, then 4096 below 23 GiB, 32768
    from 23 GiB, 262144 from 47 GiB (4096 when the GPU is unknown)."""
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
    return clamped_context(ctx, source, training_context)


# server/sched.go, the llamaServerGenerationBatch* constants: the automatic prompt batches.
BATCH_CONSTRAINED = 256
BATCH_DEFAULT = 512
BATCH_MEDIUM = 1024
BATCH_LARGE = 2048
# server/sched.go, generationBatchForContext: the batch grows with the context over all slots.
BATCH_MEDIUM_ABOVE_CTX = 4096
BATCH_LARGE_ABOVE_CTX = 32768
# server/sched.go, generationBatchFits / generationBatchHasHeadroom: the prediction must stay under
# 80 % of the free GPU memory, under 75 % for 1024 and 60 % for 2048, with room for a surcharge.
BATCH_FIT_PERCENT = 80
BATCH_MEDIUM_HEADROOM_PERCENT = 75
BATCH_LARGE_HEADROOM_PERCENT = 60
BATCH_MEDIUM_SURCHARGE_BYTES = 768 * MIB  # server/sched.go, generationBatchSurcharge
BATCH_LARGE_SURCHARGE_BYTES = 2 * GIB
# server/sched.go, constrainedCUDAWithoutFlashAttention: small CUDA cards without flash attention.
CONSTRAINED_CUDA_BYTES = 8 * GIB
# api/types.go, DefaultOptions: NumKeep, passed as --keep with --context-shift.
DEFAULT_NUM_KEEP = 4
# server/sched.go, Scheduler.load: architectures Ollama runs with one slot whatever
# OLLAMA_NUM_PARALLEL says.
SINGLE_SLOT_ARCHITECTURES = frozenset({
    "mllama", "qwen3vl", "qwen3vlmoe", "qwen35", "qwen35moe", "qwen3next", "lfm2", "lfm2moe",
    "nemotron_h", "nemotron_h_moe", "nemotron_h_omni",
})


@dataclass(frozen=True)
class OllamaGpus:
    """The GPUs Ollama sees at load (bytes over all of them); no GPU at all is OllamaGpus.none()."""

    total_bytes: int
    free_bytes: int
    cuda: bool = True

    @classmethod
    def none(cls) -> OllamaGpus:
        """A machine without a GPU: Ollama runs llama-server on the CPU."""
        return cls(0, 0, cuda=False)

    @property
    def present(self) -> bool:
        """True when there is a GPU to offload to."""
        return self.total_bytes > 0


@dataclass(frozen=True)
class OllamaLaunch:
    """What Ollama will pass to llama-server for one model (tokens, counts; sources in words)."""

    num_ctx: int  # per slot, after the clamp to the training context
    context_source: str
    parallel: int
    num_batch: int  # -b and -ub (Ollama passes the same value for both)
    batch_source: str
    flash_attention: str  # on | off | auto, as passed to --flash-attn
    kv_cache_type: str  # "" when Ollama passes no --cache-type-k/v (llama.cpp's f16)
    num_gpu: int | None  # -ngl; None lets llama.cpp's --fit place the layers
    load_mode_none: bool  # --load-mode none: weights read into memory instead of mapped
    context_shift: bool
    num_keep: int = DEFAULT_NUM_KEEP
    notes: tuple[str, ...] = ()

    @property
    def ctx_total(self) -> int:
        """-c: the context over all slots (tokens)."""
        return self.num_ctx * self.parallel


def predicted_vram_bytes(file_bytes: int, shape: ModelShape, ctx_total: int) -> int:
    """Ollama's own rough prediction (bytes): the file plus an f16 KV cache of ctx_total tokens with
    head_dim = embedding / heads and the fewest KV heads (llm/llama_server.go, PredictServerVRAM)."""
    head_dim = shape.n_embd // shape.n_head if shape.n_head else 0
    kv_heads = max(1, min(shape.n_head_kv)) if shape.n_head_kv else 1
    return file_bytes + 2 * shape.n_layer * kv_heads * head_dim * ctx_total * 2


def _batch_surcharge(batch: int) -> int:
    if batch >= BATCH_LARGE:
        return BATCH_LARGE_SURCHARGE_BYTES
    return BATCH_MEDIUM_SURCHARGE_BYTES if batch >= BATCH_MEDIUM else 0


def _batch_fits(batch: int, predicted: int, available: int) -> bool:
    """server/sched.go, generationBatchFits (no prediction or no GPU: it fits)."""
    if predicted == 0 or available == 0:
        return True
    threshold = available * BATCH_FIT_PERCENT // 100
    if predicted > threshold:
        return False
    if batch >= BATCH_LARGE and predicted > available * BATCH_LARGE_HEADROOM_PERCENT // 100:
        return False
    if BATCH_MEDIUM <= batch < BATCH_LARGE and predicted > available * BATCH_MEDIUM_HEADROOM_PERCENT // 100:
        return False
    return _batch_surcharge(batch) <= threshold - predicted


def batch_for_context(ctx_total: int) -> int:
    """The batch Ollama starts from for a context over all slots (server/sched.go,
    generationBatchForContext): 2048 above 32768 tokens, 1024 above 4096, else 512."""
    if ctx_total > BATCH_LARGE_ABOVE_CTX:
        return BATCH_LARGE
    return BATCH_MEDIUM if ctx_total > BATCH_MEDIUM_ABOVE_CTX else BATCH_DEFAULT


def automatic_batch(ctx_total: int, predicted_bytes: int, gpus: OllamaGpus, flash_attention: str) -> int:
    """-b/-ub Ollama picks when num_batch is not set (server/sched.go, automaticGenerationBatch):
    by the context, stepped down while its prediction leaves too little of the free GPU memory;
    256/512 on CUDA with flash attention off."""
    if flash_attention == "off" and gpus.present and gpus.cuda:
        if ctx_total > BATCH_MEDIUM_ABOVE_CTX and 0 < gpus.total_bytes <= CONSTRAINED_CUDA_BYTES:
            return BATCH_CONSTRAINED
        return BATCH_DEFAULT
    batch = batch_for_context(ctx_total)
    while batch > BATCH_DEFAULT and not _batch_fits(batch, predicted_bytes, gpus.free_bytes):
        batch = BATCH_MEDIUM if batch > BATCH_MEDIUM else BATCH_DEFAULT
    return batch


def flash_attention_flag(setting: str) -> str:
    """--flash-attn from OLLAMA_FLASH_ATTENTION: on / off when set, else auto
    (llm/llama_server.go, LlamaServerFlashAttention)."""
    return setting if setting in ("on", "off") else "auto"


def plan_launch(settings: ServerSettings, shape: ModelShape, gpus: OllamaGpus, version: str | None = None, *,
                file_bytes: int | None = None, model_num_ctx: int | None = None,
                model_num_batch: int | None = None, model_num_gpu: int | None = None,
                embedding: bool = False, context_shift: bool = True,
                context_setting: str = "the context setting") -> OllamaLaunch:
    """The launch Ollama makes for this model with these server settings on these GPUs.

    The default context is by VRAM (server/routes.go, Server.Serve: "vram-based default context"),
    clamped to the training context (llm/server.go, NewLlamaServer: "requested context size too
    large for model"); embedding models and SINGLE_SLOT_ARCHITECTURES get one slot
    (server/sched.go, Scheduler.load)."""
    notes: list[str] = []
    ctx, source = context_for(settings, model_num_ctx, version, gpus.total_bytes if gpus.present else 0,
                              shape.context_length, context_setting=context_setting)
    parallel = max(1, settings.num_parallel)
    if embedding and parallel > 1:
        parallel = 1
        notes.append("Ollama loads embedding models with one slot")
    elif shape.architecture in SINGLE_SLOT_ARCHITECTURES and parallel > 1:
        parallel = 1
        notes.append(f"Ollama runs {shape.architecture} with one slot whatever the parallel setting")
    flash = flash_attention_flag(settings.flash_attention)
    if model_num_batch:
        batch, batch_source = model_num_batch, "the model's num_batch"
    else:
        size = file_bytes if file_bytes is not None else shape.file_bytes or shape.weights.total_file_weights
        predicted = predicted_vram_bytes(size, shape, ctx * parallel)
        batch = automatic_batch(ctx * parallel, predicted, gpus, flash)
        batch_source = "Ollama's automatic batch" + (" (by context and free VRAM)" if gpus.present else " (by context)")
    return OllamaLaunch(
        num_ctx=ctx, context_source=source, parallel=parallel, num_batch=batch, batch_source=batch_source,
        flash_attention=flash, kv_cache_type="" if settings.kv_cache_type == "f16" else settings.kv_cache_type,
        num_gpu=model_num_gpu, load_mode_none=not gpus.present or model_num_gpu == 0,
        context_shift=context_shift, notes=tuple(notes))


__all__ = ["BATCH_DEFAULT", "BATCH_LARGE", "BATCH_MEDIUM", "OllamaEra", "OllamaGpus", "OllamaLaunch",
           "SINGLE_SLOT_ARCHITECTURES", "automatic_batch", "batch_for_context", "context_for", "era_for_version",
           "flash_attention_flag", "ollama_default_context_length", "plan_launch", "predicted_vram_bytes"]
