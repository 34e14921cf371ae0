"""A model's memory-relevant shape, read from its GGUF metadata (the keys a server shows or a file's header holds).

Everything the VRAM estimator needs about a model lives here: layer count, widths, attention
heads, sliding-window layers, vocabulary, and how many bytes of weights each layer holds
(exact from the GGUF tensor list when it is known (a server's verbose metadata, a file's header), otherwise split
from the file size by the quantization's known type mix).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.errors import EstimateError

# GGML tensor type -> (elements per block, bytes per block)
GGML_BLOCKS: dict[str, tuple[int, int]] = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2), "F64": (1, 8),
    "I8": (1, 1), "I16": (1, 2), "I32": (1, 4), "I64": (1, 8),
    "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
    "Q8_0": (32, 34), "Q8_1": (32, 36), "MXFP4": (32, 17), "IQ4_NL": (32, 18),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176),
    "Q6_K": (256, 210), "Q8_K": (256, 292),
    "IQ1_S": (256, 50), "IQ1_M": (256, 56), "IQ2_XXS": (256, 66), "IQ2_XS": (256, 74),
    "IQ2_S": (256, 82), "IQ3_XXS": (256, 98), "IQ3_S": (256, 110), "IQ4_XS": (256, 136),
    "TQ1_0": (256, 54), "TQ2_0": (256, 66),
}

# Quantization level -> (type of most weights, type of token_embd, type of output.weight) as
# llama.cpp's quantizer writes them; used only when the tensor list is not available.
QUANT_MIX: dict[str, tuple[str, str, str]] = {
    "F32": ("F32", "F32", "F32"), "F16": ("F16", "F16", "F16"), "BF16": ("BF16", "BF16", "BF16"),
    "Q8_0": ("Q8_0", "Q8_0", "Q8_0"), "Q6_K": ("Q6_K", "Q6_K", "Q6_K"),
    "Q5_K_M": ("Q5_K", "Q5_K", "Q6_K"), "Q5_K_S": ("Q5_K", "Q5_K", "Q6_K"),
    "Q5_0": ("Q5_0", "Q5_0", "Q6_K"), "Q5_1": ("Q5_1", "Q5_1", "Q6_K"),
    "Q4_K_M": ("Q4_K", "Q4_K", "Q6_K"), "Q4_K_S": ("Q4_K", "Q4_K", "Q6_K"),
    "Q4_0": ("Q4_0", "Q4_0", "Q6_K"), "Q4_1": ("Q4_1", "Q4_1", "Q6_K"),
    "Q3_K_M": ("Q3_K", "Q3_K", "Q6_K"), "Q3_K_L": ("Q3_K", "Q3_K", "Q6_K"), "Q3_K_S": ("Q3_K", "Q3_K", "Q6_K"),
    "Q2_K": ("Q2_K", "Q2_K", "Q6_K"), "IQ4_XS": ("IQ4_XS", "IQ4_XS", "Q6_K"),
}

SUPPORTED_ARCHITECTURES = ("qwen3", "qwen2", "llama", "mistral", "mistral3", "gemma", "gemma2", "gemma3", "phi3",
                           "qwen3moe")
# Mixture-of-experts families: each token runs `expert_used_count` experts of
# `expert_feed_forward_length` each, so that is the FFN width its activations take.
MOE_ARCHITECTURES = ("qwen3moe",)

# Layer i of these families uses a sliding window when i % pattern < pattern - 1 (llama.cpp).
SWA_PATTERN = {"gemma2": 2, "gemma3": 6}
SWA_DEFAULT_WINDOW = {"gemma2": 4096}

# Vocabulary of each family's common tokenizer, for responses that omit the token list.
FAMILY_VOCAB = {"qwen3": 151936, "qwen3moe": 151936, "qwen2": 152064, "llama": 128256, "mistral": 32768, "mistral3": 131072,
                "gemma": 256000, "gemma2": 256000, "gemma3": 262144, "phi3": 32064}

# Metadata (tokenizer strings, merges) per vocabulary entry, to split a file size without tensors.
METADATA_BYTES_PER_TOKEN = 30

# Upper bounds of metadata values, far above any real model (Llama 3.1 405B: 126 layers, width 16384,
# 128 heads; Llama 4: a 10M-token context; Gemma 3: 262144 tokens; DeepSeek V3: 256 experts). A value
# past them is a damaged or hostile reply: refused before it sizes per-layer tables (block_count
# 10**12 would otherwise build a trillion-entry tuple) or overflows the arithmetic.
MAX_LAYERS = 4096
MAX_WIDTH = 1 << 20  # embedding, feed-forward, head and key/value widths
MAX_HEADS = 1 << 14
MAX_CONTEXT = 1 << 30  # tokens
MAX_VOCAB = 1 << 24
MAX_EXPERTS = 1 << 16
MAX_TENSORS = 1 << 20
MAX_TENSOR_ELEMENTS = 1 << 48
MAX_MODEL_BYTES = 1 << 50  # 1 PiB on disk
_LIMITS = {"block_count": MAX_LAYERS, "context_length": MAX_CONTEXT, "head_count": MAX_HEADS,
           "head_count_kv": MAX_HEADS, "expert_count": MAX_EXPERTS, "expert_used_count": MAX_EXPERTS,
           "vocab_size": MAX_VOCAB}

_LAYER_RE = re.compile(r"^blk\.(\d+)\.")
# Tensors of a vision tower or projector that live beside the language model in one file.
_PROJECTOR_PREFIXES = ("v.", "mm.", "vision", "mmproj", "a.", "s.")


def tensor_bytes(ggml_type: str, shape: list[int] | tuple[int, ...]) -> int:
    """Bytes of one tensor's data for a GGML type name and shape."""
    key = ggml_type.upper()
    if key not in GGML_BLOCKS:
        raise EstimateError(f"unknown tensor type {ggml_type!r}", "The model uses a GGML type this version does not know.")
    per, size = GGML_BLOCKS[key]
    n = 1
    for dim in shape:
        if not _is_whole(dim) or not 0 <= dim <= MAX_TENSOR_ELEMENTS:
            raise EstimateError(f"tensor shape {list(shape)[:8]!r} holds {dim!r}, not a dimension",
                                "Is this the server's own show reply? Tensor shapes are lists of whole numbers.")
        n *= int(dim)
        if n > MAX_TENSOR_ELEMENTS:
            raise EstimateError(f"tensor shape {list(shape)[:8]!r} has more than 2^48 elements",
                                "No model has tensors this large; is the show reply damaged?")
    return -(-n // per) * size


@dataclass(frozen=True)
class WeightLayout:
    """Where a model's weight bytes sit: per repeating layer, input table, output head."""

    layer_bytes: tuple[int, ...]
    token_embd_bytes: int  # input table; llama.cpp keeps it in host memory
    output_bytes: int  # output head + final norm; a tied model repeats token_embd here
    projector_bytes: int  # vision tower/projector tensors in the same file (0 if none)
    from_tensors: bool  # True when read from the real tensor list, False when split from file size

    @property
    def total_file_weights(self) -> int:
        """Weight bytes as stored in the file (a tied output is stored once)."""
        return sum(self.layer_bytes) + self.token_embd_bytes + self.projector_bytes + self.output_bytes


@dataclass(frozen=True)
class ModelShape:
    """The numbers that size a model's memory, in llama.cpp's terms."""

    architecture: str
    n_layer: int
    n_embd: int
    n_ff: int
    n_head: int
    n_head_kv: tuple[int, ...]  # per layer
    key_length: int
    value_length: int
    n_vocab: int
    context_length: int
    sliding_window: int  # tokens; 0 when the model has no sliding-window layers
    swa_layers: tuple[bool, ...]  # per layer: True when the layer keeps only the window
    tied_embeddings: bool
    quantization: str
    weights: WeightLayout
    n_expert: int = 0  # mixture of experts: experts per layer (0: dense)
    n_expert_used: int = 0  # experts per token
    file_bytes: int = 0  # the model's size on disk (0: not known), which some servers' own predictions start from

    @property
    def n_embd_k_gqa(self) -> int:
        """K width of the widest layer (key_length × KV heads)."""
        return self.key_length * max(self.n_head_kv)

    @property
    def n_embd_v_gqa(self) -> int:
        """V width of the widest layer (value_length × KV heads)."""
        return self.value_length * max(self.n_head_kv)


def _is_whole(value: Any) -> bool:
    """True for an int, or a float holding a whole finite number (JSON writes 40 as 40.0 sometimes); never bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


def _limit(key: str) -> int:
    return _LIMITS.get(key.rsplit(".", 1)[-1], MAX_WIDTH)


def _count(value: Any, key: str) -> int:
    """value as a positive whole number within the key's bound; EstimateError naming the key otherwise."""
    high = _limit(key)
    if not _is_whole(value) or int(value) <= 0:
        raise EstimateError(f"model metadata lacks a positive {key!r} (got {str(value)[:40]})",
                            "Is this the model's complete metadata?")
    if int(value) > high:
        raise EstimateError(f"model metadata {key!r} is {int(value)}, above the {high} any model has",
                            "The show reply looks damaged; save it again from the server.")
    return int(value)


def _positive_int(info: Mapping[str, Any], key: str) -> int:
    value = info.get(key)
    if isinstance(value, list) and value:
        if len(value) > MAX_LAYERS:
            raise EstimateError(f"model metadata {key!r} lists {len(value)} values, more than any model's layers")
        for item in value:
            _count(item, key)
        value = max(value)
    return _count(value, key)


def _optional_int(info: Mapping[str, Any], key: str, default: int) -> int:
    """A positive bounded key, or default when the key is absent (or 0/null, as some converters write)."""
    value = info.get(key)
    return default if value is None or (_is_whole(value) and value == 0) else _count(value, key)


def _per_layer(info: Mapping[str, Any], key: str, n_layer: int, default: int | None = None) -> tuple[int, ...]:
    value = info.get(key, default)
    if isinstance(value, list):
        if len(value) != n_layer:
            raise EstimateError(f"{key!r} lists {len(value)} values for {n_layer} layers")
        return tuple(_count(v, key) for v in value)
    return (_count(value, key),) * n_layer


def _vocab_size(info: Mapping[str, Any], arch: str, tensors: list[dict[str, Any]] | None) -> int:
    for t in tensors or []:
        shape = t.get("shape")
        if t.get("name") == "token_embd.weight" and isinstance(shape, list) and len(shape) == 2:
            return _count(shape[1], "vocab_size")
    if info.get(f"{arch}.vocab_size") is not None:
        return _count(info[f"{arch}.vocab_size"], f"{arch}.vocab_size")
    tokens = info.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list) and tokens:
        return len(tokens)
    return FAMILY_VOCAB[arch]


