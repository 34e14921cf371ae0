"""Small real GGUF files for tests, written by the `gguf` package's own writer.

A two-layer llama-shaped model (widths of 64, f32 tensors: a few hundred KiB), with a chat template
of the caller's choice, so the header reader and the catalog read what llama.cpp's converters write."""

from __future__ import annotations

from pathlib import Path

import numpy as np

N_LAYER, N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_VOCAB, N_CTX = 2, 64, 128, 4, 2, 256, 2048
QWEN_STYLE_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                       "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>{% endif %}")


def write_tiny_gguf(path: Path, chat_template: str = QWEN_STYLE_TEMPLATE) -> Path:
    """Write a tiny llama-architecture GGUF file at path (file type F32) and return path."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(N_LAYER)
    writer.add_context_length(N_CTX)
    writer.add_embedding_length(N_EMBD)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_vocab_size(N_VOCAB)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_chat_template(chat_template)
    writer.add_token_list([f"t{i}" for i in range(N_VOCAB)])
    rng = np.random.default_rng(0)

    def tensor(name: str, *shape: int) -> None:
        writer.add_tensor(name, rng.standard_normal(shape[::-1]).astype(np.float32))

    tensor("token_embd.weight", N_EMBD, N_VOCAB)
    for i in range(N_LAYER):
        tensor(f"blk.{i}.attn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.attn_q.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.attn_k.weight", N_EMBD, N_EMBD * N_HEAD_KV // N_HEAD)
        tensor(f"blk.{i}.attn_v.weight", N_EMBD, N_EMBD * N_HEAD_KV // N_HEAD)
        tensor(f"blk.{i}.attn_output.weight", N_EMBD, N_EMBD)
        tensor(f"blk.{i}.ffn_norm.weight", N_EMBD)
        tensor(f"blk.{i}.ffn_gate.weight", N_EMBD, N_FF)
        tensor(f"blk.{i}.ffn_up.weight", N_EMBD, N_FF)
        tensor(f"blk.{i}.ffn_down.weight", N_FF, N_EMBD)
    tensor("output_norm.weight", N_EMBD)
    tensor("output.weight", N_EMBD, N_VOCAB)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


__all__ = ["N_CTX", "N_EMBD", "N_HEAD", "N_HEAD_KV", "N_LAYER", "N_VOCAB", "QWEN_STYLE_TEMPLATE", "write_tiny_gguf"]
