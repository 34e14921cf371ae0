"""The OpenAI chat API on the wire for any compatible server: the request body, and a streamed reply's figures.

The body is what every such server takes: `model`, `messages`, `"stream": true` with
`stream_options.include_usage` (the token counts arrive on a last chunk), and only the standard
sampling fields (max_tokens, temperature, seed, top_p, stop); Ollama's load options (num_ctx,
num_batch, …) are the server's start settings and are left out, and non-standard ones (top_k, min_p,
repeat_penalty) too, since a strict server refuses what it does not know. Thinking, when asked for
either way, goes as `chat_template_kwargs.enable_thinking` (read by vLLM, SGLang and llama-server and
handed to the model's chat template: Qwen3's and others' take it) and a level as `reasoning_effort`;
a server or template that ignores it thinks as it would anyway.

The stream is parsed by app.adapters.http.openai_sse (deltas with `reasoning_content` or `reasoning`);
its figures come from `usage` alone, because that is all the API defines:
- prompt_tokens: the tokens the server evaluated, i.e. usage.prompt_tokens less the cached ones where
  usage.prompt_tokens_details.cached_tokens says how many (cached_prompt_tokens), else all of them;
- output_tokens: usage.completion_tokens (thinking included);
- done_reason: the last finish_reason;
- prompt_ms, decode_ms, load_ms, total_ms, busy_ms: None. The API has no server-side times (vLLM sends
  none); the client's own times (first token, inter-token gaps, end to end) are measured from the
  stamped arrival times of the chunks, as for every backend, by the console and the load generator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.adapters.http.openai_sse import Fields, fill_chat_body, request_options
from app.adapters.http.openai_sse import SseChatParser as SharedParser
from app.backends.openai.errors import SERVER, error_for_event, malformed
from app.core.replies import ChatRequest, FinalFigures

# Ollama option names the console sends, in the OpenAI API's words; anything else is not sent.
OPTION_NAMES = {"num_predict": "max_tokens", "temperature": "temperature", "seed": "seed", "top_p": "top_p",
                "stop": "stop"}

_FIELDS = Fields(malformed)


def chat_body(model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
              options: Mapping[str, Any] | None = None, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The streamed `/v1/chat/completions` body (see the module docstring for what is sent and what not)."""
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True,
                            "stream_options": {"include_usage": True}}
    return fill_chat_body(body, options=options, names=OPTION_NAMES, sent=OPTION_NAMES.__contains__, think=think,
                          tools=tools)


def request_body(request: ChatRequest) -> dict[str, Any]:
    """The body of a load-generator request: its seed and output cap, thinking only when set."""
    return chat_body(request.model, [dict(m) for m in request.messages], think=request.think,
                     options=request_options(request))


def final_figures(finish_reason: str | None, usage: Mapping[str, Any] | None) -> FinalFigures:
    """A finished reply's figures from its finish_reason and `usage` (tokens); no times (see the module docstring)."""
    usage = usage or {}
    prompt, completion, cached = _FIELDS.usage_counts(usage)
    evaluated = prompt - cached if prompt is not None and cached is not None and cached <= prompt else prompt
    raw: dict[str, Any] = {"finish_reason": finish_reason, "usage": dict(usage)}
    return FinalFigures(done_reason=finish_reason, prompt_tokens=evaluated, output_tokens=completion,
                        cached_prompt_tokens=cached, raw=raw)


def _figures(finish_reason: str | None, records: Mapping[str, Mapping[str, Any]]) -> FinalFigures:
    return final_figures(finish_reason, records.get("usage"))


def parser(url: str) -> SharedParser:
    """The parser of one streamed reply from the server at url."""
    return SharedParser(url, server=SERVER, malformed=malformed, error_for_event=error_for_event, figures=_figures)


def model_ids(obj: Any) -> list[Mapping[str, Any]]:
    """`/v1/models` → its entries (each with an `id`; `owned_by`, `created`, `max_model_len` where sent)."""
    return _FIELDS.model_entries(obj)


__all__ = ["chat_body", "final_figures", "model_ids", "parser", "request_body"]