def _swa(info: Mapping[str, Any], arch: str, n_layer: int) -> tuple[int, tuple[bool, ...]]:
    window = info.get(f"{arch}.attention.sliding_window", SWA_DEFAULT_WINDOW.get(arch, 0))
    if arch not in SWA_PATTERN or not isinstance(window, int) or window <= 0:
        return 0, (False,) * n_layer
    window = min(window, MAX_CONTEXT)  # a window wider than any context keeps every token anyway
    pattern = info.get(f"{arch}.attention.sliding_window_pattern", SWA_PATTERN[arch])
    if isinstance(pattern, list) and len(pattern) == n_layer:
        return window, tuple(bool(p) for p in pattern)
    if not _is_whole(pattern) or not 0 <= pattern <= MAX_LAYERS:
        raise EstimateError(f"model metadata '{arch}.attention.sliding_window_pattern' is {str(pattern)[:40]}, "
                            "not a layer pattern", "The show reply looks damaged; save it again from the server.")
    p = int(pattern)
    return window, tuple(p == 0 or i % p < p - 1 for i in range(n_layer))


def _checked_tensors(tensors: list[Any]) -> list[dict[str, Any]]:
    """The tensor list, each entry an object with a shape list; EstimateError otherwise."""
    if len(tensors) > MAX_TENSORS:
        raise EstimateError(f"the tensor list has {len(tensors)} entries, more than any model file holds")
    for t in tensors:
        if not isinstance(t, dict) or not isinstance(t.get("shape", []), list):
            raise EstimateError(f"a tensor entry is not an object with a shape list: {str(t)[:60]}",
                                "Pass the JSON the server's show reply returned.")
    return tensors


