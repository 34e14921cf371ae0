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
# A quantized KV cache with flash attention keeps one layer's K (or V) of every cell of every slot
# as 4 bytes per value, beside five hidden-state rows per batch token (fitted on 14 rows).
QUANT_KV_BYTES_PER_VALUE = 4
QUANT_KV_LIVE_EMBD_ROWS = 5
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
