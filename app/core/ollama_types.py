"""Typed, immutable views of Ollama's API replies, and the parsers that build them.

Parsers accept decoded JSON (dicts) and raise MalformedResponse when a field Ollama always sends
is missing or has the wrong type; fields Ollama omits when empty (`omitempty` in its Go types)
become None, "" or () instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Mapping

from app.core.errors import MalformedResponse

_MISSING = object()


def _typename(types: type | tuple[type, ...]) -> str:
    names = [t.__name__ for t in (types if isinstance(types, tuple) else (types,))]
    return " or ".join({"str": "string", "int": "integer", "dict": "object", "list": "array",
                        "bool": "boolean", "float": "number"}.get(n, n) for n in names)


def _field(obj: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str,
           default: Any = _MISSING) -> Any:
    """obj[key] checked against `types`; `default` when absent/null, MalformedResponse if required."""
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise MalformedResponse(f"{where}: required field '{key}' is missing")
        return default
    wanted = types if isinstance(types, tuple) else (types,)
    # JSON true/false must not pass as a number.
    if isinstance(value, bool) and bool not in wanted:
        ok = False
    else:
        ok = isinstance(value, wanted) or (float in wanted and isinstance(value, int))
    if not ok:
        raise MalformedResponse(
            f"{where}: field '{key}' should be {_typename(types)}, got {type(value).__name__} {value!r:.60}")
    return value


def _object(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise MalformedResponse(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _str_tuple(values: Any, key: str, where: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise MalformedResponse(f"{where}: field '{key}' should be an array of strings")
    return tuple(values)


@dataclass(frozen=True)
class LocalModel:
    """A model in the local store (`/api/tags`)."""

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
    """A model loaded in memory (`/api/ps`); sizes in bytes, expires_at as Ollama wrote it."""

    name: str
    model: str
    size_bytes: int
    size_vram_bytes: int
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
        """The PROCESSOR column of `ollama ps`: "100% GPU", "100% CPU" or "48%/52% CPU/GPU"."""
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
    """`/api/show` for one model: GGUF metadata, capabilities, defaults and (maybe) tensors."""

    model_info: dict[str, Any]
    capabilities: tuple[str, ...]
    details: dict[str, Any] = field(default_factory=dict)
    parameters: str = ""
    template: str = ""
    tensors: tuple[dict[str, Any], ...] | None = None
    modified_at: str = ""

    @property
    def supports_thinking(self) -> bool:
        """True when the model accepts `think` (capability "thinking")."""
        return "thinking" in self.capabilities

    @property
    def architecture(self) -> str:
        """GGUF `general.architecture` (e.g. "qwen3"); "" when absent."""
        value = self.model_info.get("general.architecture")
        return value if isinstance(value, str) else ""

    def arch_value(self, key: str) -> Any:
        """An architecture-scoped GGUF key, e.g. arch_value("block_count") -> qwen3.block_count."""
        return self.model_info.get(f"{self.architecture}.{key}")

    def show_dict(self) -> dict[str, Any]:
        """The parts of the `/api/show` reply the estimator reads, in the reply's own shape (what
        shape_from_show and fit_verdict take, like a saved /api/show JSON): model_info, details,
        parameters, and tensors (None when the server sent none)."""
        return {"model_info": self.model_info, "details": self.details, "parameters": self.parameters,
                "tensors": list(self.tensors) if self.tensors else None}

    def parameter(self, name: str) -> str | None:
        """The first value of a Modelfile PARAMETER (e.g. "num_ctx"), as text, or None."""
        for line in self.parameters.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == name:
                return value.strip().strip('"')
        return None


@dataclass(frozen=True)
class FinalStats:
    """The statistics on a stream's last line; durations in nanoseconds, None when omitted."""

    done_reason: str | None = None
    total_duration_ns: int | None = None
    load_duration_ns: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration_ns: int | None = None
    eval_count: int | None = None
    eval_duration_ns: int | None = None

    @property
    def eval_tokens_per_s(self) -> float | None:
        """Decode rate in tokens/s (eval_count / eval_duration), None when unknown."""
        if not self.eval_count or not self.eval_duration_ns:
            return None
        return self.eval_count / self.eval_duration_ns * 1e9

    @property
    def prompt_tokens_per_s(self) -> float | None:
        """Prompt-processing rate in tokens/s, None when unknown."""
        if not self.prompt_eval_count or not self.prompt_eval_duration_ns:
            return None
        return self.prompt_eval_count / self.prompt_eval_duration_ns * 1e9


@dataclass(frozen=True)
class StreamChunk:
    """One line of a chat/generate reply; t_monotonic is when it was received (seconds)."""

    content: str
    thinking: str
    done: bool
    t_monotonic: float
    final: FinalStats | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class PullProgress:
    """One `/api/pull` progress line; total/completed in bytes, None when omitted."""

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


