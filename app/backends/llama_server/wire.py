"""llama-server's OpenAI-style JSON on the wire, parsed into the app's types.

A streamed `/v1/chat/completions` reply is Server-Sent Events: `data: {chunk}` lines (blank lines
between them are dropped by the transport), `:` comment lines as keep-alive pings, and a last
`data: [DONE]`. Text arrives in `choices[0].delta.content`; a thinking trace, split off by
`reasoning_format`, in `delta.reasoning_content`. The chunk with `finish_reason` names how the
reply ended; llama-server's `timings` (and, with `stream_options.include_usage`, `usage`) arrive
on the finish chunk or on a last chunk with no choices. The `[DONE]` event becomes the one
done=True StreamChunk, carrying FinalFigures built from all of them.

Timings → FinalFigures: prompt_n → prompt_tokens (tokens evaluated, the cached `cache_n` not
among them: that is cached_prompt_tokens), prompt_ms → prompt_ms, predicted_n → output_tokens, and decode_ms =
predicted_n × predicted_per_token_ms. Recent llama.cpp times predicted_ms over predicted_n − 1
decode steps (the first token comes from the prompt's last logits, and its time is in prompt_ms),
so predicted_n / predicted_ms would overstate the decode rate by n/(n−1); the per-token time is
the server's own and makes decode_tokens_per_s equal its predicted_per_second, on older builds
(which divide by n) too. total_ms = prompt_ms + predicted_ms, the server's time from the
request's start to its last token, which is also busy_ms (from the slot's prompt start: the time the
request waited for a slot is in neither); load_ms is None (the model is loaded at server start).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.backends.llama_server.errors import error_for_event, malformed
from app.core.replies import ChatRequest, FinalFigures, StreamChunk

DATA_PREFIX = b"data:"
DONE_PAYLOAD = b"[DONE]"
# Request options that are load settings in Ollama's terms: llama-server fixes them at start.
LOAD_OPTIONS = frozenset({"num_ctx", "num_batch", "num_gpu", "num_thread", "use_mmap", "use_mlock", "numa"})
# Ollama option names the console sends, in llama-server's words.
OPTION_NAMES = {"num_predict": "max_tokens", "temperature": "temperature", "seed": "seed", "top_k": "top_k",
                "top_p": "top_p", "min_p": "min_p", "repeat_penalty": "repeat_penalty", "stop": "stop"}
# What a chat template that can switch thinking contains (Qwen3's reads enable_thinking; others
# open a <think> block in the generation prompt).
THINKING_MARKERS = ("enable_thinking", "<think>")


def chat_body(model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
              options: Mapping[str, Any] | None = None, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The streamed `/v1/chat/completions` body: options in llama-server's names (load options such
    as num_ctx left out: they are the server's start flags), thinking through the chat template's
    `enable_thinking` and its trace split off as `reasoning_content`, usage and timings at the end."""
    body: dict[str, Any] = {"messages": messages, "stream": True, "stream_options": {"include_usage": True},
                            "reasoning_format": "deepseek"}
    if model:
        body["model"] = model
    for key, value in (options or {}).items():
        if value is None or key in LOAD_OPTIONS:
            continue
        body[OPTION_NAMES.get(key, key)] = value
    if think is not None:
        # A level ("low" … "max") is thinking on; templates that take an effort read reasoning_effort.
        body["chat_template_kwargs"] = {"enable_thinking": think is not False}
        if isinstance(think, str):
            body["reasoning_effort"] = think
    if tools:
        body["tools"] = tools
    return body


def request_body(request: ChatRequest) -> dict[str, Any]:
    """The body of a load-generator request: its seed and output cap, `think` only when set."""
    options = {"seed": request.seed, "num_predict": request.max_tokens}
    return chat_body(request.model, [dict(m) for m in request.messages], think=request.think, options=options)


def _number(obj: Mapping[str, Any], key: str, where: str) -> float | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise malformed(f"{where}: field '{key}' should be a number, got {type(value).__name__} {value!r:.60}")
    return float(value)


