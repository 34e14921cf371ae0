"""Ollama's JSON on the wire, parsed into the app's types.

Parsers accept decoded JSON (dicts) and raise MalformedResponse when a field Ollama always sends
is missing or has the wrong type; fields Ollama omits when empty (`omitempty` in its Go types)
become None, "" or () instead. A stream's final line becomes neutral FinalFigures (tokens, ms)
with Ollama's own record kept beside them.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

from app.backends.ollama.show import facts_from_show
from app.core.errors import MalformedResponse
from app.core.models import LocalModel, ModelDetails, PullProgress, RunningModel
from app.core.replies import ChatRequest, FinalFigures, StreamChunk

NS_PER_MS = 1e6
# The final line's text fields (empty by then) are not figures: the raw record keeps the rest.
_TEXT_KEYS = ("message", "response", "thinking")
_MISSING = object()
MALFORMED_HINT = "The server sent something that is not Ollama's API; check that host:port is Ollama."


def malformed(message: str, status: int | None = None) -> MalformedResponse:
    """The server's bytes are not what Ollama sends."""
    return MalformedResponse(message, hint=MALFORMED_HINT, status=status)


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
            raise malformed(f"{where}: required field '{key}' is missing")
        return default
    wanted = types if isinstance(types, tuple) else (types,)
    # JSON true/false must not pass as a number.
    if isinstance(value, bool) and bool not in wanted:
        ok = False
    else:
        ok = isinstance(value, wanted) or (float in wanted and isinstance(value, int))
    if not ok:
        raise malformed(
            f"{where}: field '{key}' should be {_typename(types)}, got {type(value).__name__} {value!r:.60}")
    return value


def _object(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise malformed(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _str_tuple(values: Any, key: str, where: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise malformed(f"{where}: field '{key}' should be an array of strings")
    return tuple(values)


def _details_fields(details: Mapping[str, Any], where: str) -> dict[str, Any]:
    return {"family": _field(details, "family", str, where, ""),
            "families": _str_tuple(details.get("families"), "families", where),
            "parameter_size": _field(details, "parameter_size", str, where, ""),
            "quantization_level": _field(details, "quantization_level", str, where, ""),
            "format": _field(details, "format", str, where, "")}


def chat_body(request: ChatRequest) -> dict[str, Any]:
    """The streamed `/api/chat` JSON body of a request: its seed and output cap as options, `think`
    only when set (omitted, the model decides), and no num_ctx (that would reload the model)."""
    options: dict[str, Any] = {}
    if request.seed is not None:
        options["seed"] = request.seed
    if request.max_tokens is not None:
        options["num_predict"] = request.max_tokens
    body: dict[str, Any] = {"model": request.model, "messages": [dict(m) for m in request.messages],
                            "stream": True, "options": options}
    if request.think is not None:
        body["think"] = request.think
    return body


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
                        modified_at=_field(obj, "modified_at", str, where, ""),
                        facts=facts_from_show(obj))


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / NS_PER_MS


def _busy_ms(prompt_ns: int | None, eval_ns: int | None) -> float | None:
    """The runner's time from starting the prompt to the last token: its prompt and generation windows."""
    return None if prompt_ns is None or eval_ns is None else (prompt_ns + eval_ns) / NS_PER_MS


def parse_final(obj: Any) -> FinalFigures:
    """The figures of a `done: true` line in neutral units (Ollama's nanoseconds to ms), its record kept raw.
    prompt_eval_count counts every prompt token the runner used, those its cache served included (their
    prompt_eval_duration is not: a repeated prompt counts the same in a fraction of the time), and nothing says
    how many came from the cache: cached_prompt_tokens stays None. total_duration also holds the wait for the
    scheduler and the runner's slot; busy_ms leaves them out."""
    where = "final line"
    obj = _object(obj, where)
    ns = {key: _field(obj, key, int, where, None)
          for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")}
    return FinalFigures(done_reason=_field(obj, "done_reason", str, where, None),
                        prompt_tokens=_field(obj, "prompt_eval_count", int, where, None),
                        output_tokens=_field(obj, "eval_count", int, where, None),
                        prompt_ms=_ms(ns["prompt_eval_duration"]), decode_ms=_ms(ns["eval_duration"]),
                        load_ms=_ms(ns["load_duration"]), total_ms=_ms(ns["total_duration"]),
                        busy_ms=_busy_ms(ns["prompt_eval_duration"], ns["eval_duration"]),
                        raw={k: v for k, v in obj.items() if k not in _TEXT_KEYS})


def parse_chat_line(obj: Any, t_monotonic: float, request_sent_s: float | None = None) -> StreamChunk:
    """One `/api/chat` line (text under `message`); t_monotonic is when it arrived (s)."""
    where = "/api/chat line"
    obj = _object(obj, where)
    done = _field(obj, "done", bool, where)
    message = _object(_field(obj, "message", dict, where, {}), where)
    return StreamChunk(content=_field(message, "content", str, where, ""),
                       thinking=_field(message, "thinking", str, where, ""), done=done,
                       t_monotonic=t_monotonic, final=parse_final(obj) if done else None, raw=obj,
                       request_sent_s=request_sent_s)


def parse_generate_line(obj: Any, t_monotonic: float, request_sent_s: float | None = None) -> StreamChunk:
    """One `/api/generate` line (text in top-level `response`/`thinking`); t_monotonic is when it arrived (s)."""
    where = "/api/generate line"
    obj = _object(obj, where)
    done = _field(obj, "done", bool, where)
    return StreamChunk(content=_field(obj, "response", str, where, ""),
                       thinking=_field(obj, "thinking", str, where, ""), done=done,
                       t_monotonic=t_monotonic, final=parse_final(obj) if done else None, raw=obj,
                       request_sent_s=request_sent_s)


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


__all__ = ["parse_chat_line", "parse_final", "parse_generate_line", "parse_ps", "parse_pull_line", "parse_show",
           "parse_status_line", "parse_tags", "parse_version"]