def _layout_from_tensors(tensors: list[dict[str, Any]], n_layer: int) -> tuple[WeightLayout, bool]:
    layers = [0] * n_layer
    token_embd = output = projector = 0
    has_output = False
    for t in tensors:
        name, size = str(t.get("name", "")), tensor_bytes(str(t.get("type", "")), t.get("shape", []))
        m = _LAYER_RE.match(name)
        if m and int(m.group(1)) < n_layer:
            layers[int(m.group(1))] += size
        elif name == "token_embd.weight":
            token_embd = size
        elif name.startswith("output"):
            output += size
            has_output = has_output or name == "output.weight"
        elif name.startswith(_PROJECTOR_PREFIXES):
            projector += size
        else:
            output += size  # small extras (rope factors, norms) travel with the output layer
    tied = not has_output
    if tied:
        output += token_embd
    return WeightLayout(tuple(layers), token_embd, output, projector, True), tied


def _layout_from_size(model_size: int, shape_args: dict[str, int], quant: str, tied: bool) -> WeightLayout:
    n_layer, n_vocab, n_embd = shape_args["n_layer"], shape_args["n_vocab"], shape_args["n_embd"]
    base, embd_type, out_type = QUANT_MIX.get(quant.upper(), ("Q4_K", "Q4_K", "Q6_K"))
    if tied:
        embd_type = out_type
    token_embd = tensor_bytes(embd_type, (n_embd, n_vocab))
    output = token_embd if tied else tensor_bytes(out_type, (n_embd, n_vocab))
    stored_output = 0 if tied else output
    rest = model_size - METADATA_BYTES_PER_TOKEN * n_vocab - token_embd - stored_output - 4 * n_embd
    if rest <= 0:
        raise EstimateError(
            f"model size {model_size} bytes is too small for its {n_layer} layers and {n_vocab}-token vocabulary",
            "Pass the size on disk of this model (the `size` the server's model list gives).",
        )
    per_layer = rest // n_layer
    return WeightLayout((per_layer,) * n_layer, token_embd, output + 4 * n_embd, 0, False)


