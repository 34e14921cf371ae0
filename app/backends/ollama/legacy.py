"""Ollama's own memory estimate before 0.11.11 (era A), which decided layer placement there.

It reproduces the published formula: a fixed 457 MiB CUDA reserve plus the GPU-overhead setting,
KV at 2 / 1 / 0.5 bytes per element for f16 / q8_0 / q4_0, a compute-graph guess per
architecture (qwen3 and others fall back to GQA × KV / 6, which over-estimates long contexts),
and layers packed from the last block down until the free memory runs out.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.model_shape import ModelShape
from app.core.units import MIB

LEGACY_CUDA_MINIMUM_BYTES = 457 * MIB
LEGACY_KV_BYTES = {"f16": 2.0, "q8_0": 1.0, "q4_0": 0.5}
GEMMA3_GLOBAL_EVERY = 6


@dataclass(frozen=True)
class LegacyEstimate:
    """What Ollama ≤ 0.11.10 predicted and logged (`msg=offload ...`)."""

    layers: int  # value it passes as --n-gpu-layers (output layer counted)
    layers_model: int  # block_count + 1
    vram_bytes: int  # memory.required.partial; the loaded model's size on the GPU
    total_bytes: int  # memory.required.full; the loaded model's size
    kv_bytes: int
    graph_full_bytes: int
    graph_partial_bytes: int
    weights_bytes: int
    output_bytes: int

    @property
    def estimate_name(self) -> str:
        """What the estimator's explanation calls this prediction."""
        return "Ollama's own estimate"

    @property
    def advice(self) -> str:
        """How to get layers placed by real sizes instead."""
        return "A newer Ollama places layers by real sizes."


def _graph(shape: ModelShape, context: int, batch: int, kv_total: int) -> tuple[int, int]:
    """(partial, full) compute-graph sizes per architecture, integer arithmetic as in Ollama."""
    e, v, h = shape.n_embd, shape.n_vocab, shape.n_head
    hkv = max(shape.n_head_kv)
    eh = e // h
    ehk = shape.key_length
    b, c = batch, context
    arch = shape.architecture
    if arch in ("llama", "mistral"):
        full = max(4 * b * (1 + 4 * e + c * (1 + h)), 4 * b * (e + v))
        partial = 4 * b * e + max(
            4 * b * (1 + e + max(c, e)) + e * e * 9 // 16 + 4 * c * (b * h + eh * hkv),
            4 * b * (e + v) + e * v * 105 // 128,
        )
        return partial, full
    if arch == "qwen2":
        full = max(4 * b * (e + v), 4 * b * (1 + 2 * e + c + c * h))
        partial = max(4 * b * (e + v) + e * v * 105 // 128, 4 * (b * (1 + 2 * e + c * (1 + h)) + e * (1 + c)))
        return partial, full
    if arch in ("gemma", "gemma2", "gemma3"):
        full = max(4 * b * (e + v), 4 * b * (2 + c + c * h + 2 * e + 2 * ehk * h))
        partial = max(
            4 * e * b + e * v * 105 // 128 + 4 * v * b,
            4 * b * (2 * e + 1 + 2 * ehk * h + c + c * h) + 4 * ehk * c * 8 + e * ehk * h * 9 // 16,
        )
        return partial, full
    gqa = h // max(min(shape.n_head_kv), 1)
    partial = gqa * kv_total // 6
    return partial, partial


def legacy_estimate(shape: ModelShape, num_ctx: int, num_batch: int, parallel: int, kv_type: str,
                    flash_attention: bool, free_bytes: int, gpu_overhead_bytes: int = 0,
                    num_gpu: int | None = None) -> LegacyEstimate:
    """Ollama ≤ 0.11.10's estimate for one CUDA GPU with `free_bytes` free (bytes throughout)."""
    bpe = LEGACY_KV_BYTES.get(kv_type if flash_attention else "f16", 2.0)
    context = num_ctx * parallel
    batch = min(num_ctx, num_batch)
    width = (shape.key_length + shape.value_length) * max(shape.n_head_kv)
    kv = [int(context * width * bpe)] * shape.n_layer
    if shape.architecture == "gemma3" and shape.sliding_window:
        window = parallel * shape.sliding_window + batch
        kv = [k if (i + 1) % GEMMA3_GLOBAL_EVERY == 0 else int(window * width * bpe) for i, k in enumerate(kv)]
    kv_total = sum(kv)
    partial, full = _graph(shape, context, batch, kv_total)
    graph_max = max(partial, full)

    layers_bytes = shape.weights.layer_bytes
    output_bytes = shape.weights.output_bytes
    buffer_layer = layers_bytes[0] + kv[0]
    allocation = 0
    layer_count = 0
    overflow = 0
    has_space = free_bytes >= gpu_overhead_bytes + graph_max + LEGACY_CUDA_MINIMUM_BYTES + 2 * buffer_layer
    if has_space:
        allocation = LEGACY_CUDA_MINIMUM_BYTES + buffer_layer
    for i in range(shape.n_layer - 1, -1, -1):
        size = layers_bytes[i] + kv[i]
        if num_gpu is not None and layer_count >= num_gpu:
            overflow += size
            continue
        if has_space and free_bytes > gpu_overhead_bytes + allocation + graph_max + size:
            allocation += size
            layer_count += 1
        else:
            has_space = False
            overflow += size
    fully_loaded = layer_count >= shape.n_layer
    if num_gpu is None or layer_count < num_gpu:
        if has_space and free_bytes > gpu_overhead_bytes + allocation + graph_max + output_bytes:
            allocation += output_bytes
            layer_count += 1
    if layer_count < shape.n_layer + 1:
        fully_loaded = False
        overflow += output_bytes
    if layer_count > 0:
        allocation += full if fully_loaded else partial
    total = allocation + overflow
    return LegacyEstimate(
        layers=layer_count, layers_model=shape.n_layer + 1, vram_bytes=allocation if layer_count else 0,
        total_bytes=total, kv_bytes=kv_total, graph_full_bytes=full,
        graph_partial_bytes=partial, weights_bytes=sum(layers_bytes), output_bytes=output_bytes,
    )
