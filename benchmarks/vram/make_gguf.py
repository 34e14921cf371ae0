"""Write a GGUF file with Qwen3-14B's exact tensor shapes and llama.cpp's Q4_K_M type mix.

The weights are random quantized blocks with small, finite scales: memory use depends on the
shapes and types only, never on the values. The tokenizer is the smallest one llama.cpp's
loader accepts for a GPT-2-style BPE vocabulary of 151936 entries.

Usage: python make_gguf.py OUT.gguf
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

N_LAYER = 40
N_EMBD = 5120
N_FF = 17408
N_HEAD = 40
N_HEAD_KV = 8
HEAD_DIM = 128
N_VOCAB = 151936
N_CTX_TRAIN = 40960

# ggml type id -> (elements per block, bytes per block, offset of the f16 scale `d` in a block)
F32, F16, Q4_K, Q6_K = 0, 1, 12, 14
BLOCKS = {Q4_K: (256, 144, 0), Q6_K: (256, 210, 208)}

ALIGN = 32


def use_more_bits(i_layer: int, n_layer: int) -> bool:
    """llama.cpp's Q4_K_M rule: these layers keep attn_v and ffn_down at Q6_K."""
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def tensor_list() -> list[tuple[str, tuple[int, ...], int]]:
    """(name, ggml shape ne0-first, type) for every tensor, in llama.cpp's naming."""
    out: list[tuple[str, tuple[int, ...], int]] = [("token_embd.weight", (N_EMBD, N_VOCAB), Q4_K)]
    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        more = use_more_bits(i, N_LAYER)
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", (N_EMBD,), F32),
            (p + "attn_q.weight", (N_EMBD, q_dim), Q4_K),
            (p + "attn_k.weight", (N_EMBD, kv_dim), Q4_K),
            (p + "attn_v.weight", (N_EMBD, kv_dim), Q6_K if more else Q4_K),
            (p + "attn_output.weight", (q_dim, N_EMBD), Q4_K),
            (p + "attn_q_norm.weight", (HEAD_DIM,), F32),
            (p + "attn_k_norm.weight", (HEAD_DIM,), F32),
            (p + "ffn_norm.weight", (N_EMBD,), F32),
            (p + "ffn_gate.weight", (N_EMBD, N_FF), Q4_K),
            (p + "ffn_up.weight", (N_EMBD, N_FF), Q4_K),
            (p + "ffn_down.weight", (N_FF, N_EMBD), Q6_K if more else Q4_K),
        ]
    out += [("output_norm.weight", (N_EMBD,), F32), ("output.weight", (N_EMBD, N_VOCAB), Q6_K)]
    return out


def nbytes(shape: tuple[int, ...], ggml_type: int) -> int:
    """Bytes of one tensor's data."""
    n = int(np.prod(shape))
    if ggml_type == F32:
        return 4 * n
    if ggml_type == F16:
        return 2 * n
    per, size, _ = BLOCKS[ggml_type]
    return n // per * size


def gpt2_byte_chars() -> list[str]:
    """The 256 printable stand-ins GPT-2 BPE vocabularies use for raw bytes."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def vocab() -> tuple[list[str], list[int]]:
    """Token texts and types: byte tokens, filler tokens, then Qwen's special tokens."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    first_special = 151643
    tokens = gpt2_byte_chars()
    tokens += [f"tok{i}" for i in range(len(tokens), first_special)]
    tokens += specials
    tokens += [f"<|reserved_{i}|>" for i in range(len(tokens), N_VOCAB)]
    types = [1] * first_special + [3] * (N_VOCAB - first_special)
    return tokens, types


def _str(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _kv(key: str, value: object) -> bytes:
    """One metadata pair in GGUF v3 encoding."""
    head = _str(key)
    if isinstance(value, bool):
        return head + struct.pack("<I?", 7, value)
    if isinstance(value, int):
        return head + struct.pack("<II", 4, value)
    if isinstance(value, float):
        return head + struct.pack("<If", 6, value)
    if isinstance(value, str):
        return head + struct.pack("<I", 8) + _str(value)
    if isinstance(value, list) and value and isinstance(value[0], str):
        return head + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_str(v) for v in value)
    if isinstance(value, list):
        return head + struct.pack("<IIQ", 9, 5, len(value)) + np.asarray(value, dtype="<i4").tobytes()
    raise TypeError(key)


def block_pool(ggml_type: int, rng: np.random.Generator, n_blocks: int) -> np.ndarray:
    """Random blocks whose f16 scales are small and finite, as flat bytes."""
    per, size, d_off = BLOCKS[ggml_type]
    pool = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    scale = np.frombuffer(np.float16(2e-5).tobytes(), dtype=np.uint8)
    pool[:, d_off : d_off + 2] = scale
    if ggml_type == Q4_K:
        pool[:, 2:4] = np.frombuffer(np.float16(0.0).tobytes(), dtype=np.uint8)
    return pool.reshape(-1)


def write(path: Path) -> int:
    """Write the model; returns its size in bytes."""
    rng = np.random.default_rng(14)
    tokens, types = vocab()
    meta = {
        "general.architecture": "qwen3",
        "general.name": "qwen3-14b-shape-q4_k_m",
        "general.file_type": 15,
        "general.quantization_version": 2,
        "qwen3.block_count": N_LAYER,
        "qwen3.context_length": N_CTX_TRAIN,
        "qwen3.embedding_length": N_EMBD,
        "qwen3.feed_forward_length": N_FF,
        "qwen3.attention.head_count": N_HEAD,
        "qwen3.attention.head_count_kv": N_HEAD_KV,
        "qwen3.attention.key_length": HEAD_DIM,
        "qwen3.attention.value_length": HEAD_DIM,
        "qwen3.rope.freq_base": 1000000.0,
        "qwen3.attention.layer_norm_rms_epsilon": 1e-6,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": ["\u0120 \u0120"],
        "tokenizer.ggml.eos_token_id": 151645,
        "tokenizer.ggml.padding_token_id": 151643,
        "tokenizer.ggml.bos_token_id": 151643,
        "tokenizer.ggml.add_bos_token": False,
    }
    tensors = tensor_list()
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    header += b"".join(_kv(k, v) for k, v in meta.items())
    offset = 0
    infos = []
    for name, shape, ggml_type in tensors:
        infos.append(_str(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape)
                     + struct.pack("<IQ", ggml_type, offset))
        offset += -(-nbytes(shape, ggml_type) // ALIGN) * ALIGN
    header += b"".join(infos)
    header += b"\0" * (-len(header) % ALIGN)

    largest = max(nbytes(s, t) for _, s, t in tensors)
    pools = {t: block_pool(t, rng, largest // BLOCKS[t][1] + 1) for t in BLOCKS}
    ones = np.ones(N_EMBD, dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(header)
        for _, shape, ggml_type in tensors:
            n = nbytes(shape, ggml_type)
            if ggml_type == F32:
                f.write(ones[:n])
            else:
                f.write(memoryview(pools[ggml_type])[:n])
            f.write(b"\0" * (-n % ALIGN))
    return path.stat().st_size


if __name__ == "__main__":
    size = write(Path(sys.argv[1]))
    print(f"wrote {sys.argv[1]}: {size} bytes")