def _count(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    value = _number(obj, key, where)
    if value is None:
        return None
    if not value.is_integer() or value < 0:
        raise malformed(f"{where}: field '{key}' should be a token count, got {value!r}")
    return int(value)


def final_figures(finish_reason: str | None, timings: Mapping[str, Any] | None,
                  usage: Mapping[str, Any] | None) -> FinalFigures:
    """A finished reply's figures from its finish_reason, `timings` and `usage` (ms, tokens); the
    server's records kept raw. Without timings the token counts come from usage, times are None."""
    where = "timings"
    timings = timings or {}
    usage = usage or {}
    prompt_tokens = _count(timings, "prompt_n", where)
    output_tokens = _count(timings, "predicted_n", where)
    if prompt_tokens is None:
        prompt_tokens = _count(usage, "prompt_tokens", "usage")
    if output_tokens is None:
        output_tokens = _count(usage, "completion_tokens", "usage")
    cached = _count(timings, "cache_n", where)
    prompt_ms = _number(timings, "prompt_ms", where)
    predicted_ms = _number(timings, "predicted_ms", where)
    per_token_ms = _number(timings, "predicted_per_token_ms", where)
    decode_ms = None
    if output_tokens and per_token_ms:
        decode_ms = output_tokens * per_token_ms
    elif per_token_ms is None and predicted_ms:
        decode_ms = predicted_ms  # a build without the per-token figure: its own window, as it is
    total_ms = None if prompt_ms is None or predicted_ms is None else prompt_ms + predicted_ms
    raw: dict[str, Any] = {"finish_reason": finish_reason, "timings": dict(timings), "usage": dict(usage)}
    return FinalFigures(done_reason=finish_reason, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                        prompt_ms=prompt_ms, decode_ms=decode_ms, load_ms=None, total_ms=total_ms,
                        cached_prompt_tokens=cached, busy_ms=total_ms, raw=raw)


def _text(delta: Mapping[str, Any], key: str, where: str) -> str:
    value = delta.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise malformed(f"{where}: field '{key}' should be a string, got {type(value).__name__}")
    return value


class SseChatParser:
    """Turns one streamed reply's SSE lines into StreamChunks (one per `data:` event; the
    `[DONE]` event is the done=True chunk with the final figures). One parser per reply."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.done = False
        self._finish_reason: str | None = None
        self._timings: Mapping[str, Any] | None = None
        self._usage: Mapping[str, Any] | None = None

    def feed(self, line: bytes, t_monotonic: float, request_sent_s: float | None = None) -> StreamChunk | None:
        """The chunk of one line (None for comments, other SSE fields and anything after `[DONE]`);
        t_monotonic is when it arrived (s). An in-band error event raises its typed error."""
        line = line.rstrip(b"\r")
        if self.done or not line.startswith(DATA_PREFIX):
            return None  # ":" keep-alive pings, "event:"/"id:" fields
        payload = line[len(DATA_PREFIX):].strip()
        if payload == DONE_PAYLOAD:
            self.done = True
            final = final_figures(self._finish_reason, self._timings, self._usage)
            return StreamChunk(content="", thinking="", done=True, t_monotonic=t_monotonic, final=final,
                               raw=final.raw, request_sent_s=request_sent_s)
        where = "/v1/chat/completions event"
        try:
            obj = json.loads(payload)
        except ValueError:
            text = payload.decode("utf-8", errors="replace")
            raise malformed(f"llama-server at {self.url} sent an event that is not JSON: {text[:120]!r}") from None
        if not isinstance(obj, dict):
            raise malformed(f"llama-server at {self.url} sent JSON that is not an object: {str(obj)[:120]!r}")
        if obj.get("error") is not None:
            raise error_for_event(obj["error"])
        content = thinking = ""
        choices = obj.get("choices") or []
        if not isinstance(choices, list):
            raise malformed(f"{where}: field 'choices' should be an array")
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                raise malformed(f"{where}: a choice is not an object")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise malformed(f"{where}: field 'delta' should be an object")
            content = _text(delta, "content", where)
            thinking = _text(delta, "reasoning_content", where)
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self._finish_reason = reason
        for key in ("timings", "usage"):
            value = obj.get(key)
            if value is not None and not isinstance(value, dict):
                raise malformed(f"{where}: field '{key}' should be an object")
        self._timings = obj.get("timings") or self._timings
        self._usage = obj.get("usage") or self._usage
        return StreamChunk(content=content, thinking=thinking, done=False, t_monotonic=t_monotonic, raw=obj,
                           request_sent_s=request_sent_s)


def thinking_support(chat_template: str) -> tuple[bool, str]:
    """Whether a chat template can switch thinking, and when not, why (for the console's switch)."""
    if not chat_template:
        return False, ("llama-server reports no chat template for this model, so thinking cannot be switched "
                       "(enable_thinking is not sent).")
    if any(marker in chat_template for marker in THINKING_MARKERS):
        return True, ""
    return False, ("this model's chat template has no thinking mode (it reads neither enable_thinking nor a "
                   "<think> block), so thinking is not sent.")


def _object(obj: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise malformed(f"{where}: expected a JSON object, got {type(obj).__name__}")
    return obj


def parse_props(obj: Any) -> dict[str, Any]:
    """`/props` → its fields, checked where they are used: model_path and chat_template (text),
    total_slots (count), build_info (text), slot_context (default_generation_settings.n_ctx: tokens per
    slot); missing ones are "" or None."""
    where = "/props"
    props = dict(_object(obj, where))
    for key in ("model_path", "chat_template", "build_info", "model_alias"):
        value = props.get(key)
        if value is not None and not isinstance(value, str):
            raise malformed(f"{where}: field '{key}' should be a string, got {type(value).__name__}")
        props[key] = value or ""
    props["total_slots"] = _count(props, "total_slots", where)
    generation = props.get("default_generation_settings")
    props["slot_context"] = (_count(generation, "n_ctx", f"{where} default_generation_settings")
                             if isinstance(generation, Mapping) else None)
    return props


def parse_models(obj: Any) -> list[dict[str, Any]]:
    """`/v1/models` → its `data` entries: {id, meta{n_params, size, ftype, n_ctx_train, …}}."""
    where = "/v1/models"
    data = _object(obj, where).get("data")
    if not isinstance(data, list):
        raise malformed(f"{where}: field 'data' should be an array")
    out = []
    for entry in data:
        entry = _object(entry, where)
        if not isinstance(entry.get("id"), str):
            raise malformed(f"{where}: a model entry has no 'id' text")
        meta = entry.get("meta")
        out.append({"id": entry["id"], "meta": dict(meta) if isinstance(meta, Mapping) else {}})
    return out


__all__ = ["SseChatParser", "chat_body", "final_figures", "parse_models", "parse_props", "request_body",
           "thinking_support"]
