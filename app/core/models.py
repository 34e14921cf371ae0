"""Typed, immutable views of what a server's model store lists: local and loaded models, model
details, pull progress. Each backend's parsers build them from its own replies (in its folder under
app/backends/); a streamed reply's lines and final figures are neutral (app/core/replies.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from app.core.model_facts import ModelFacts


@dataclass(frozen=True)
class LocalModel:
    """A model in the server's local store."""

    name: str
    model: str
    size_bytes: int
    digest: str
    modified_at: str
    family: str = ""
    families: tuple[str, ...] = ()
    parameter_size: str = ""
    quantization_level: str = ""
    format: str = ""


@dataclass(frozen=True)
class RunningModel:
    """A model loaded in memory; sizes in bytes (None: the server does not report them, as a one-model
    server may not), expires_at as the server wrote it."""

    name: str
    model: str
    size_bytes: int | None
    size_vram_bytes: int | None
    digest: str = ""
    expires_at: str = ""
    context_length: int | None = None
    family: str = ""
    families: tuple[str, ...] = ()
    parameter_size: str = ""
    quantization_level: str = ""
    format: str = ""

    @property
    def processor(self) -> str:
        """Where the model sits, as a server's process list writes it: "100% GPU", "100% CPU" or
        "48%/52% CPU/GPU"; "" when the server does not report the sizes."""
        if self.size_bytes is None or self.size_vram_bytes is None:
            return ""
        if self.size_vram_bytes == 0:
            return "100% CPU"
        if self.size_vram_bytes == self.size_bytes:
            return "100% GPU"
        if self.size_vram_bytes > self.size_bytes or self.size_bytes == 0:
            return "Unknown"
        # Go's math.Round: halves away from zero.
        cpu = math.floor((self.size_bytes - self.size_vram_bytes) / self.size_bytes * 100 + 0.5)
        return f"{cpu}%/{100 - cpu}% CPU/GPU"


@dataclass(frozen=True)
class ModelDetails:
    """What the server shows of one model: GGUF metadata, capabilities, defaults and (maybe) tensors."""

    model_info: dict[str, Any]
    capabilities: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)
    parameters: str = ""
    template: str = ""
    tensors: tuple[dict[str, Any], ...] | None = None
    modified_at: str = ""
    facts: ModelFacts = field(default_factory=ModelFacts)  # what the estimator prices, built by the backend

    @property
    def supports_thinking(self) -> bool:
        """True when the model accepts `think` (capability "thinking")."""
        return "thinking" in self.capabilities

    def why_no_thinking(self) -> str:
        """Why the model cannot think, in the server's words where it gave them (details["thinking_reason"],
        e.g. what its chat template lacks), else from its capabilities; '' when it can."""
        if self.supports_thinking:
            return ""
        why = self.details.get("thinking_reason")
        if isinstance(why, str) and why:
            return why
        caps = ", ".join(self.capabilities) or "none listed"
        return f"it has no \"thinking\" capability (the server lists: {caps})"

    @property
    def architecture(self) -> str:
        """GGUF `general.architecture` (e.g. "qwen3"); "" when absent."""
        value = self.model_info.get("general.architecture")
        return value if isinstance(value, str) else ""

    def arch_value(self, key: str) -> Any:
        """An architecture-scoped GGUF key, e.g. arch_value("block_count") -> qwen3.block_count."""
        return self.model_info.get(f"{self.architecture}.{key}")

    def parameter(self, name: str) -> str | None:
        """The first value of a Modelfile PARAMETER (e.g. "num_ctx"), as text, or None."""
        for line in self.parameters.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == name:
                return value.strip().strip('"')
        return None


@dataclass(frozen=True)
class PullProgress:
    """One line of a pull's progress; total/completed in bytes, None when omitted."""

    status: str
    digest: str | None = None
    total: int | None = None
    completed: int | None = None

    @property
    def fraction(self) -> float | None:
        """Share of this blob downloaded (0..1), None when no total is known."""
        if not self.total:
            return None
        return min(1.0, (self.completed or 0) / self.total)


__all__ = ["LocalModel", "ModelDetails", "PullProgress", "RunningModel"]
