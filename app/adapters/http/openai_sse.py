"""OpenAI-style streamed chat replies on the wire, parsed into the app's types, for every server that speaks them.

A streamed `/v1/chat/completions` reply is Server-Sent Events: `data: {chunk}` lines (blank lines
between them are dropped by the transport), `:` comment lines as keep-alive pings, and a last
`data: [DONE]`. Text arrives in `choices[0].delta.content`; a thinking trace, where the server splits
one off, in `delta.reasoning_content` (llama-server, vLLM before 0.10, SGLang) or `delta.reasoning`
(newer vLLM, Ollama's /v1). The chunk with `finish_reason` names how the reply ended; `usage` (asked
for with `stream_options.include_usage`) arrives on the finish chunk or on a last chunk with no
choices, beside whatever records of its own a server adds (llama-server's `timings`). The `[DONE]`
event becomes the one done=True StreamChunk, carrying FinalFigures that the backend builds from them
(its `figures` callback): each server says different things about its times.

The backend keeps its own words: what a malformed byte is called (`malformed`) and what an in-band
`data: {"error": …}` event becomes (`error_for_event`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.core.errors import ServerError
from app.core.replies import ChatRequest, FinalFigures, StreamChunk

DATA_PREFIX = b"data:"
DONE_PAYLOAD = b"[DONE]"
# Where servers put a thinking trace in a delta, in the order they are read (the first one present wins).
REASONING_KEYS = ("reasoning_content", "reasoning")

Malformed = Callable[[str], ServerError]
# (finish_reason, the records kept by name: "usage" and the server's own) -> the reply's figures
FiguresMaker = Callable[[str | None, Mapping[str, Mapping[str, Any]]], FinalFigures]


def fill_chat_body(body: dict[str, Any], *, options: Mapping[str, Any] | None, names: Mapping[str, str],
                   sent: Callable[[str], bool], think: bool | str | None,
                   tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Fill a `/v1/chat/completions` body: the console's options that `sent(name)` keeps, under the server's
    `names` for them (a name not listed as it is); thinking, when asked either way, as
    `chat_template_kwargs.enable_thinking` (a level, "low" … "max", is thinking on, and goes as `reasoning_effort`
    for templates that take an effort); tools where given. Returns body."""
    for key, value in (options or {}).items():
        if value is not None and sent(key):
            body[names.get(key, key)] = value
    if think is not None:
        body["chat_template_kwargs"] = {"enable_thinking": think is not False}
        if isinstance(think, str):
            body["reasoning_effort"] = think
    if tools:
        body["tools"] = tools
    return body


def request_options(request: ChatRequest) -> dict[str, Any]:
    """A load-generator request's options in the console's names: its seed and output cap."""
    return {"seed": request.seed, "num_predict": request.max_tokens}


