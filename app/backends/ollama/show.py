"""Ollama's `/api/show` reply read into neutral model facts.

The reply carries the model's GGUF keys (`model_info`, long arrays left out), `details`
(quantization_level among them), `capabilities`, the Modelfile's `parameters` text (the model's own
num_ctx and num_batch) and, when verbose, `tensors`. A saved reply (`ollama show --verbose` JSON, or
`curl /api/show`) is read the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import EstimateError
from app.core.model_facts import ModelCapability, ModelFacts
from app.core.model_shape import ModelShape


def modelfile_parameters(text: str) -> dict[str, str]:
    """First value of each PARAMETER line of the model's parameters text (Modelfile syntax)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key and key not in out:
            out[key] = value.strip().strip('"')
    return out


def _int_param(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def facts_from_show(show: Mapping[str, Any], *, digest: str = "") -> ModelFacts:
    """The facts of a show reply (its parts that are missing or of the wrong type count as absent; the
    estimator says what it lacks when it prices them)."""
    info = show.get("model_info")
    details = show.get("details")
    details = details if isinstance(details, Mapping) else {}
    tensors = show.get("tensors")
    capabilities = show.get("capabilities")
    params = modelfile_parameters(str(show.get("parameters") or ""))
    return ModelFacts(
        metadata=info if isinstance(info, Mapping) else {},
        tensors=tuple(tensors) if isinstance(tensors, list | tuple) and tensors else None,
        quantization=str(details.get("quantization_level") or ""),
        capabilities=ModelCapability.known([c for c in capabilities if isinstance(c, str)])
        if isinstance(capabilities, list | tuple) else frozenset(),
        source=digest,
        own_context=_int_param(params.get("num_ctx")),
        own_batch=_int_param(params.get("num_batch")),
    )


def facts_from_saved_show(show: Any) -> ModelFacts:
    """The facts of a show reply saved to a file (`ollama show --verbose` JSON); EstimateError when it is not
    one (no model_info object)."""
    if not isinstance(show, Mapping) or not isinstance(show.get("model_info"), dict):
        raise EstimateError("the model metadata has no model_info", "Pass the JSON the server's show reply returned.")
    return facts_from_show(show)


def shape_from_show(show: Mapping[str, Any], model_size_bytes: int) -> ModelShape:
    """Build a ModelShape from a show reply (model_info, details, tensors) and its size on disk in bytes."""
    return facts_from_saved_show(show).shape(model_size_bytes)


__all__ = ["facts_from_saved_show", "facts_from_show", "modelfile_parameters", "shape_from_show"]
