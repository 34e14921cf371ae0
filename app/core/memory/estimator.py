"""Price a load setting in GPU memory before it is applied: fits, tight, spills or won't load.

`estimate(shape, settings, gpu, rules, host)` models what llama.cpp really allocates — weights
per layer, KV cache, compute buffers, the CUDA runtime — places layers the way the server's
LoadRules say, prices the CPU side against the host's RAM, and explains the verdict in one
sentence. `gpu=None` is a machine without a GPU: everything runs on the CPU. All
sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from app.core.errors import EstimateError
from app.core.memory.allowance import DEFAULT_ALLOWANCE, DEFAULT_RUNTIME_OVERHEAD_BYTES, RuntimeAllowance
from app.core.memory.host import (CPU_RUNTIME_OVERHEAD_BYTES, HostMemory, cpu_only_text, cpu_weights_bytes,
                                  host_verdict, out_of_memory_text, output_buffer_bytes)
from app.core.memory.llama_cpp import (
    KV_TYPES,
    compute_bytes,
    effective_kv_type,
    host_compute_bytes,
    kv_layer_bytes,
    peak_extra_bytes,
    plan_context,
    spill_compute_table,
)
from app.core.memory.verdict import Verdict, explain, processor_string, verdict_for
from app.core.model_shape import ModelShape
from app.core.units import GIB

# Memory llama.cpp's --fit keeps free on each GPU (its default LLAMA_ARG_FIT_TARGET).
FIT_TARGET_MARGIN_BYTES = GIB


@dataclass(frozen=True)
class LoadSettings:
    """The knobs that change memory: per-request context, slots, KV type, attention, batches."""

    num_ctx: int  # tokens per request slot
    parallel: int = 1  # parallel slots
    kv_cache_type: str = "f16"  # KV-cache element type
    flash_attention: bool = True
    num_batch: int = 512
    num_ubatch: int | None = None  # None: equal to num_batch
    num_gpu: int | None = None  # forced layers on the GPU; None lets the server decide
    gpu_overhead_bytes: int = 0  # memory the server is told to leave free per GPU

    @property
    def ubatch(self) -> int:
        """Tokens per compute batch (micro-batch)."""
        return self.num_ubatch if self.num_ubatch is not None else self.num_batch


class OwnEstimate(Protocol):
    """A server's own memory prediction, where that (not the real sizes) decides the layers on the GPU."""

    @property
    def layers(self) -> int:
        """Layers it puts on the GPU (the output layer counted)."""
        ...

    @property
    def layers_model(self) -> int:
        """The model's layers as it counts them (the output layer counted)."""
        ...

    @property
    def total_bytes(self) -> int:
        """Its size of the loaded model."""
        ...

    @property
    def vram_bytes(self) -> int:
        """Its size of the model's part on the GPU."""
        ...

    @property
    def estimate_name(self) -> str:
        """What the explanation calls this prediction, e.g. "the server's own estimate"."""
        ...

    @property
    def advice(self) -> str:
        """A sentence on how to get layers placed by real sizes instead ("" when none)."""
        ...


# (shape, load, GPU bytes free) -> the server's own prediction
OwnEstimator = Callable[[ModelShape, LoadSettings, int], OwnEstimate]


@dataclass(frozen=True)
class LoadRules:
    """What the server does with a load that the memory model must know: how it places layers when no
    count is forced, and what it is called in the notes. The default is llama.cpp's --fit."""

    label: str = "fit"  # a short name for the rules (the estimate command's JSON "era")
    description: str = "llama.cpp's --fit places the layers"
    server_name: str = "the server"  # as in "... the server uses f16 instead"
    fit_margin_bytes: int = FIT_TARGET_MARGIN_BYTES  # memory the placement keeps free on the GPU
    own_estimate: OwnEstimator | None = None  # the server's own prediction places the layers


@dataclass(frozen=True)
class GpuMemory:
    """One GPU as the estimate sees it (bytes)."""

    total_bytes: int
    used_by_others_bytes: int = 0  # desktop, browser, other models
    runtime_overhead_bytes: int = DEFAULT_RUNTIME_OVERHEAD_BYTES
    reserved_bytes: int = 0  # what the driver reserves and no process can have (NVML's "reserved")
    allowance: RuntimeAllowance = DEFAULT_ALLOWANCE  # where runtime_overhead_bytes comes from

    @classmethod
    def with_allowance(cls, total_bytes: int, used_by_others_bytes: int = 0, reserved_bytes: int = 0,
                       allowance: RuntimeAllowance = DEFAULT_ALLOWANCE) -> GpuMemory:
        """A GPU priced with `allowance` as its runtime figure."""
        return cls(total_bytes, used_by_others_bytes, allowance.size_bytes, reserved_bytes, allowance)

    @property
    def free_bytes(self) -> int:
        """Memory free for the server before it starts: total less other processes and the driver's reserve."""
        return self.total_bytes - self.used_by_others_bytes - self.reserved_bytes


