"""Write a GGUF file with a real model's exact tensor shapes and llama.cpp's Q4_K_M type mix.

Shapes: qwen3-14b (the default, the calibration model), the held-out shapes llama3.1-8b,
qwen2.5-7b, mistral-7b and gemma3-12b, and the mixture-of-experts qwen3-30b-a3b (128 experts, 8
per token), each with its real GGUF metadata keys. The weights are
random quantized blocks with small, finite scales: memory use depends on the shapes and types
only, never on the values. The tokenizer is the smallest GPT-2-style BPE vocabulary llama.cpp's
loader accepts, padded to the model's vocabulary size (a stand-in for SentencePiece ones too:
the tokenizer type changes no GPU buffer).

Usage: python make_gguf.py [--shape NAME] [--show SHOW.json] OUT.gguf
       python make_gguf.py --shape NAME --show SHOW.json          (the /api/show JSON only)
"""

from __future__ import annotations

import argparse
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Shape:
    """One architecture's memory-relevant hyper-parameters and GGUF conventions."""

    name: str
    arch: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_vocab: int
    n_ctx_train: int
    tied: bool = False  # no output.weight: llama.cpp duplicates token_embd as the output head
    qk_norm: bool = False  # per-head attn_q_norm / attn_k_norm (qwen3, gemma3)
    qkv_bias: bool = False  # attn_q/k/v biases (qwen2)
    post_norms: bool = False  # gemma's post_attention_norm / post_ffw_norm
    rope_freqs: bool = False  # llama 3.1's rope_freqs.weight (rope scaling factors)
    head_dim_keys: bool = False  # writes ARCH.attention.key_length / value_length
    specials: dict[int, str] = field(default_factory=dict)  # token id -> text of control tokens
    meta: dict[str, object] = field(default_factory=dict)  # remaining real GGUF keys
    show_size_label: str = ""
    n_expert: int = 0  # mixture of experts: experts per layer (0: a dense FFN)
    n_expert_used: int = 0  # experts each token is routed to
    n_ff_exp: int = 0  # FFN width of one expert


