"""llama.cpp's own memory arithmetic: KV cache cells, compute-graph buffers and runtime peaks.

Sizes follow how llama.cpp allocates: context padded to 256 cells,
one KV stream per parallel slot, sliding-window layers holding only window + ubatch cells,
and a compute buffer sized for the worst-case prompt batch. The constants marked "fitted" were
calibrated against llama.cpp's server on an NVIDIA H200 (benchmarks/vram/); the buffers they describe
do not depend on the GPU model.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.model_shape import ModelShape
from app.core.units import MIB


KV_BYTES_PER_ELEMENT: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
KV_TYPES = tuple(KV_BYTES_PER_ELEMENT)
CELL_PAD = 256

# Activations alive at the compute buffer's high-water mark, in f32 values per batch token:
# the FFN gate/up/product (3 × n_ff) beside four hidden-state rows (fitted: exact on Qwen3-14B).
FFN_LIVE_FF_ROWS = 3
FFN_LIVE_EMBD_ROWS = 4
# Without flash attention the f32 KQ matrix is live beside n_ff + 2 × n_embd values per token
# (fitted on one row, then exact on all 10 measured flash-off rows).
NO_FA_LIVE_FF_ROWS = 1
NO_FA_LIVE_EMBD_ROWS = 2
# A quantized KV cache with flash attention: the CUDA kernel for big batches reads f16, so the attention
# output's allocation carries f16 copies of one layer's K and V of every cell of every slot (2 + 2 bytes
# per value: ggml-cuda's flash_attn_ext alloc size), beside five hidden-state rows per batch token alive
# while a layer's attention runs (fitted on 14 rows).
QUANT_KV_BYTES_PER_VALUE = 4
QUANT_KV_LIVE_EMBD_ROWS = 5
ATTN_LIVE_EMBD_ROWS = QUANT_KV_LIVE_EMBD_ROWS  # the hidden-state rows alive during a layer's attention
# ggml's CUDA backend runs an op whose weights sit in host memory on the GPU once its batch reaches this
# many tokens (GGML_OP_OFFLOAD_MIN_BATCH, default 32).
OP_OFFLOAD_MIN_BATCH = 32
# The CUDA memory pool grows on the first prompts: a fixed part plus quantized activations per
# batch token (fitted: 14-40 MiB on the H200 rows).
POOL_BASE_BYTES = int(14.5 * MIB)
POOL_BYTES_PER_TOKEN_PER_FF = 0.75
# Without flash attention cuBLAS also needs workspace and f16 copies of the inputs (fitted).
NO_FA_POOL_BASE_BYTES = 82 * MIB
# Mixture of experts: the routed experts' outputs (n_embd per used expert, f32) stay live beside
# whatever else peaks (exact on the Qwen3-30B-A3B rows at micro-batch 512 and 2048), and with flash
# attention the expert matmuls' scratch grows the CUDA pool (fitted on the 8 flash-on rows of that
# one shape: 93 MiB at 512, 113 MiB at 2048; without flash attention the KQ copy's room covers it).
MOE_POOL_BASE_BYTES = int(86.8 * MIB)
MOE_POOL_BYTES_PER_TOKEN = int(0.0125 * MIB)


def pad_to(value: int, multiple: int) -> int:
    """Round value up to a multiple."""
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class ContextPlan:
    """How llama.cpp lays out context cells for num_ctx × parallel."""

    n_ctx_total: int  # KV cells of full-attention layers over all slots
    n_ctx_seq: int  # cells per slot (one stream per slot)
    n_stream: int
    n_ubatch: int  # tokens in the worst-case compute batch
    swa_cells_per_stream: int  # cells a sliding-window layer keeps per slot (0: no such layers)


def plan_context(shape: ModelShape, num_ctx: int, parallel: int, n_ubatch: int) -> ContextPlan:
    """Cells and streams llama.cpp allocates for num_ctx tokens per slot and `parallel` slots."""
    n_ctx = pad_to(num_ctx * parallel, CELL_PAD)
    n_ctx_seq = pad_to(n_ctx // parallel, CELL_PAD)
    n_ctx = n_ctx_seq * parallel
    ubatch = min(n_ubatch, n_ctx)
    swa = 0
    if shape.sliding_window and any(shape.swa_layers):
        swa = pad_to(min(n_ctx_seq, shape.sliding_window + ubatch), CELL_PAD)
    return ContextPlan(n_ctx, n_ctx_seq, parallel, ubatch, swa)


def effective_kv_type(kv_type: str, flash_attention: bool) -> str:
    """KV type actually used: a quantized KV cache needs flash attention, so without it the server uses f16."""
    return kv_type if flash_attention else "f16"


def kv_layer_bytes(shape: ModelShape, plan: ContextPlan, kv_type: str) -> list[int]:
    """KV cache bytes of each layer (K and V together)."""
    b = KV_BYTES_PER_ELEMENT[kv_type]
    out = []
    for il in range(shape.n_layer):
        cells = plan.swa_cells_per_stream * plan.n_stream if shape.swa_layers[il] else plan.n_ctx_total
        width = shape.n_head_kv[il] * (shape.key_length + shape.value_length)
        out.append(int(cells * width * b))
    return out


def _mask_bytes(shape: ModelShape, plan: ContextPlan, flash_attention: bool) -> int:
    per = 2 if flash_attention else 4
    total = per * plan.n_ctx_seq * plan.n_ubatch
    if plan.swa_cells_per_stream:
        total += per * plan.swa_cells_per_stream * plan.n_ubatch
    return total


def compute_bytes(shape: ModelShape, plan: ContextPlan, kv_type: str, flash_attention: bool) -> int:
    """GPU compute buffer llama.cpp reserves for the worst-case batch, at full offload."""
    t = plan.n_ubatch
    ffn = 4 * t * (FFN_LIVE_FF_ROWS * shape.n_ff + FFN_LIVE_EMBD_ROWS * shape.n_embd)
    logits = 4 * plan.n_stream * shape.n_vocab + 4 * t * shape.n_embd
    live = max(ffn, logits)
    if not flash_attention:
        kq = 4 * t * shape.n_head * plan.n_ctx_seq
        beside = 4 * t * (NO_FA_LIVE_FF_ROWS * shape.n_ff + NO_FA_LIVE_EMBD_ROWS * shape.n_embd)
        live = max(live, kq + beside)
    elif kv_type != "f16":
        cells = plan.n_ctx_total
        width = max(shape.n_embd_k_gqa, shape.n_embd_v_gqa)
        live = max(live, QUANT_KV_BYTES_PER_VALUE * cells * width + 4 * t * QUANT_KV_LIVE_EMBD_ROWS * shape.n_embd)
    return live + _moe_live_bytes(shape, t) + _mask_bytes(shape, plan, flash_attention)


def spill_compute_bytes(shape: ModelShape, plan: ContextPlan, kv_type: str, flash_attention: bool,
                        cpu_blocks: int, kv: list[int]) -> int:
    """GPU compute buffer when the first `cpu_blocks` repeating layers stay in host memory (`kv`: each layer's
    KV bytes, as kv_layer_bytes gives them).

    With op offload (llama.cpp's default), the scheduler runs a big batch's matrix products on the GPU even
    for a layer whose weights are in host memory, and the ops around them follow (ggml_backend_sched: an op
    whose weight is in host memory goes to the GPU when its batch reaches OP_OFFLOAD_MIN_BATCH tokens; the
    unassigned ops next to it take the same backend). Only what is pre-allocated in host memory stays there:
    the writes into that layer's KV cache. Every input the GPU side needs from host memory is copied into the
    GPU compute buffer at the start of its split and freed after its last use: each weight matrix of the layer
    (one split per weight), and, for attention, the views of that layer's K and V over every cell of every
    slot. The buffer is sized for the largest moment of the worst-case batch, so it grows to the largest of:
    the full-offload graph; a host layer's attention with its whole K and V copied in (plus, for a quantized
    cache, the f16 copies the flash-attention kernel makes); a host layer's FFN with its largest weight copied
    in. Below OP_OFFLOAD_MIN_BATCH tokens nothing is offloaded and the buffer is the full-offload one."""
    return spill_compute_table(shape, plan, kv_type, flash_attention, kv)[max(0, min(cpu_blocks, shape.n_layer))]


def spill_compute_table(shape: ModelShape, plan: ContextPlan, kv_type: str, flash_attention: bool,
                        kv: list[int]) -> list[int]:
    """spill_compute_bytes for 0..n_layer blocks in host memory, in one pass (a placement loop asks for many)."""
    full = compute_bytes(shape, plan, kv_type, flash_attention)
    if max(plan.n_ubatch, plan.n_stream) < OP_OFFLOAD_MIN_BATCH:
        return [full] * (shape.n_layer + 1)
    t = plan.n_ubatch
    mask = _mask_bytes(shape, plan, flash_attention)
    row = 4 * t * shape.n_embd  # one f32 hidden-state row per batch token
    table = [full]
    largest = _largest_weights_bytes(shape)
    for il in range(shape.n_layer):
        copies = kv[il]  # K and V of every cell of every slot, in the cache's own type
        cells = plan.swa_cells_per_stream * plan.n_stream if shape.swa_layers[il] else plan.n_ctx_total
        if flash_attention:
            live = ATTN_LIVE_EMBD_ROWS * row
            if kv_type != "f16":
                live += 2 * cells * shape.n_head_kv[il] * (shape.key_length + shape.value_length)
        else:
            live = 4 * t * shape.n_head * plan.n_ctx_seq + NO_FA_LIVE_EMBD_ROWS * row
        attn = copies + live + mask
        ffn = largest[il] + 2 * (4 * t * shape.n_ff) + 2 * row + mask
        table.append(max(table[-1], attn, ffn))
    return table


def _largest_weights_bytes(shape: ModelShape) -> list[int]:
    """The largest weight matrix of each repeating layer, from the layer's bytes split by parameter count: an FFN
    matrix (n_embd x n_ff; all experts of one for a mixture of experts), at the layer's mean bits per weight."""
    q = shape.n_embd * shape.n_head * shape.key_length
    o = shape.n_head * shape.value_length * shape.n_embd
    # a mixture of experts' n_ff is the width its used experts take together; one matrix holds every expert
    per_expert = shape.n_ff // max(1, shape.n_expert_used) if shape.n_expert else shape.n_ff
    ffn_matrix = shape.n_embd * per_expert * max(1, shape.n_expert)
    largest = []
    for il in range(shape.n_layer):
        params = q + 2 * shape.n_embd * shape.n_head_kv[il] * shape.key_length + o + 3 * ffn_matrix
        largest.append(int(shape.weights.layer_bytes[il] * ffn_matrix / params) if params else 0)
    return largest