@dataclass(frozen=True)
class VramEstimate:
    """Predicted memory use of one loaded model and the verdict for this GPU (bytes)."""

    kv_cache_type: str  # the type really used (f16 when flash attention is off)
    n_ctx_total: int  # KV cells over all slots
    weights_gpu_bytes: int
    weights_cpu_bytes: int  # includes the token-embedding table llama.cpp keeps in host memory
    kv_bytes: int  # whole KV cache
    kv_gpu_bytes: int
    compute_bytes: int  # GPU compute buffer reserved at load
    compute_flash_on_bytes: int
    compute_flash_off_bytes: int
    host_compute_bytes: int
    peak_extra_bytes: int  # runtime pool growth on a prompt that fills a slot
    overhead_bytes: int  # CUDA context / runtime
    total_gpu_bytes: int  # at load: weights + KV + compute + runtime
    peak_gpu_bytes: int  # during a slot-filling prompt
    free_bytes: int
    available_bytes: int  # free minus the GPU overhead setting
    headroom_bytes: int  # available minus peak
    layers_on_gpu: int
    layers_total: int
    processor: str  # the PROCESSOR column a server's process list would print
    verdict: Verdict  # fits | tight | spills | wont_load
    explanation: str
    legacy: OwnEstimate | None = None  # the server's own prediction, where it placed the layers
    notes: tuple[str, ...] = field(default_factory=tuple)
    full_offload_gpu_bytes: int = 0  # total at load if every layer were on the GPU
    forced_layers: bool = False  # True when num_gpu fixed the placement
    cpu_only: bool = False  # no GPU: every buffer is in host memory
    host_bytes: int = 0  # host RAM the load needs: CPU-side weights, KV, compute and output buffers, runtime
    host_available_bytes: int | None = None  # the host's available RAM (None: not known)
    host_verdict: Verdict | None = None  # fits | tight | wont_load for host memory alone (None when not known)
    allowance: RuntimeAllowance = DEFAULT_ALLOWANCE  # the runtime figure priced and where it came from
    reserved_bytes: int = 0  # the driver's reserve, left out of free_bytes

    @property
    def host_headroom_bytes(self) -> int | None:
        """Host RAM left after the load (None when the host's memory is not known)."""
        return None if self.host_available_bytes is None else self.host_available_bytes - self.host_bytes


def validate(shape: ModelShape, settings: LoadSettings, gpu: GpuMemory | None) -> None:
    """Raise EstimateError naming the first setting that makes no sense for this model or GPU."""
    checks = [
        (settings.num_ctx >= 1, f"context length must be at least 1 token, got {settings.num_ctx}"),
        (settings.num_ctx <= shape.context_length,
         f"context {settings.num_ctx} is above the model's training context {shape.context_length}"),
        (settings.parallel >= 1, f"parallel must be at least 1, got {settings.parallel}"),
        (settings.kv_cache_type in KV_TYPES,
         f"KV cache type {settings.kv_cache_type!r} is not one of {', '.join(KV_TYPES)}"),
        (settings.num_batch >= 1, f"batch must be at least 1, got {settings.num_batch}"),
        (settings.ubatch >= 1, f"micro-batch must be at least 1, got {settings.ubatch}"),
        (settings.ubatch <= settings.num_batch,
         f"micro-batch {settings.ubatch} is larger than batch {settings.num_batch}"),
        (settings.num_gpu is None or settings.num_gpu >= 0, f"num_gpu must not be negative, got {settings.num_gpu}"),
        (settings.gpu_overhead_bytes >= 0, f"GPU overhead must not be negative, got {settings.gpu_overhead_bytes}"),
    ]
    if gpu is not None:
        checks += _gpu_checks(gpu)
    for ok, message in checks:
        if not ok:
            raise EstimateError(message)


