"""`/api/chat` and `/api/generate` of the stand-in Ollama server: validation, load, queueing,
paced token streams and final statistics, in the order Ollama's handlers apply them."""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING, Any

from tests.fakes.ollama.fake_ollama_models import FakeModel
from tests.fakes.ollama.fake_ollama_wire import ClientGone, Exchange, parse_keep_alive, rfc3339_utc_now

if TYPE_CHECKING:
    from tests.fakes.ollama.fake_ollama import FakeOllama

THINK_LEVELS = ("high", "medium", "low")
THINK_LEVEL_FACTOR = {"low": 0.5, "medium": 1.0, "high": 2.0}
THINKING_WORDS = ("Okay,", "the", "user", "wants", "a", "short", "answer.", "Let", "me", "think",
                  "about", "what", "matters", "here:", "memory", "bandwidth", "bounds", "decode", "speed.")
ANSWER_WORDS = ("Local", "inference", "speed", "is", "mostly", "bounded", "by", "memory", "bandwidth,",
                "so", "a", "smaller", "quantization", "decodes", "faster", "on", "the", "same", "GPU.")


class Refused(Exception):
    """A request Ollama refuses before any output: an HTTP status and its error text."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _words(vocabulary: tuple[str, ...], count: int) -> list[str]:
    return [(" " if i else "") + vocabulary[i % len(vocabulary)] for i in range(count)]


def count_prompt_tokens(texts: list[str]) -> int:
    """A tokenizer stand-in: about four characters per token plus template tokens per message."""
    return sum(math.ceil(len(t) / 4) + 4 for t in texts) + 3


def _think_setting(model: FakeModel, think: Any, last_user_text: str, asked_as: str) -> float:
    """How much the model thinks (0 = not at all); raises Refused where Ollama answers 400. The real
    server names the model as the request did ("smollm2", not "smollm2:latest"), and refuses a level
    on a model without thinking as it refuses true (both recorded from 0.32.15)."""
    if think is not None and not isinstance(think, (bool, str)):
        raise Refused(400, 'think must be a boolean or string ("high", "medium", "low", true, or false)')
    if isinstance(think, str) and think not in THINK_LEVELS:
        raise Refused(400, f'invalid think value: "{think}" (must be "high", "medium", "low", true, or false)')
    if "thinking" not in model.capabilities:
        if think is True or isinstance(think, str):
            raise Refused(400, f'"{asked_as}" does not support thinking')
        return 0.0
    if isinstance(think, str) and not model.think_levels:
        raise Refused(400, f'think value "{think}" is not supported for this model')
    if think is False:
        return 0.0
    if isinstance(think, str):
        return THINK_LEVEL_FACTOR[think]
    # Qwen3's soft switch: with thinking not forced on, "/no_think" in the turn turns it off.
    if think is None and model.family == "qwen3" and "/no_think" in last_user_text:
        return 0.0
    return 1.0


def handle_inference(server: FakeOllama, ex: Exchange, body: dict[str, Any], endpoint: str) -> None:
    """Serve one chat (`endpoint="chat"`) or generate request."""
    started = time.monotonic()
    is_chat = endpoint == "chat"
    name = body.get("model") or ""
    if not name:
        raise Refused(400, "model is required") if is_chat else Refused(404, f"model '{name}' not found")
    model = server.find_model(name)
    if model is None:
        raise Refused(404, f"model '{name}' not found")
    # Replies name the model as the request did ("smollm2", not "smollm2:latest"), as recorded.
    try:
        keep_alive_s = parse_keep_alive(body["keep_alive"]) if body.get("keep_alive") is not None else None
    except ValueError as exc:
        raise Refused(400, str(exc)) from None

    if is_chat:
        messages = body.get("messages") or []
        if not isinstance(messages, list):
            raise Refused(400, "json: cannot unmarshal into Go struct field ChatRequest.messages")
        texts = [str(m.get("content", "")) for m in messages if isinstance(m, dict)]
        last_user = next((str(m.get("content", "")) for m in reversed(messages)
                          if isinstance(m, dict) and m.get("role") == "user"), "")
        empty = not messages
    else:
        prompt = str(body.get("prompt") or "")
        texts = [t for t in (str(body.get("system") or ""), prompt) if t]
        last_user, empty = prompt, not prompt

    if empty and keep_alive_s == 0:
        server.unload(model.name)
        ex.send_json(200, _final(name, is_chat, "unload", None))
        return

    think_factor = _think_setting(model, body.get("think"), last_user, name)
    if is_chat and body.get("tools") and "tools" not in model.capabilities:
        raise Refused(400, f"registry.ollama.ai/library/{model.name} does not support tools")
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise Refused(400, "json: cannot unmarshal into Go struct field options")
    num_ctx = options.get("num_ctx")
    if num_ctx is not None and (isinstance(num_ctx, bool) or not isinstance(num_ctx, (int, float))):
        # modelOptions fails inside scheduleRunner, whose fallback status is 500.
        raise Refused(500, 'option "num_ctx" must be of type integer')

    # Ollama's scheduler first finds (or loads) the model, then hands the request to its runner,
    # whose slots it waits for: OLLAMA_MAX_QUEUE bounds only the wait for a load.
    server.ensure_loaded(ex, model, num_ctx, keep_alive_s)
    server.acquire_slot(ex)
    released = False

    def release() -> None:
        # Free the slot and apply keep_alive before the final line goes out, so a client that
        # has read the reply sees the server's state after it (e.g. /api/ps after keep_alive 0).
        nonlocal released
        if not released:
            released = True
            server.release_slot()
            server.touch(model.name, keep_alive_s)

    try:
        loaded_at = time.monotonic()
        if empty:
            release()
            ex.send_json(200, _final(name, is_chat, "load", None))
            return
        _generate(server, ex, model, body, is_chat, texts, think_factor, options, started, loaded_at, release)
    finally:
        release()


def _final(model: str, is_chat: bool, reason: str, stats: dict[str, Any] | None,
           content: str = "", thinking: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "created_at": rfc3339_utc_now()}
    if is_chat:
        out["message"] = {"role": "assistant", "content": content}
        if thinking:
            out["message"]["thinking"] = thinking
    else:
        out["response"] = content
        if thinking:
            out["thinking"] = thinking
    out.update({"done": True, "done_reason": reason})
    if stats:
        out.update(stats)
    return out


def _chunk(model: str, is_chat: bool, text: str, thinking: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "created_at": rfc3339_utc_now()}
    if is_chat:
        message = {"role": "assistant", "content": "" if thinking else text}
        if thinking:
            message["thinking"] = text
        out["message"] = message
    else:
        out["response"] = "" if thinking else text
        if thinking:
            out["thinking"] = text
    out["done"] = False
    return out


def _generate(server: FakeOllama, ex: Exchange, model: FakeModel, body: dict[str, Any], is_chat: bool,
              texts: list[str], think_factor: float, options: dict[str, Any], started: float,
              loaded_at: float, release: Any) -> None:
    prompt_tokens = count_prompt_tokens(texts)
    entry = server.loaded.get(model.name)
    context = entry["context_length"] if entry is not None else None
    if context and prompt_tokens > context:
        # Context shift, as the real 0.32.15 does it: a 200 whose prompt_eval_count is what it kept (recorded:
        # 130 of 618 at a context of 256, 514 of ~5,000 at 1024), and not a word in its log.
        prompt_tokens = context // 2 + 2
    prompt_done = loaded_at + prompt_tokens / server.prompt_tokens_per_s
    ex.wait_until(prompt_done)

    pieces = [(w, True) for w in _words(THINKING_WORDS, round(server.thinking_tokens * think_factor))]
    answer = (re.findall(r"\s*\S+", server.answer_text) if server.answer_text is not None
              else _words(ANSWER_WORDS, server.answer_tokens))
    pieces += [(w, False) for w in answer]
    reason = "stop"
    num_predict = options.get("num_predict")
    if isinstance(num_predict, int) and not isinstance(num_predict, bool) and 0 <= num_predict < len(pieces):
        pieces, reason = pieces[:num_predict], "length"

    stream = body.get("stream", True) is not False
    rule = ex.rule
    decode_start = time.monotonic()
    last_token_at = decode_start
    thinking_text, content_text = [], []
    due = decode_start
    cut_at = server.unfinished_after if stream and server.unfinished_prompt and texts \
        and server.unfinished_prompt in texts[-1] else None
    for index, (text, is_thinking) in enumerate(pieces):
        if rule is not None and index == rule.after_chunks and _inject(ex, rule, stream):
            return
        if index == cut_at:
            ex.end_stream()  # the reply ends here, properly, without its final record
            return
        # Drift-free pacing: token i is due at start + i/rate, whatever the previous write cost.
        # With decode_slowdown, each step takes longer the more slots decode at once, as a
        # batched GPU does: aggregate throughput rises with parallel, sub-linearly.
        if server.decode_slowdown:
            due += (1 + server.decode_slowdown * max(0, server.active_slots - 1)) / server.tokens_per_s
            ex.wait_until(due)
        else:
            ex.wait_until(decode_start + (index + 1) / server.tokens_per_s)
        last_token_at = time.monotonic()
        (thinking_text if is_thinking else content_text).append(text)
        if stream:
            ex.stream_line(_chunk(body["model"], is_chat, text, is_thinking))
    if rule is not None and rule.after_chunks >= len(pieces) and _inject(ex, rule, stream):
        return

    end = time.monotonic()
    stats = {
        "total_duration": int((end - started) * 1e9),
        "load_duration": max(1, int((loaded_at - started) * 1e9)),
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": max(1, int((prompt_done - loaded_at) * 1e9)),
        "eval_count": len(pieces),
        "eval_duration": max(1, int((last_token_at - decode_start) * 1e9)),
    }
    # A non-streamed reply is the final line carrying the whole text.
    whole = ("", "") if stream else ("".join(content_text), "".join(thinking_text))
    final = _final(body["model"], is_chat, reason, None, *whole)
    if not is_chat:
        final["context"] = list(range(1, min(prompt_tokens + len(pieces), 64) + 1))
    final.update(stats)
    release()
    if stream:
        ex.stream_line(final)
        ex.end_stream()
    else:
        ex.send_json(200, final)


def _inject(ex: Exchange, rule: Any, stream: bool) -> bool:
    """Apply a mid-stream failure rule; True when the reply is over."""
    if rule.kind == "drop":
        ex.drop()
        return True
    if rule.kind == "unfinished" and stream:
        ex.end_stream()  # a proper end of the body, without the final record
        return True
    if rule.kind == "malformed":
        if stream:
            ex.stream_raw(rule.message.encode() + b"\n")
            ex.end_stream()
        else:
            ex.send_body(200, rule.message.encode(), "application/json; charset=utf-8")
        return True
    if stream:
        ex.stream_line({"error": rule.message})
        ex.end_stream()
    else:
        ex.send_error(500, rule.message)
    return True


def reply_refused(ex: Exchange, refused: Refused) -> None:
    """Send a refusal as Ollama does (status + `{"error"}`)."""
    ex.send_error(refused.status, refused.message)


__all__ = ["ClientGone", "Refused", "handle_inference", "reply_refused", "count_prompt_tokens"]