def _moe_live_bytes(shape: ModelShape, tokens: int) -> int:
    return 4 * tokens * shape.n_embd * shape.n_expert_used if shape.n_expert else 0


def host_compute_bytes(shape: ModelShape, plan: ContextPlan, flash_attention: bool) -> int:
    """Pinned host compute buffer (inputs, masks) llama.cpp keeps beside the GPU one."""
    return 4 * 4 * plan.n_ubatch * shape.n_embd + _mask_bytes(shape, plan, flash_attention)


def _worst_kq_cells(prompt_tokens: int, ubatch: int, max_cells: int) -> int:
    """Largest (batch tokens × KV cells in view) over the micro-batches of one prompt."""
    full, rest = divmod(prompt_tokens, ubatch)
    worst = ubatch * min(pad_to(full * ubatch, CELL_PAD), max_cells) if full else 0
    if rest:
        worst = max(worst, rest * min(pad_to(prompt_tokens, CELL_PAD), max_cells))
    return worst


def peak_extra_bytes(shape: ModelShape, plan: ContextPlan, kv_type: str, flash_attention: bool,
                     prompt_tokens: int | None = None) -> int:
    """GPU memory the CUDA pool adds on top of the reserved buffers while one slot processes a
    prompt of prompt_tokens tokens (default: a prompt that fills the slot)."""
    t = plan.n_ubatch
    pool = POOL_BASE_BYTES + int(POOL_BYTES_PER_TOKEN_PER_FF * shape.n_ff * t)
    if flash_attention:
        if shape.n_expert:
            pool += MOE_POOL_BASE_BYTES + MOE_POOL_BYTES_PER_TOKEN * t
        return pool  # quantized or not, the flash kernels read the cache in place
    tokens = plan.n_ctx_seq if prompt_tokens is None else max(1, min(prompt_tokens, plan.n_ctx_seq))
    # cuBLAS multiplies V by an f16 copy of the softmaxed KQ matrix of the largest micro-batch
    return pool + NO_FA_POOL_BASE_BYTES + 2 * shape.n_head * _worst_kq_cells(tokens, t, plan.n_ctx_seq)