def _gpu_checks(gpu: GpuMemory) -> list[tuple[bool, str]]:
    return [
        (gpu.total_bytes > 0, f"GPU memory must be positive, got {gpu.total_bytes}"),
        (gpu.used_by_others_bytes >= 0, f"memory used by others must not be negative, got {gpu.used_by_others_bytes}"),
        (gpu.used_by_others_bytes <= gpu.total_bytes,
         f"memory used by others ({gpu.used_by_others_bytes}) exceeds the GPU's {gpu.total_bytes}"),
        (gpu.runtime_overhead_bytes >= 0, f"runtime overhead must not be negative, got {gpu.runtime_overhead_bytes}"),
        (gpu.reserved_bytes >= 0, f"the driver's reserve must not be negative, got {gpu.reserved_bytes}"),
        (gpu.used_by_others_bytes + gpu.reserved_bytes <= gpu.total_bytes,
         f"memory used by others ({gpu.used_by_others_bytes}) and the driver's reserve ({gpu.reserved_bytes}) "
         f"exceed the GPU's {gpu.total_bytes}"),
    ]


@dataclass(frozen=True)
class _Placement:
    weights_gpu: int
    weights_cpu: int
    kv_gpu: int
    compute_gpu: int
    overhead: int

    @property
    def total_gpu(self) -> int:
        return self.weights_gpu + self.kv_gpu + self.compute_gpu + self.overhead


def _place(shape: ModelShape, n_gpu: int, kv: list[int], compute: Callable[[int], int], overhead: int) -> _Placement:
    """Memory split when llama.cpp offloads n_gpu layers (output head first, then the last blocks);
    `compute(k)` is the GPU compute buffer with the first k blocks left in host memory."""
    w = shape.weights
    if n_gpu <= 0:
        return _Placement(0, w.token_embd_bytes + sum(w.layer_bytes) + w.output_bytes + w.projector_bytes, 0, 0, 0)
    blocks_on_gpu = min(n_gpu - 1, shape.n_layer)
    first = shape.n_layer - blocks_on_gpu
    weights_gpu = w.output_bytes + w.projector_bytes + sum(w.layer_bytes[first:])
    weights_cpu = w.token_embd_bytes + sum(w.layer_bytes[:first])
    kv_gpu = sum(kv[first:])
    # with blocks left on the CPU, big prompt batches still run them on the GPU: their weights and KV cache
    # are copied into the compute buffer (spill_compute_bytes)
    return _Placement(weights_gpu, weights_cpu, kv_gpu, compute(first), overhead)


def estimate(shape: ModelShape, settings: LoadSettings, gpu: GpuMemory | None,
             rules: LoadRules = LoadRules(), host: HostMemory | None = None) -> VramEstimate:
    """Predict GPU and host memory and placement for `settings` on `gpu` (None: no GPU) under the server's `rules`."""
    validate(shape, settings, gpu)
    if gpu is None:
        return _estimate_cpu_only(shape, settings, host)
    notes: list[str] = []
    kv_type = effective_kv_type(settings.kv_cache_type, settings.flash_attention)
    if kv_type != settings.kv_cache_type:
        notes.append(f"{settings.kv_cache_type} KV cache needs flash attention; {rules.server_name} uses f16 instead")
    plan = plan_context(shape, settings.num_ctx, settings.parallel, settings.ubatch)
    kv = kv_layer_bytes(shape, plan, kv_type)
    # the GPU compute buffer by the number of blocks left in host memory (0: the full-offload graph); the table
    # for spilled placements is worked out only when a placement leaves blocks in host memory
    full_compute = compute_bytes(shape, plan, kv_type, settings.flash_attention)
    spilled: list[int] = []

    def compute_with(cpu_blocks: int) -> int:
        blocks = max(0, min(cpu_blocks, shape.n_layer))
        if blocks == 0:
            return full_compute
        if not spilled:
            spilled.extend(spill_compute_table(shape, plan, kv_type, settings.flash_attention, kv))
        return spilled[blocks]

    compute_on = compute_bytes(shape, plan, settings.kv_cache_type, True)
    compute_off = compute_bytes(shape, plan, "f16", False)
    extra = peak_extra_bytes(shape, plan, kv_type, settings.flash_attention)
    layers_total = shape.n_layer + 1
    available = gpu.free_bytes - settings.gpu_overhead_bytes

    legacy = None if rules.own_estimate is None else rules.own_estimate(shape, settings, gpu.free_bytes)
    if settings.num_gpu is not None:
        n_gpu = min(settings.num_gpu, layers_total)
    elif legacy is not None:
        n_gpu = legacy.layers
    else:
        margin = rules.fit_margin_bytes
        n_gpu = 0
        for n in range(layers_total, 0, -1):
            if _place(shape, n, kv, compute_with, gpu.runtime_overhead_bytes).total_gpu + margin <= available:
                n_gpu = n
                break
    placed = _place(shape, n_gpu, kv, compute_with, gpu.runtime_overhead_bytes)
    full = _place(shape, layers_total, kv, compute_with, gpu.runtime_overhead_bytes).total_gpu
    peak = placed.total_gpu + (extra if n_gpu > 0 else 0)
    kv_cpu = sum(kv) - placed.kv_gpu
    host_compute = host_compute_bytes(shape, plan, settings.flash_attention)
    processor = processor_string(legacy, n_gpu, layers_total,
                                 gpu_buffers=placed.total_gpu - placed.overhead,
                                 cpu_buffers=placed.weights_cpu + kv_cpu + host_compute)
    verdict = verdict_for(n_gpu, layers_total, placed.total_gpu, peak, available, gpu.total_bytes)
    host_need = (placed.weights_cpu + kv_cpu + host_compute + output_buffer_bytes(shape, settings.parallel)
                 + CPU_RUNTIME_OVERHEAD_BYTES)
    on_host = host_verdict(host_need, host)
    est = VramEstimate(
        kv_cache_type=kv_type, n_ctx_total=plan.n_ctx_total,
        weights_gpu_bytes=placed.weights_gpu, weights_cpu_bytes=placed.weights_cpu,
        kv_bytes=sum(kv), kv_gpu_bytes=placed.kv_gpu, compute_bytes=placed.compute_gpu,
        compute_flash_on_bytes=compute_on, compute_flash_off_bytes=compute_off, host_compute_bytes=host_compute,
        peak_extra_bytes=peak - placed.total_gpu, overhead_bytes=placed.overhead,
        total_gpu_bytes=placed.total_gpu, peak_gpu_bytes=peak, free_bytes=gpu.free_bytes,
        available_bytes=available, headroom_bytes=available - peak, layers_on_gpu=n_gpu,
        layers_total=layers_total, processor=processor, verdict=verdict, explanation="",
        legacy=legacy, notes=tuple(notes), full_offload_gpu_bytes=full,
        forced_layers=settings.num_gpu is not None, host_bytes=host_need,
        host_available_bytes=host.available_bytes if host else None, host_verdict=on_host,
        allowance=gpu.allowance, reserved_bytes=gpu.reserved_bytes,
    )
    if host is not None and on_host is Verdict.WONT_LOAD and verdict is not Verdict.WONT_LOAD:
        on_gpu = f"{n_gpu} of {layers_total} layers go on the GPU and "
        return replace(est, verdict=Verdict.WONT_LOAD,
                       explanation=out_of_memory_text(host_need, host, placed.weights_cpu, kv_cpu, on_gpu))
    return replace(est, explanation=explain(est, settings.num_ctx, settings.flash_attention))


