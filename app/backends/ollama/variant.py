"""A tuned variant of a local model (the articles' Modelfile step) as an `/api/create` request:
checks of each field in words, and what the real quantization choices cost where a user asks
for FP8, which Ollama does not have."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.core.units import GB

# `quantize` targets /api/create accepts (from an F16/F32/BF16 base).
QUANTIZE_CHOICES = ("q4_K_M", "q4_K_S", "q8_0")
FLOAT_QUANTIZATIONS = ("F16", "F32", "BF16")
# Bits per weight of the whole file (embedding and output included), from Ollama's qwen3:14b tags.
BITS_PER_WEIGHT = {"q4_K_M": 5.0, "q4_K_S": 4.7, "q8_0": 8.5, "fp16": 16.0}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?(:[A-Za-z0-9_][A-Za-z0-9._-]{0,79})?$")
_FP8_RE = re.compile(r"fp8|float8|\bf8\b|e4m3|e5m2", re.IGNORECASE)
MIN_USEFUL_NUM_BATCH = 32


def mentions_fp8(text: str) -> bool:
    """True when a tag or quantization names FP8."""
    return bool(_FP8_RE.search(text or ""))


def quantization_costs(parameter_count: int | None, gpu_total_bytes: int | None = None) -> list[str]:
    """One line per real choice: size on disk, decode speed relative to q4_K_M, whether it fits."""
    lines = []
    base = BITS_PER_WEIGHT["q4_K_M"]
    for tag, note in (("q4_K_M", "the default tag, fastest"), ("q8_0", "near-lossless"),
                      ("fp16", "unquantized")):
        bits = BITS_PER_WEIGHT[tag]
        size = f"≈ {parameter_count * bits / 8 / GB:.1f} GB" if parameter_count else f"{bits:g} bits/weight"
        details = [note]
        if tag != "q4_K_M":
            details.append(f"decode ≈ {bits / base:.1f}× slower")
        if parameter_count and gpu_total_bytes and parameter_count * bits / 8 > gpu_total_bytes * 0.9:
            details.append("does not fit this GPU")
        lines.append(f"{tag} {size} ({', '.join(details)})")
    return lines


def fp8_explanation(parameter_count: int | None = None, gpu_total_bytes: int | None = None) -> str:
    """Why there is no FP8 in Ollama, and the real choices with their cost."""
    return ("Ollama has no FP8 models or FP8 quantization (FP8 checkpoints are for vLLM and SGLang). "
            "Real choices: " + " · ".join(quantization_costs(parameter_count, gpu_total_bytes))
            + ". Decode reads every weight for each token, so a bigger file decodes slower.")


@dataclass(frozen=True)
class VariantCheck:
    """Field -> message for errors (block creating) and warnings; the request body when valid."""

    errors: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the variant can be created."""
        return not self.errors


def _full(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def check_variant(base: str, name: str, num_ctx: int | None, num_batch: int | None, quantize: str = "", *,
                  local_names: set[str] | frozenset[str] = frozenset(), base_quantization: str = "",
                  training_context: int | None = None, parameter_count: int | None = None,
                  gpu_total_bytes: int | None = None) -> VariantCheck:
    """Check the create form's fields and build the `/api/create` body (model, from, parameters, quantize)."""
    errors: dict[str, str] = {}
    warnings: dict[str, str] = {}
    base, name, quantize = base.strip(), name.strip(), quantize.strip()
    local = {_full(n) for n in local_names}
    if not base:
        errors["base"] = "Choose the model to start from."
    elif mentions_fp8(base):
        errors["base"] = fp8_explanation(parameter_count, gpu_total_bytes)
    elif _full(base) not in local:
        warnings["base"] = f"{base} is not a local model; Ollama pulls it from the registry first."
    if not name:
        errors["name"] = "Give the new model a name, e.g. qwen3-14b-16k."
    elif not NAME_RE.match(name):
        errors["name"] = ("A model name is letters, digits, '.', '_' and '-', with an optional "
                          "namespace/ and :tag, e.g. qwen3-14b-16k or me/qwen3:16k.")
    elif base and _full(name) == _full(base):
        errors["name"] = "The new name is the base model's own name; choose another so the base stays."
    elif mentions_fp8(name):
        warnings["name"] = "The name says FP8, but the variant keeps its base's quantization. " + fp8_explanation(
            parameter_count, gpu_total_bytes)
    elif _full(name) in local:
        warnings["name"] = f"{name} exists; creating replaces it."
    if num_ctx is not None:
        if num_ctx < 256:
            errors["num_ctx"] = "num_ctx below 256 tokens leaves no room for a prompt and its answer."
        elif training_context and num_ctx > training_context:
            warnings["num_ctx"] = (f"The model was trained for {training_context} tokens; Ollama clamps "
                                   f"num_ctx {num_ctx} to {training_context}.")
    if num_batch is not None:
        if num_batch < 1:
            errors["num_batch"] = "num_batch must be at least 1 token."
        elif num_batch < MIN_USEFUL_NUM_BATCH:
            warnings["num_batch"] = (f"num_batch is the prompt-processing batch in tokens, not concurrency: "
                                     f"{num_batch} makes long prompts slow. The articles' \"batch size\" is "
                                     "parallel requests (OLLAMA_NUM_PARALLEL on the Server page).")
    if quantize:
        if mentions_fp8(quantize):
            errors["quantize"] = fp8_explanation(parameter_count, gpu_total_bytes)
        elif quantize not in QUANTIZE_CHOICES:
            errors["quantize"] = f"Ollama quantizes to {', '.join(QUANTIZE_CHOICES)}; {quantize!r} is not one of them."
        elif base_quantization and base_quantization.upper() not in FLOAT_QUANTIZATIONS:
            errors["quantize"] = (f"Ollama quantizes only from an F16 or F32 model; {base or 'the base'} is "
                                  f"{base_quantization}. Pull the tag you want instead (e.g. qwen3:14b-q8_0), "
                                  "or start from the -fp16 tag.")
    if errors:
        return VariantCheck(errors, warnings)
    parameters = {k: v for k, v in (("num_ctx", num_ctx), ("num_batch", num_batch)) if v is not None}
    body: dict[str, Any] = {"model": name, "from": base}
    if parameters:
        body["parameters"] = parameters
    if quantize:
        body["quantize"] = quantize
    return VariantCheck(errors, warnings, body)


__all__ = ["QUANTIZE_CHOICES", "VariantCheck", "check_variant", "fp8_explanation", "mentions_fp8",
           "quantization_costs"]
