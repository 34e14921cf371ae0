"""The model-store rules of a server that serves what it was started with (one model file, or an
OpenAI-compatible server's models): no quantize targets, no variants, no pulls; each refusal in the backend's
own words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NoVariant:
    """The create-variant check on a backend that cannot create variants: always refused, with why."""

    errors: Mapping[str, str]
    warnings: Mapping[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Never: there is nothing to create."""
        return False


class FixedModelStore:
    """A ModelStoreRules that refuses what the server cannot do: `no_pulls` says where models come from instead,
    `no_variants` why no variant can be made."""

    def __init__(self, no_pulls: str, no_variants: str) -> None:
        self.no_pulls = no_pulls
        self.no_variants = no_variants

    @property
    def quantize_choices(self) -> Sequence[str]:
        """None: a quantization is a model of its own, not a variant."""
        return ()

    def check_variant(self, base: str, name: str, num_ctx: int | None, num_batch: int | None, quantize: str = "",
                      *, local_names: Set[str] = frozenset(), base_quantization: str = "",
                      training_context: int | None = None, parameter_count: int | None = None,
                      gpu_total_bytes: int | None = None) -> NoVariant:
        """Always refused (see no_variants)."""
        return NoVariant(errors={"name": self.no_variants})

    def quantization_advice(self, typed: str, parameter_count: int | None, gpu_total_bytes: int | None) -> str:
        """Nothing to advise: the quantization is whatever the served model holds."""
        return ""

    def pull_failure_hint(self, model: str, message: str) -> str:
        """Nothing is pulled; say where models come from instead."""
        return self.no_pulls

    def variant_request_text(self, body: Mapping[str, Any]) -> str:
        """There is no create request to show."""
        return self.no_variants


__all__ = ["FixedModelStore", "NoVariant"]