SHAPES: dict[str, Shape] = {
    "qwen3-14b": Shape(
        "qwen3-14b", "qwen3", 40, 5120, 17408, 40, 8, 128, 151936, 40960, qk_norm=True, head_dim_keys=True,
        specials={151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
        meta={"rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6, "tokenizer.ggml.pre": "qwen2",
              "tokenizer.ggml.eos_token_id": 151645, "tokenizer.ggml.padding_token_id": 151643,
              "tokenizer.ggml.bos_token_id": 151643, "tokenizer.ggml.add_bos_token": False},
        show_size_label="14.8B"),
    "llama3.1-8b": Shape(
        "llama3.1-8b", "llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, rope_freqs=True,
        specials={128000: "<|begin_of_text|>", 128001: "<|end_of_text|>", 128009: "<|eot_id|>"},
        meta={"rope.freq_base": 500000.0, "attention.layer_norm_rms_epsilon": 1e-5, "rope.dimension_count": 128,
              "vocab_size": 128256, "tokenizer.ggml.pre": "llama-bpe", "tokenizer.ggml.bos_token_id": 128000,
              "tokenizer.ggml.eos_token_id": 128009},
        show_size_label="8.0B"),
    "qwen2.5-7b": Shape(
        "qwen2.5-7b", "qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 32768, qkv_bias=True,
        specials={151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
        meta={"rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6, "tokenizer.ggml.pre": "qwen2",
              "tokenizer.ggml.eos_token_id": 151645, "tokenizer.ggml.padding_token_id": 151643,
              "tokenizer.ggml.bos_token_id": 151643, "tokenizer.ggml.add_bos_token": False},
        show_size_label="7.6B"),
    "mistral-7b": Shape(
        "mistral-7b", "llama", 32, 4096, 14336, 32, 8, 128, 32768, 32768,
        specials={0: "<unk>", 1: "<s>", 2: "</s>"},
        meta={"rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-5, "rope.dimension_count": 128,
              "vocab_size": 32768, "tokenizer.ggml.pre": "default", "tokenizer.ggml.bos_token_id": 1,
              "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0},
        show_size_label="7.2B"),
    "gemma3-12b": Shape(
        "gemma3-12b", "gemma3", 48, 3840, 15360, 16, 8, 256, 262144, 131072, tied=True, qk_norm=True,
        post_norms=True, head_dim_keys=True,
        specials={0: "<pad>", 1: "<eos>", 2: "<bos>", 3: "<unk>"},
        meta={"rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6,
              "attention.sliding_window": 1024, "rope.scaling.type": "linear", "rope.scaling.factor": 8.0,
              "tokenizer.ggml.pre": "default", "tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
              "tokenizer.ggml.padding_token_id": 0, "tokenizer.ggml.unknown_token_id": 3,
              "tokenizer.ggml.add_bos_token": True},
        show_size_label="12.2B"),
    "qwen3-30b-a3b": Shape(
        "qwen3-30b-a3b", "qwen3moe", 48, 2048, 6144, 32, 4, 128, 151936, 40960, qk_norm=True, head_dim_keys=True,
        specials={151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>"},
        meta={"rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6, "tokenizer.ggml.pre": "qwen2",
              "tokenizer.ggml.eos_token_id": 151645, "tokenizer.ggml.padding_token_id": 151643,
              "tokenizer.ggml.bos_token_id": 151643, "tokenizer.ggml.add_bos_token": False},
        show_size_label="30.5B", n_expert=128, n_expert_used=8, n_ff_exp=768),
}
DEFAULT_SHAPE = "qwen3-14b"

# ggml type id -> (elements per block, bytes per block, offset of the f16 scale `d` in a block)
F32, F16, Q4_K, Q6_K = 0, 1, 12, 14
BLOCKS = {Q4_K: (256, 144, 0), Q6_K: (256, 210, 208)}

ALIGN = 32


def use_more_bits(i_layer: int, n_layer: int) -> bool:
    """llama.cpp's Q4_K_M rule: these layers keep attn_v and ffn_down at Q6_K."""
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def tensor_list(shape: Shape) -> list[tuple[str, tuple[int, ...], int]]:
    """(name, ggml shape ne0-first, type) for every tensor, in llama.cpp's naming and Q4_K_M mix."""
    e, v = shape.n_embd, shape.n_vocab
    # a tied model's only vocabulary table takes the output head's type
    out: list[tuple[str, tuple[int, ...], int]] = [("token_embd.weight", (e, v), Q6_K if shape.tied else Q4_K)]
    q_dim, kv_dim = shape.n_head * shape.head_dim, shape.n_head_kv * shape.head_dim
    for i in range(shape.n_layer):
        more = use_more_bits(i, shape.n_layer)
        p = f"blk.{i}."
        layer = [(p + "attn_norm.weight", (e,), F32), (p + "attn_q.weight", (e, q_dim), Q4_K)]
        layer += [(p + "attn_q.bias", (q_dim,), F32)] if shape.qkv_bias else []
        layer += [(p + "attn_k.weight", (e, kv_dim), Q4_K)]
        layer += [(p + "attn_k.bias", (kv_dim,), F32)] if shape.qkv_bias else []
        layer += [(p + "attn_v.weight", (e, kv_dim), Q6_K if more else Q4_K)]
        layer += [(p + "attn_v.bias", (kv_dim,), F32)] if shape.qkv_bias else []
        layer += [(p + "attn_output.weight", (q_dim, e), Q4_K)]
        if shape.qk_norm:
            layer += [(p + "attn_q_norm.weight", (shape.head_dim,), F32),
                      (p + "attn_k_norm.weight", (shape.head_dim,), F32)]
        layer += [(p + "post_attention_norm.weight", (e,), F32)] if shape.post_norms else []
        if shape.n_expert:
            x, f = shape.n_expert, shape.n_ff_exp
            layer += [
                (p + "ffn_norm.weight", (e,), F32),
                (p + "ffn_gate_inp.weight", (e, x), F32),
                (p + "ffn_gate_exps.weight", (e, f, x), Q4_K),
                (p + "ffn_up_exps.weight", (e, f, x), Q4_K),
                (p + "ffn_down_exps.weight", (f, e, x), Q6_K if more else Q4_K),
            ]
        else:
            layer += [
                (p + "ffn_norm.weight", (e,), F32),
                (p + "ffn_gate.weight", (e, shape.n_ff), Q4_K),
                (p + "ffn_up.weight", (e, shape.n_ff), Q4_K),
                (p + "ffn_down.weight", (shape.n_ff, e), Q6_K if more else Q4_K),
            ]
        layer += [(p + "post_ffw_norm.weight", (e,), F32)] if shape.post_norms else []
        out += layer
    out += [("output_norm.weight", (e,), F32)]
    out += [] if shape.tied else [("output.weight", (e, v), Q6_K)]
    out += [("rope_freqs.weight", (shape.head_dim // 2,), F32)] if shape.rope_freqs else []
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


def vocab(shape: Shape) -> tuple[list[str], list[int]]:
    """Token texts and types: byte tokens, filler tokens and the family's control tokens.

    Control tokens at the top of the table (Qwen, Llama 3) are followed by reserved control
    slots up to the vocabulary size; ones at the bottom (Mistral, Gemma) push the bytes up.
    """
    n = shape.n_vocab
    first_special = min(shape.specials)
    byte_base = 0 if first_special >= 256 else max(shape.specials) + 1
    tokens = [f"tok{i}" for i in range(n)]
    types = [1] * n
    tokens[byte_base:byte_base + 256] = gpt2_byte_chars()
    if first_special >= 256:
        for i in range(first_special, n):
            tokens[i], types[i] = f"<|reserved_{i}|>", 3
    for i, text in shape.specials.items():
        tokens[i], types[i] = text, 3
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


def metadata(shape: Shape) -> dict[str, object]:
    """GGUF key/value pairs in file order, with the family's real key names."""
    a = shape.arch
    tokens, types = vocab(shape)
    meta: dict[str, object] = {
        "general.architecture": a,
        "general.name": f"{shape.name}-shape-q4_k_m",
        "general.file_type": 15,
        "general.quantization_version": 2,
        f"{a}.block_count": shape.n_layer,
        f"{a}.context_length": shape.n_ctx_train,
        f"{a}.embedding_length": shape.n_embd,
        f"{a}.feed_forward_length": shape.n_ff,
        f"{a}.attention.head_count": shape.n_head,
        f"{a}.attention.head_count_kv": shape.n_head_kv,
    }
    if shape.n_expert:
        meta[f"{a}.expert_count"] = shape.n_expert
        meta[f"{a}.expert_used_count"] = shape.n_expert_used
        meta[f"{a}.expert_feed_forward_length"] = shape.n_ff_exp
    if shape.head_dim_keys:
        meta[f"{a}.attention.key_length"] = shape.head_dim
        meta[f"{a}.attention.value_length"] = shape.head_dim
    meta.update({f"{a}.{k}": v for k, v in shape.meta.items() if not k.startswith("tokenizer.")})
    meta["tokenizer.ggml.model"] = "gpt2"
    meta["tokenizer.ggml.pre"] = shape.meta["tokenizer.ggml.pre"]
    meta["tokenizer.ggml.tokens"] = tokens
    meta["tokenizer.ggml.token_type"] = types
    meta["tokenizer.ggml.merges"] = ["\u0120 \u0120"]
    meta.update({k: v for k, v in shape.meta.items() if k.startswith("tokenizer.") and k != "tokenizer.ggml.pre"})
    return meta


def show_json(shape: Shape) -> dict:
    """What Ollama's /api/show (verbose) returns for this file: model_info, details, tensors."""
    names = {F32: "F32", F16: "F16", Q4_K: "Q4_K", Q6_K: "Q6_K"}
    tensors = tensor_list(shape)
    info = {k: (None if isinstance(v, list) else v) for k, v in metadata(shape).items() if k != "general.name"}
    info["general.parameter_count"] = sum(int(np.prod(s)) for _, s, _ in tensors)
    family = shape.arch
    return {
        "details": {"parent_model": "", "format": "gguf", "family": family, "families": [family],
                    "parameter_size": shape.show_size_label, "quantization_level": "Q4_K_M"},
        "model_info": dict(sorted(info.items())),
        "tensors": [{"name": n, "type": names[t], "shape": list(s)} for n, s, t in tensors],
    }


def file_size(shape: Shape) -> int:
    """Bytes of the GGUF file `write` produces for this shape, without writing it."""
    return len(_header(shape)) + sum(-(-nbytes(s, t) // ALIGN) * ALIGN for _, s, t in tensor_list(shape))


def _header(shape: Shape) -> bytes:
    meta = metadata(shape)
    tensors = tensor_list(shape)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    header += b"".join(_kv(k, v) for k, v in meta.items())
    offset = 0
    infos = []
    for name, dims, ggml_type in tensors:
        infos.append(_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
                     + struct.pack("<IQ", ggml_type, offset))
        offset += -(-nbytes(dims, ggml_type) // ALIGN) * ALIGN
    header += b"".join(infos)
    return header + b"\0" * (-len(header) % ALIGN)


def write(path: Path, shape: Shape = SHAPES[DEFAULT_SHAPE]) -> int:
    """Write the model; returns its size in bytes."""
    rng = np.random.default_rng(14)
    tensors = tensor_list(shape)
    largest = max(nbytes(s, t) for _, s, t in tensors)
    pools = {t: block_pool(t, rng, largest // BLOCKS[t][1] + 1) for t in BLOCKS}
    ones = np.ones(max(nbytes(s, t) // 4 for _, s, t in tensors if t == F32), dtype="<f4").tobytes()
    with open(path, "wb") as f:
        f.write(_header(shape))
        for _, dims, ggml_type in tensors:
            n = nbytes(dims, ggml_type)
            if ggml_type == F32:
                f.write(ones[:n])
            else:
                f.write(memoryview(pools[ggml_type])[:n])
            f.write(b"\0" * (-n % ALIGN))
    return path.stat().st_size


def main() -> None:
    """Write the GGUF and/or its /api/show JSON for the shape named on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="GGUF file to write")
    ap.add_argument("--shape", default=DEFAULT_SHAPE, choices=sorted(SHAPES))
    ap.add_argument("--show", help="also write Ollama's /api/show JSON for this file here")
    args = ap.parse_args()
    shape = SHAPES[args.shape]
    if args.show:
        Path(args.show).write_text(json.dumps(show_json(shape), indent=1) + "\n")
        print(f"wrote {args.show}: {len(tensor_list(shape))} tensors, GGUF file would be {file_size(shape)} bytes")
    if args.out:
        size = write(Path(args.out), shape)
        print(f"wrote {args.out}: {size} bytes ({shape.name})")


if __name__ == "__main__":
    main()
