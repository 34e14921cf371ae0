"""What a model is, in neutral terms: the facts the memory estimator and the pages need, whichever server
showed them.

Every server this app drives runs GGUF models (llama.cpp's format), so the facts carry the model's GGUF
key/values and, when the server listed them, its tensors; each backend fills them from its own source
(a server's model-metadata reply, a GGUF file's header). The shape the estimator prices is read from them
by `ModelFacts.shape` (app/core/model_shape.py); a model the estimator cannot read raises EstimateError
there, not when the facts are built, so a model of an unknown architecture still lists and chats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.core.model_shape import MAX_CONTEXT, ModelShape, shape_from_gguf


class ModelCapability(StrEnum):
    """What a model can do, as the servers name it."""

    COMPLETION = "completion"
    THINKING = "thinking"
    TOOLS = "tools"
    VISION = "vision"
    EMBEDDING = "embedding"
    INSERT = "insert"

    @classmethod
    def known(cls, names: tuple[str, ...] | list[str]) -> frozenset[ModelCapability]:
        """The capabilities among `names` this type knows (a server's new ones are left out)."""
        values = {c.value for c in cls}
        return frozenset(cls(n) for n in names if n in values)


@dataclass(frozen=True)
class ModelFacts:
    """A model's facts: GGUF metadata, tensors (None when the server did not list them), quantization,
    capabilities, size on disk (None when the source does not say it: take it from the model list), where
    it comes from (a file's path or the server's digest) and the model's own defaults for a request's
    context and batch (None when it sets none)."""

    metadata: Mapping[str, Any] = field(default_factory=dict)
    tensors: tuple[Mapping[str, Any], ...] | None = None  # {name, type, shape}, shapes in GGML order
    quantization: str = ""
    capabilities: frozenset[ModelCapability] = frozenset()
    size_bytes: int | None = None
    source: str = ""
    own_context: int | None = None
    own_batch: int | None = None

    @property
    def architecture(self) -> str:
        """GGUF `general.architecture` (e.g. "qwen3"); "" when absent."""
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else ""

    @property
    def parameter_count(self) -> int | None:
        """GGUF `general.parameter_count`, None when absent."""
        value = self.metadata.get("general.parameter_count")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    @property
    def training_context(self) -> int | None:
        """The context the model was trained on (`<arch>.context_length`, tokens), None when not known."""
        value = self.metadata.get(f"{self.architecture}.context_length")
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_CONTEXT:
            return value
        return None

    def can(self, capability: ModelCapability) -> bool:
        """True when the model has `capability`."""
        return capability in self.capabilities

    def shape(self, size_bytes: int | None = None) -> ModelShape:
        """The shape the estimator prices; `size_bytes` (on disk, e.g. from the model list) splits the weights
        when there is no tensor list, default the facts' own size. EstimateError when it cannot be read."""
        size = self.size_bytes if size_bytes is None else size_bytes
        return shape_from_gguf(self.metadata, self.tensors, self.quantization, size if size is not None else 0)


__all__ = ["ModelCapability", "ModelFacts"]