def _details_fields(details: Mapping[str, Any], where: str) -> dict[str, Any]:
    return {"family": _field(details, "family", str, where, ""),
            "families": _str_tuple(details.get("families"), "families", where),
            "parameter_size": _field(details, "parameter_size", str, where, ""),
            "quantization_level": _field(details, "quantization_level", str, where, ""),
            "format": _field(details, "format", str, where, "")}


def parse_version(obj: Any) -> str:
    """`/api/version` -> "0.12.6"."""
    version: str = _field(_object(obj, "/api/version"), "version", str, "/api/version")
    return version


def _model_entries(obj: Any, where: str) -> list[tuple[Mapping[str, Any], dict[str, Any]]]:
    """The `models` list of /api/tags or /api/ps: each entry with the fields both share, parsed."""
    out = []
    for entry in _field(_object(obj, where), "models", list, where, []):
        entry = _object(entry, where)
        name = _field(entry, "name", str, where)
        details = _object(_field(entry, "details", dict, where, {}), where)
        common = {"name": name, "model": _field(entry, "model", str, where, name),
                  "size_bytes": _field(entry, "size", int, where),
                  "digest": _field(entry, "digest", str, where, ""),
                  **_details_fields(details, where)}
        out.append((entry, common))
    return out


def parse_tags(obj: Any) -> list[LocalModel]:
    """`/api/tags` -> local models, in the server's order."""
    where = "/api/tags"
    return [LocalModel(modified_at=_field(entry, "modified_at", str, where, ""), **common)
            for entry, common in _model_entries(obj, where)]


def parse_ps(obj: Any) -> list[RunningModel]:
    """`/api/ps` -> loaded models, in the server's order."""
    where = "/api/ps"
    return [RunningModel(size_vram_bytes=_field(entry, "size_vram", int, where),
                         expires_at=_field(entry, "expires_at", str, where, ""),
                         context_length=_field(entry, "context_length", int, where, None), **common)
            for entry, common in _model_entries(obj, where)]


def parse_show(obj: Any) -> ModelDetails:
    """`/api/show` -> ModelDetails (tensors None when the server sent none)."""
    where = "/api/show"
    obj = _object(obj, where)
    tensors = _field(obj, "tensors", list, where, None)
    if tensors is not None:
        tensors = tuple(_object(t, where) for t in tensors)
    return ModelDetails(model_info=dict(_field(obj, "model_info", dict, where, {})),
                        capabilities=_str_tuple(obj.get("capabilities"), "capabilities", where),
                        details=dict(_field(obj, "details", dict, where, {})),
                        parameters=_field(obj, "parameters", str, where, ""),
                        template=_field(obj, "template", str, where, ""),
                        tensors=tensors,
                        modified_at=_field(obj, "modified_at", str, where, ""))


def parse_final_stats(obj: Any) -> FinalStats:
    """The statistics of a `done: true` line."""
    where = "final line"
    obj = _object(obj, where)
    return FinalStats(done_reason=_field(obj, "done_reason", str, where, None),
                      **{name: _field(obj, key, int, where, None) for name, key in (
                          ("total_duration_ns", "total_duration"), ("load_duration_ns", "load_duration"),
                          ("prompt_eval_count", "prompt_eval_count"),
                          ("prompt_eval_duration_ns", "prompt_eval_duration"),
                          ("eval_count", "eval_count"), ("eval_duration_ns", "eval_duration"))})


def parse_chat_line(obj: Any, t_monotonic: float) -> StreamChunk:
    """One `/api/chat` line (text under `message`)."""
    where = "/api/chat line"
    obj = _object(obj, where)
    done = _field(obj, "done", bool, where)
    message = _object(_field(obj, "message", dict, where, {}), where)
    return StreamChunk(content=_field(message, "content", str, where, ""),
                       thinking=_field(message, "thinking", str, where, ""), done=done,
                       t_monotonic=t_monotonic, final=parse_final_stats(obj) if done else None, raw=obj)


def parse_generate_line(obj: Any, t_monotonic: float) -> StreamChunk:
    """One `/api/generate` line (text in top-level `response`/`thinking`)."""
    where = "/api/generate line"
    obj = _object(obj, where)
    done = _field(obj, "done", bool, where)
    return StreamChunk(content=_field(obj, "response", str, where, ""),
                       thinking=_field(obj, "thinking", str, where, ""), done=done,
                       t_monotonic=t_monotonic, final=parse_final_stats(obj) if done else None, raw=obj)


def parse_pull_line(obj: Any) -> PullProgress:
    """One `/api/pull` progress line."""
    where = "/api/pull line"
    obj = _object(obj, where)
    return PullProgress(status=_field(obj, "status", str, where),
                        digest=_field(obj, "digest", str, where, None),
                        total=_field(obj, "total", int, where, None),
                        completed=_field(obj, "completed", int, where, None))


def parse_status_line(obj: Any) -> str:
    """The `status` text of a `/api/create` line."""
    status: str = _field(_object(obj, "/api/create line"), "status", str, "/api/create line")
    return status