class Fields:
    """Reads typed fields of a server's JSON, raising the backend's `malformed` error for a wrong type."""

    def __init__(self, malformed: Malformed) -> None:
        self.malformed = malformed

    def number(self, obj: Mapping[str, Any], key: str, where: str) -> float | None:
        """obj[key] as a float (None when absent or null)."""
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.malformed(f"{where}: field '{key}' should be a number, got {type(value).__name__} "
                                 f"{value!r:.60}")
        return float(value)

    def count(self, obj: Mapping[str, Any], key: str, where: str) -> int | None:
        """obj[key] as a token count (None when absent or null)."""
        value = self.number(obj, key, where)
        if value is None:
            return None
        if not value.is_integer() or value < 0:
            raise self.malformed(f"{where}: field '{key}' should be a token count, got {value!r}")
        return int(value)

    def text(self, obj: Mapping[str, Any], key: str, where: str) -> str:
        """obj[key] as text ('' when absent or null)."""
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.malformed(f"{where}: field '{key}' should be a string, got {type(value).__name__}")
        return value

    def object(self, obj: Any, where: str) -> Mapping[str, Any]:
        """obj itself, when it is a JSON object."""
        if not isinstance(obj, Mapping):
            raise self.malformed(f"{where}: expected a JSON object, got {type(obj).__name__}")
        return obj

    def usage_counts(self, usage: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
        """(prompt_tokens, completion_tokens, cached prompt tokens) of an OpenAI `usage` record; each None where
        it is not said (`prompt_tokens_details.cached_tokens` is sent by vLLM with prefix caching and OpenAI)."""
        details = usage.get("prompt_tokens_details")
        cached = (self.count(details, "cached_tokens", "usage.prompt_tokens_details")
                  if isinstance(details, Mapping) else None)
        return (self.count(usage, "prompt_tokens", "usage"), self.count(usage, "completion_tokens", "usage"), cached)

    def model_entries(self, obj: Any, where: str = "/v1/models") -> list[Mapping[str, Any]]:
        """`/v1/models` → its `data` entries (objects with an `id` text)."""
        data = self.object(obj, where).get("data")
        if not isinstance(data, list):
            raise self.malformed(f"{where}: field 'data' should be an array")
        entries = []
        for entry in data:
            entry = self.object(entry, where)
            if not isinstance(entry.get("id"), str):
                raise self.malformed(f"{where}: a model entry has no 'id' text")
            entries.append(entry)
        return entries


class SseChatParser:
    """Turns one streamed reply's SSE lines into StreamChunks (one per `data:` event; the `[DONE]` event is
    the done=True chunk with the final figures). One parser per reply.

    server: the server's name in messages; records: the top-level objects kept for the figures ("usage" and
    the server's own, each the last one sent); figures: builds the FinalFigures from them."""

    def __init__(self, url: str, *, server: str, malformed: Malformed, error_for_event: Callable[[Any], ServerError],
                 figures: FiguresMaker, records: Sequence[str] = ("usage",)) -> None:
        self.url = url
        self.done = False
        self._server = server
        self._fields = Fields(malformed)
        self._error_for_event = error_for_event
        self._figures = figures
        self._record_names = tuple(records)
        self._finish_reason: str | None = None
        self._records: dict[str, Mapping[str, Any]] = {}
        self.events = 0  # `data:` events parsed
        self.first_other_line = b""  # the first line that was not an event (what a body that is not SSE starts with)

    def feed(self, line: bytes, t_monotonic: float, request_sent_s: float | None = None) -> StreamChunk | None:
        """The chunk of one line (None for comments, other SSE fields and anything after `[DONE]`);
        t_monotonic is when it arrived (s). An in-band error event raises its typed error."""
        line = line.rstrip(b"\r")
        if self.done or not line.startswith(DATA_PREFIX):
            if not self.first_other_line and not line.startswith(b":"):
                self.first_other_line = line[:120]
            return None  # ":" keep-alive pings, "event:"/"id:" fields
        payload = line[len(DATA_PREFIX):].strip()
        self.events += 1
        if payload == DONE_PAYLOAD:
            self.done = True
            final = self._figures(self._finish_reason, dict(self._records))
            return StreamChunk(content="", thinking="", done=True, t_monotonic=t_monotonic, final=final,
                               raw=final.raw, request_sent_s=request_sent_s)
        malformed = self._fields.malformed
        where = "/v1/chat/completions event"
        try:
            obj = json.loads(payload)
        except ValueError:
            text = payload.decode("utf-8", errors="replace")
            raise malformed(f"{self._server} at {self.url} sent an event that is not JSON: {text[:120]!r}") from None
        if not isinstance(obj, dict):
            raise malformed(f"{self._server} at {self.url} sent JSON that is not an object: {str(obj)[:120]!r}")
        if obj.get("error") is not None:
            raise self._error_for_event(obj["error"])
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
            content = self._fields.text(delta, "content", where)
            for key in REASONING_KEYS:
                thinking = self._fields.text(delta, key, where)
                if thinking:
                    break
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self._finish_reason = reason
        for key in self._record_names:
            value = obj.get(key)
            if value is not None and not isinstance(value, dict):
                raise malformed(f"{where}: field '{key}' should be an object")
            if value:
                self._records[key] = value
        return StreamChunk(content=content, thinking=thinking, done=False, t_monotonic=t_monotonic, raw=obj,
                           request_sent_s=request_sent_s)


__all__ = ["DATA_PREFIX", "DONE_PAYLOAD", "Fields", "FiguresMaker", "REASONING_KEYS", "SseChatParser", "fill_chat_body",
           "request_options"]
