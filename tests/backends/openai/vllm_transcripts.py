"""vLLM's streamed /v1/chat/completions replies, for replay (vLLM needs a GPU and cannot run here).

Written from vLLM's source, not recorded from a running server: vllm/entrypoints/openai/serving_chat.py
(`OpenAIServingChat.chat_completion_stream_generator`; since 0.11 vllm/entrypoints/openai/chat_completion/serving.py)
and the pydantic models of vllm/entrypoints/openai/protocol.py. What they show, and these transcripts keep:
- the first event per choice carries `delta: {"role": "assistant", "content": ""}` with `logprobs` and
  `finish_reason` null (dumped with exclude_unset, so fields that were set to None appear as null);
- with `stream_options.include_usage` every choice event carries `"usage": null` (chunk.usage = None, set);
- text deltas are `{"content": "…"}`; with a reasoning parser (`--reasoning-parser qwen3`) the thinking part
  arrives as `{"reasoning_content": "…"}` in vLLM up to 0.10 and as `{"reasoning": "…"}` after the rename;
- the finish event has `finish_reason` ("stop", "length") and `stop_reason` (null, or the stop string/token);
- then one event with `"choices": []` and `usage` {prompt_tokens, total_tokens, completion_tokens}, dumped with
  exclude_none, plus `prompt_tokens_details.cached_tokens` when the server runs with
  --enable-prompt-tokens-details and the prefix cache held part of the prompt;
- then `data: [DONE]`. There are no `timings`: vLLM reports no server-side times in the stream;
- an error after the stream started is `data: {"error": {...}}` (create_streaming_error_response) then [DONE];
- an error before it is a JSON reply: 404 `{"object": "error", "message": "The model `x` does not exist.",
  "type": "NotFoundError", "param": null, "code": 404}` (ErrorResponse before 0.10; later wrapped in "error");
  401 `{"error": "Unauthorized"}` from the --api-key middleware.
"""

from __future__ import annotations

MODEL = "Qwen/Qwen3-0.6B"
ID = "chatcmpl-3f1c0a9e8b7d4c2a9e1f0b6d5c4a3b2e"
CREATED = 1764700000


def _chunk(delta: dict | None, finish: str | None = None, *, usage_on: bool = True, stop_reason: object = None,
           first: bool = False) -> dict:
    choice: dict = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = stop_reason
    out: dict = {"id": ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL, "choices": [choice]}
    if usage_on:
        out["usage"] = None
    return out


def _usage(prompt: int, completion: int, cached: int | None = None) -> dict:
    usage: dict = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {"id": ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL, "choices": [],
            "usage": usage}


# vLLM 0.9/0.10 with --reasoning-parser qwen3 --enable-prompt-tokens-details: a thinking reply, prefix cache hit.
REASONING_CONTENT = [
    _chunk({"role": "assistant", "content": ""}, first=True),
    _chunk({"reasoning_content": "The user"}),
    _chunk({"reasoning_content": " greets me."}),
    _chunk({"content": "Hello"}),
    _chunk({"content": "!"}),
    _chunk({"content": ""}, "stop"),
    _usage(prompt=21, completion=9, cached=16),
    "[DONE]",
]

# vLLM after the rename (delta.reasoning), no prompt-token details, ended by the output cap.
REASONING = [
    _chunk({"role": "assistant", "content": ""}, first=True),
    _chunk({"reasoning": "Counting"}),
    _chunk({"content": "one, two"}),
    _chunk({"content": ", three"}, "length"),
    _usage(prompt=14, completion=5),
    "[DONE]",
]

# An engine failure after the stream started.
STREAM_ERROR = [
    _chunk({"role": "assistant", "content": ""}, first=True),
    _chunk({"content": "Hel"}),
    {"error": {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB", "type": "InternalServerError",
               "param": None, "code": 500}},
    "[DONE]",
]

MODELS = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": CREATED, "owned_by": "vllm",
                                      "root": MODEL, "parent": None, "max_model_len": 8192, "permission": []}]}
NOT_FOUND = {"object": "error", "message": "The model `nope` does not exist.", "type": "NotFoundError",
             "param": None, "code": 404}
UNAUTHORIZED = {"error": "Unauthorized"}
VERSION = {"version": "0.10.1"}
