"""llama-server's OpenAI-style JSON on the wire, parsed into the app's types.

A streamed `/v1/chat/completions` reply (parsed by app.adapters.http.openai_sse, shared with the
openai backend) is Server-Sent Events: `data: {chunk}` lines (blank lines
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

from collections.abc import Mapping
from typing import Any

from app.adapters.http import openai_sse
from app.adapters.http.openai_sse import Fields, fill_chat_body, request_options
from app.backends.llama_server.errors import SERVER, error_for_event, malformed
from app.core.replies import ChatRequest, FinalFigures

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
    return fill_chat_body(body, options=options, names=OPTION_NAMES, sent=lambda key: key not in LOAD_OPTIONS,
                          think=think, tools=tools)


def request_body(request: ChatRequest) -> dict[str, Any]:
    """The body of a load-generator request: its seed and output cap, `think` only when set."""
    return chat_body(request.model, [dict(m) for m in request.messages], think=request.think,
                     options=request_options(request))


_FIELDS = Fields(malformed)
_number = _FIELDS.number
_count = _FIELDS.count


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


class SseChatParser(openai_sse.SseChatParser):
    """Turns one streamed reply's SSE lines into StreamChunks (one per `data:` event; the
    `[DONE]` event is the done=True chunk with the final figures, from its `timings` and `usage`).
    One parser per reply; the parsing shared by every OpenAI-style server is in app.adapters.http.openai_sse."""

    def __init__(self, url: str) -> None:
        super().__init__(url, server=SERVER, malformed=malformed, error_for_event=error_for_event,
                         figures=_figures, records=("timings", "usage"))


def _figures(finish_reason: str | None, records: Mapping[str, Mapping[str, Any]]) -> FinalFigures:
    return final_figures(finish_reason, records.get("timings"), records.get("usage"))


def thinking_support(chat_template: str) -> tuple[bool, str]:
    """Whether a chat template can switch thinking, and when not, why (for the console's switch)."""
    if not chat_template:
        return False, ("llama-server reports no chat template for this model, so thinking cannot be switched "
                       "(enable_thinking is not sent).")
    if any(marker in chat_template for marker in THINKING_MARKERS):
        return True, ""
    return False, ("this model's chat template has no thinking mode (it reads neither enable_thinking nor a "
                   "<think> block), so thinking is not sent.")


def parse_props(obj: Any) -> dict[str, Any]:
    """`/props` → its fields, checked where they are used: model_path and chat_template (text),
    total_slots (count), build_info (text), slot_context (default_generation_settings.n_ctx: tokens per
    slot); missing ones are "" or None."""
    where = "/props"
    props = dict(_FIELDS.object(obj, where))
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
    out = []
    for entry in _FIELDS.model_entries(obj):
        meta = entry.get("meta")
        out.append({"id": entry["id"], "meta": dict(meta) if isinstance(meta, Mapping) else {}})
    return out


__all__ = ["SseChatParser", "chat_body", "final_figures", "parse_models", "parse_props", "request_body",
           "thinking_support"]