def shape_from_gguf(metadata: Mapping[str, Any], tensors: Sequence[Any] | None, quantization: str,
                    model_size_bytes: int) -> ModelShape:
    """Build a ModelShape from a model's GGUF key/values, its tensor list (None or empty when not known: the
    weights are then split from the size on disk by the quantization's type mix), its quantization ("" for
    the common Q4_K_M) and its size on disk in bytes."""
    if not isinstance(model_size_bytes, int) or isinstance(model_size_bytes, bool) or model_size_bytes <= 0:
        raise EstimateError(f"model size must be a positive number of bytes, got {model_size_bytes!r}")
    if model_size_bytes > MAX_MODEL_BYTES:
        raise EstimateError(f"model size {model_size_bytes} bytes is above 1 PiB, more than any model file")
    info = metadata
    arch = info.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise EstimateError(
            f"unsupported architecture {arch!r}",
            "Supported: " + ", ".join(SUPPORTED_ARCHITECTURES) + ".",
        )
    p = f"{arch}."
    n_layer = _positive_int(info, p + "block_count")
    n_embd = _positive_int(info, p + "embedding_length")
    n_expert = n_expert_used = 0
    if arch in MOE_ARCHITECTURES:
        n_expert = _positive_int(info, p + "expert_count")
        n_expert_used = _positive_int(info, p + "expert_used_count")
        n_ff = n_expert_used * _positive_int(info, p + "expert_feed_forward_length")  # active width per token
    else:
        n_ff = _positive_int(info, p + "feed_forward_length")
    n_head = _positive_int(info, p + "attention.head_count")
    n_head_kv = _per_layer(info, p + "attention.head_count_kv", n_layer, default=n_head)
    head_dim = n_embd // n_head
    if head_dim < 1 and not (info.get(p + "attention.key_length") and info.get(p + "attention.value_length")):
        raise EstimateError(f"model metadata has {n_head} attention heads for an embedding of {n_embd}",
                            "The show reply looks damaged; save it again from the server.")
    key_length = _optional_int(info, p + "attention.key_length", head_dim)
    value_length = _optional_int(info, p + "attention.value_length", head_dim)
    context_length = _positive_int(info, p + "context_length")
    checked = _checked_tensors(list(tensors)) if tensors else None
    n_vocab = _vocab_size(info, arch, checked)
    window, swa_layers = _swa(info, arch, n_layer)
    quant = quantization or "Q4_K_M"
    if checked is not None:
        layout, tied = _layout_from_tensors(checked, n_layer)
    else:
        tied = arch.startswith("gemma")
        layout = _layout_from_size(model_size_bytes, {"n_layer": n_layer, "n_vocab": n_vocab, "n_embd": n_embd}, quant, tied)
    return ModelShape(
        architecture=arch, n_layer=n_layer, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv,
        key_length=key_length, value_length=value_length, n_vocab=n_vocab, context_length=context_length,
        sliding_window=window, swa_layers=swa_layers, tied_embeddings=tied, quantization=quant, weights=layout,
        n_expert=n_expert, n_expert_used=n_expert_used, file_bytes=model_size_bytes,
    )