def _estimate_cpu_only(shape: ModelShape, settings: LoadSettings, host: HostMemory | None) -> VramEstimate:
    """No GPU: llama.cpp keeps every buffer in host memory, so only the host's RAM decides."""
    kv_type = settings.kv_cache_type if settings.flash_attention else "f16"
    plan = plan_context(shape, settings.num_ctx, settings.parallel, settings.ubatch)
    kv = sum(kv_layer_bytes(shape, plan, kv_type))
    compute = compute_bytes(shape, plan, kv_type, settings.flash_attention)
    weights = cpu_weights_bytes(shape)
    need = weights + kv + compute + output_buffer_bytes(shape, settings.parallel) + CPU_RUNTIME_OVERHEAD_BYTES
    on_host = host_verdict(need, host)
    verdict = on_host or Verdict.FITS
    headroom = host.available_bytes - need if host else 0
    return VramEstimate(
        kv_cache_type=kv_type, n_ctx_total=plan.n_ctx_total, weights_gpu_bytes=0,
        weights_cpu_bytes=weights, kv_bytes=kv, kv_gpu_bytes=0, compute_bytes=0,
        compute_flash_on_bytes=compute_bytes(shape, plan, settings.kv_cache_type, True),
        compute_flash_off_bytes=compute_bytes(shape, plan, "f16", False), host_compute_bytes=compute,
        peak_extra_bytes=0, overhead_bytes=0, total_gpu_bytes=0, peak_gpu_bytes=0, free_bytes=0,
        available_bytes=0, headroom_bytes=headroom, layers_on_gpu=0, layers_total=shape.n_layer + 1,
        processor="100% CPU", verdict=verdict,
        explanation=cpu_only_text(verdict, need, host, weights, kv, compute),
        cpu_only=True, host_bytes=need, host_available_bytes=host.available_bytes if host else None,
        host_verdict=on_host)


__all__ = [
    "DEFAULT_RUNTIME_OVERHEAD_BYTES", "FIT_TARGET_MARGIN_BYTES", "GpuMemory", "HostMemory", "LoadRules", "LoadSettings",
    "OwnEstimate", "OwnEstimator", "VramEstimate", "estimate", "validate",
]
