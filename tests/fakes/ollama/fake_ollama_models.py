"""Model catalogue of the stand-in Ollama server: what `/api/tags`, `/api/show` and `/api/ps` report.

Shapes are the published GGUF metadata of each model (layer counts, heads, context); digests are
derived from the name so they are stable 64-hex strings, not the registry's real ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any

from app.core.units import MIB


# Bytes per KV element by OLLAMA_KV_CACHE_TYPE (Go engine: q8_0 34/32, q4_0 18/32 bytes).
KV_BYTES_PER_ELEMENT: dict[str, float] = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}

# A flash-attention compute graph stays in the hundreds of MiB; without it, it grows with context.
GRAPH_BYTES_FLASH = 300 * MIB


def stable_digest(text: str) -> str:
    """64 hex characters derived from `text` (stands in for a manifest's sha256)."""
    return hashlib.sha256(text.encode()).hexdigest()


def _shape_info(arch: str, shape: dict[str, Any]) -> dict[str, Any]:
    """GGUF keys for an architecture, as llama.cpp's converter names them."""
    info: dict[str, Any] = {"general.architecture": arch}
    info.update(shape.pop("general", {}))
    for key, value in shape.items():
        info[f"{arch}.{key}"] = value
    return info


def _qwen3_info(params: int, blocks: int, embed: int, ffn: int, heads: int, base: str) -> dict[str, Any]:
    info = _shape_info("qwen3", {
        "general": {"general.basename": "Qwen3", "general.file_type": 15,
                    "general.parameter_count": params, "general.quantization_version": 2,
                    "general.size_label": base, "general.type": "model"},
        "attention.head_count": heads, "attention.head_count_kv": 8,
        "attention.key_length": 128, "attention.value_length": 128,
        "attention.layer_norm_rms_epsilon": 1e-06, "block_count": blocks,
        "context_length": 40960, "embedding_length": embed, "feed_forward_length": ffn,
        "rope.freq_base": 1000000,
    })
    info.update({"tokenizer.ggml.add_bos_token": False, "tokenizer.ggml.bos_token_id": 151643,
                 "tokenizer.ggml.eos_token_id": 151645, "tokenizer.ggml.model": "gpt2",
                 "tokenizer.ggml.padding_token_id": 151643, "tokenizer.ggml.pre": "qwen2",
                 "tokenizer.ggml.merges": None, "tokenizer.ggml.token_type": None,
                 "tokenizer.ggml.tokens": None})
    return info


def qwen3_14b_info() -> dict[str, Any]:
    """model_info of qwen3:14b (40 blocks, 5120 hidden, 40/8 heads, head_dim 128, FFN 17408)."""
    return _qwen3_info(14_768_307_200, 40, 5120, 17408, 40, "14B")


def qwen3_0_6b_info() -> dict[str, Any]:
    """model_info of qwen3:0.6b (28 blocks, 1024 hidden, 16/8 heads, head_dim 128, FFN 3072)."""
    return _qwen3_info(751_632_384, 28, 1024, 3072, 16, "0.6B")


def llama3_2_3b_info() -> dict[str, Any]:
    """model_info of llama3.2:3b: no key_length/value_length keys, as Llama GGUFs ship."""
    info = _shape_info("llama", {
        "general": {"general.basename": "Llama-3.2", "general.file_type": 15,
                    "general.finetune": "Instruct", "general.parameter_count": 3_212_749_888,
                    "general.quantization_version": 2, "general.size_label": "3B",
                    "general.type": "model"},
        "attention.head_count": 24, "attention.head_count_kv": 8,
        "attention.layer_norm_rms_epsilon": 1e-05, "block_count": 28, "context_length": 131072,
        "embedding_length": 3072, "feed_forward_length": 8192, "rope.dimension_count": 128,
        "rope.freq_base": 500000, "vocab_size": 128256,
    })
    info.update({"tokenizer.ggml.bos_token_id": 128000, "tokenizer.ggml.eos_token_id": 128009,
                 "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe",
                 "tokenizer.ggml.merges": None, "tokenizer.ggml.token_type": None,
                 "tokenizer.ggml.tokens": None})
    return info


def gemma3_4b_info() -> dict[str, Any]:
    """model_info of gemma3:4b: head_dim 256 and a sliding window, as Gemma GGUFs ship."""
    info = _shape_info("gemma3", {
        "general": {"general.file_type": 15, "general.parameter_count": 3_880_099_328,
                    "general.quantization_version": 2},
        "attention.head_count": 8, "attention.head_count_kv": 4, "attention.key_length": 256,
        "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-06,
        "attention.sliding_window": 1024, "block_count": 34, "context_length": 131072,
        "embedding_length": 2560, "feed_forward_length": 10240, "final_logit_softcapping": 30,
        "rope.global.freq_base": 1000000, "rope.local.freq_base": 10000,
    })
    info.update({"tokenizer.ggml.bos_token_id": 2, "tokenizer.ggml.eos_token_id": 1,
                 "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
                 "tokenizer.ggml.scores": None, "tokenizer.ggml.token_type": None,
                 "tokenizer.ggml.tokens": None})
    return info


QWEN3_TEMPLATE = (
    "{{- if .Messages }}\n{{- range $i, $_ := .Messages }}\n<|im_start|>{{ .Role }}\n"
    "{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n"
    "{{- if and $.IsThinkSet (not $.Think) }}\n<think>\n\n</think>\n\n{{ end }}\n{{- end }}"
)
LLAMA_TEMPLATE = (
    "<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{- range .Messages }}"
    "<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n"
)
GEMMA_TEMPLATE = (
    "{{- range $i, $_ := .Messages }}<start_of_turn>{{ if eq .Role \"user\" }}user{{ else }}model"
    "{{ end }}\n{{ .Content }}<end_of_turn>\n{{ end }}<start_of_turn>model\n"
)

QWEN3_PARAMETERS: dict[str, Any] = {"repeat_penalty": 1, "stop": ["<|im_start|>", "<|im_end|>"],
                                    "temperature": 0.6, "top_k": 20, "top_p": 0.95}


@dataclass
class FakeModel:
    """One model in the fake's store. Defaults describe qwen3:14b (Q4_K_M, 9.3 GB)."""

    name: str
    family: str = "qwen3"
    parameter_size: str = "14.8B"
    quantization_level: str = "Q4_K_M"
    size: int = 9_276_198_565
    digest: str = ""
    capabilities: tuple[str, ...] = ("completion", "tools", "thinking")
    model_info: dict = field(default_factory=qwen3_14b_info)
    context_length: int = 40960
    think_levels: bool = False
    vram_bytes: int | None = None
    parameters: dict = field(default_factory=lambda: dict(QWEN3_PARAMETERS))
    template: str = QWEN3_TEMPLATE
    modified_at: str = "2025-10-14T09:12:41.529384012+02:00"
    license: str | None = None  # None: the family's usual licence text; "" none (as SmolLM2's GGUF)
    parent: str = ""  # the model a created variant came from (details.parent_model)

    def __post_init__(self) -> None:
        if not self.digest:
            self.digest = stable_digest(self.name)

    @property
    def families(self) -> list[str]:
        """GGUF families list as Ollama reports it (the family alone for text models)."""
        return [self.family]

    def details(self) -> dict[str, Any]:
        """The `details` object shared by /api/tags, /api/ps and /api/show."""
        return {"parent_model": self.parent, "format": "gguf", "family": self.family,
                "families": self.families, "parameter_size": self.parameter_size,
                "quantization_level": self.quantization_level}

    def _arch_key(self, key: str) -> Any:
        arch = self.model_info.get("general.architecture", self.family)
        return self.model_info.get(f"{arch}.{key}")

    def kv_bytes_per_token(self, kv_cache_type: str = "f16") -> float:
        """KV cache bytes per context token (all layers; K and V)."""
        blocks = int(self._arch_key("block_count") or 32)
        heads = int(self._arch_key("attention.head_count") or 32)
        kv_heads = int(self._arch_key("attention.head_count_kv") or heads)
        embed = int(self._arch_key("embedding_length") or 4096)
        key_len = int(self._arch_key("attention.key_length") or embed // heads)
        value_len = int(self._arch_key("attention.value_length") or embed // heads)
        per_element = KV_BYTES_PER_ELEMENT.get(kv_cache_type, 2.0)
        return blocks * kv_heads * (key_len + value_len) * per_element

    def loaded_bytes(self, ctx_total: int, kv_cache_type: str = "f16") -> int:
        """Bytes when loaded with `ctx_total` context cells: weights + KV + compute graph."""
        if self.vram_bytes is not None:
            return self.vram_bytes
        padded = -(-ctx_total // 256) * 256
        return int(self.size + self.kv_bytes_per_token(kv_cache_type) * padded + GRAPH_BYTES_FLASH)

    def parameters_text(self) -> str:
        """Parameters as `/api/show` prints them: `%-30s %#v`, one line per value."""
        lines = []
        for key, value in self.parameters.items():
            for item in value if isinstance(value, list) else [value]:
                shown = f'"{item}"' if isinstance(item, str) else str(item)
                lines.append(f"{key:<30} {shown}")
        return "\n".join(lines)

    def tensors(self) -> list[dict[str, Any]]:
        """Tensor list (name, type, shape) shaped like the model's GGUF."""
        embed = int(self._arch_key("embedding_length") or 4096)
        heads = int(self._arch_key("attention.head_count") or 32)
        kv_heads = int(self._arch_key("attention.head_count_kv") or heads)
        head_dim = int(self._arch_key("attention.key_length") or embed // heads)
        ffn = int(self._arch_key("feed_forward_length") or 4 * embed)
        vocab = int(self._arch_key("vocab_size") or 151936)
        out = [{"name": "token_embd.weight", "type": "Q4_K", "shape": [embed, vocab]}]
        for b in range(int(self._arch_key("block_count") or 32)):
            p = f"blk.{b}."
            block = [
                {"name": p + "attn_k.weight", "type": "Q4_K", "shape": [embed, kv_heads * head_dim]},
                {"name": p + "attn_norm.weight", "type": "F32", "shape": [embed]},
                {"name": p + "attn_output.weight", "type": "Q4_K", "shape": [heads * head_dim, embed]},
                {"name": p + "attn_q.weight", "type": "Q4_K", "shape": [embed, heads * head_dim]},
                {"name": p + "attn_v.weight", "type": "Q6_K", "shape": [embed, kv_heads * head_dim]},
                *([{"name": p + "attn_k_norm.weight", "type": "F32", "shape": [head_dim]},
                   {"name": p + "attn_q_norm.weight", "type": "F32", "shape": [head_dim]}]
                  if self.family == "qwen3" else []),
                {"name": p + "ffn_down.weight", "type": "Q6_K", "shape": [ffn, embed]},
                {"name": p + "ffn_gate.weight", "type": "Q4_K", "shape": [embed, ffn]},
                {"name": p + "ffn_norm.weight", "type": "F32", "shape": [embed]},
                {"name": p + "ffn_up.weight", "type": "Q4_K", "shape": [embed, ffn]},
            ]
            out += sorted(block, key=lambda t: t["name"])
        out += [{"name": "output.weight", "type": "Q6_K", "shape": [embed, vocab]},
                {"name": "output_norm.weight", "type": "F32", "shape": [embed]}]
        return out

    def renamed(self, name: str, **changes: Any) -> FakeModel:
        """A copy under another name (a created variant), with a fresh digest."""
        return replace(self, name=name, digest=stable_digest(name), **changes)


def qwen3_14b() -> FakeModel:
    """qwen3:14b, Q4_K_M, thinking-capable."""
    return FakeModel("qwen3:14b")


def default_models() -> list[FakeModel]:
    """The store a fresh fake starts with."""
    return [
        qwen3_14b(),
        FakeModel("qwen3:0.6b", parameter_size="751.63M", size=522_653_767,
                  model_info=qwen3_0_6b_info(), modified_at="2025-10-13T18:02:11.104417322+02:00"),
        FakeModel("llama3.2:3b", family="llama", parameter_size="3.2B", size=2_019_393_189,
                  capabilities=("completion", "tools"), model_info=llama3_2_3b_info(),
                  context_length=131072, template=LLAMA_TEMPLATE,
                  parameters={"stop": ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]},
                  modified_at="2025-09-30T21:44:03.881920541+02:00"),
        FakeModel("gemma3:4b", family="gemma3", parameter_size="4.3B", size=3_338_801_804,
                  capabilities=("completion", "vision"), model_info=gemma3_4b_info(),
                  context_length=131072, template=GEMMA_TEMPLATE,
                  parameters={"stop": ["<end_of_turn>"], "temperature": 1, "top_k": 64, "top_p": 0.95},
                  modified_at="2025-09-28T08:15:37.402113907+02:00"),
    ]


def default_registry() -> list[FakeModel]:
    """Models `/api/pull` can fetch: the default store plus other qwen3:14b quantizations."""
    base = qwen3_14b()
    return default_models() + [
        base.renamed("qwen3:14b-q8_0", quantization_level="Q8_0", size=15_698_587_877),
        base.renamed("qwen3:14b-fp16", quantization_level="F16", size=29_546_434_277),
        FakeModel("qwen3:8b", parameter_size="8.2B", size=5_225_387_923,
                  model_info=_qwen3_info(8_190_735_360, 36, 4096, 12288, 32, "8B")),
    ]
