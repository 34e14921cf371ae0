"""Async client for Ollama's HTTP API.

Streamed replies (chat, generate, pull, create) go through the shared streaming transport
(app.adapters.http.streaming): every line carries the time its last byte arrived and every reply
the time its request went out, so figures measured from them are the server's, not the client's
scheduling. Plain requests (version, tags, ps, show, delete, load) use httpx.

Streams are async generators: cancelling the consuming task (or `aclose()` on the generator,
e.g. through `contextlib.aclosing` when breaking out early) closes the connection at once,
which the server sees as the client going away. Every streamed line is checked for an in-band
`{"error"}`; HTTP errors keep Ollama's own message (the mapping is in ollama/stream.py).
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager, aclosing
from typing import Any, TypeVar
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence

import httpx

from app.adapters.http.server_connections import ConnectedClient
from app.backends.ollama.stream import (STREAM_HEADERS, StreamDropped, decode_line, missing_final_line,
                                        raise_for_error, require_streamable, translated_errors)
from app.backends.ollama.wire import (chat_body, parse_chat_line, parse_final, parse_generate_line, parse_ps, parse_pull_line,
                                      parse_show, parse_status_line, parse_tags, parse_version, malformed)
from app.core.errors import MalformedResponse, ModelNotFound, error_for_stream_line
from app.core.models import LocalModel, ModelDetails, PullProgress, RunningModel
from app.core.replies import ChatRequest, FinalFigures, StreamChunk

__all__ = ["OllamaClient", "StreamDropped"]

OLLAMA_BANNER = "Ollama is running"
# What the registry answers through Ollama when a name or tag does not exist.
PULL_MISSING_TEXT = "file does not exist"
T = TypeVar("T")
# (decoded line, when it arrived, when its request went out) -> item; times in seconds on the clock
LineParser = Callable[[dict[str, Any], float, float | None], T]


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class OllamaClient(ConnectedClient):
    """One Ollama base URL: pooled streaming connections and an httpx.AsyncClient, both made on
    first use (short connect, long read timeout; times on `clock`, seconds)."""

    STREAM_HEADERS = STREAM_HEADERS
    _template_counts: dict[str, int] | None = None  # per model, the prompt tokens of a chat with an empty message

    def _errors(self) -> AbstractContextManager[None]:
        return translated_errors(self.base_url, self.connect_timeout_s, self.read_timeout_s)

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        with self._errors():
            response = await self._http.request(method, path, json=body)
            await raise_for_error(response, self.base_url)
            return response

    async def _json(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = await self._request(method, path, body)
        try:
            decoded = response.json()
        except ValueError:
            raise malformed(
                f"{path} at {self.base_url} did not answer JSON: {response.text.strip()[:120]!r}") from None
        if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
            raise error_for_stream_line(decoded["error"])
        return decoded

    async def _stream(self, path: str, body: dict[str, Any], parse: LineParser[T]) -> AsyncGenerator[T, None]:
        data = json.dumps(body, ensure_ascii=False).encode()
        with self._errors():
            async with self._stream_pool().stream("POST", path, data) as lines:
                sent = lines.sent_at_s
                async for line, received in lines:
                    yield parse(decode_line(line, self.base_url), received, sent)

    async def stream_chat(self, request: ChatRequest, on_chunk: Callable[[StreamChunk], None]) -> None:
        """One streamed `/api/chat` request whose lines go to on_chunk as they are parsed, with no
        task switch per line (the load generator's way); returns once the final line arrived.
        on_chunk may raise to abort the request."""
        url = self.base_url
        sent: float | None = None
        done = False

        def on_sent(t: float) -> None:
            nonlocal sent
            sent = t

        def on_line(line: bytes, received: float) -> None:
            nonlocal done
            chunk = parse_chat_line(decode_line(line, url), received, sent)
            done = chunk.done
            on_chunk(chunk)

        data = json.dumps(chat_body(request), ensure_ascii=False).encode()
        with self._errors():
            await self._stream_pool().request("POST", "/api/chat", data, on_line, on_sent=on_sent)
        if not done:
            raise missing_final_line(url)

    # ---- plain requests ---------------------------------------------------------------------
    async def root_text(self) -> str:
        """The text of `GET /` ("Ollama is running" for a live Ollama)."""
        response = await self._request("GET", "/")
        return response.text

    async def is_ollama(self) -> bool:
        """True when the URL answers like Ollama; False for any failure (never raises)."""
        try:
            return OLLAMA_BANNER in await self.root_text()
        except Exception:  # noqa: BLE001 - a probe answers yes or no
            return False

    async def version(self) -> str:
        """The server version, e.g. "0.12.6"."""
        return parse_version(await self._json("GET", "/api/version"))

    async def tags(self) -> list[LocalModel]:
        """Local models (`/api/tags`)."""
        return parse_tags(await self._json("GET", "/api/tags"))

    async def ps(self) -> list[RunningModel]:
        """Loaded models (`/api/ps`)."""
        return parse_ps(await self._json("GET", "/api/ps"))

    async def show(self, model: str, verbose: bool = False) -> ModelDetails:
        """Model metadata (`/api/show`); ModelNotFound for an unknown model."""
        return parse_show(await self._json("POST", "/api/show", {"model": model, "verbose": verbose}))

    async def delete(self, model: str) -> None:
        """Delete a local model; ModelNotFound if it does not exist."""
        await self._request("DELETE", "/api/delete", {"model": model})

    async def load(self, model: str, keep_alive: str | int | None = None) -> FinalFigures:
        """Load a model into memory without generating (done_reason "load")."""
        body = _drop_none(model=model, keep_alive=keep_alive, stream=False)
        return parse_final(await self._json("POST", "/api/generate", body))

    async def unload(self, model: str) -> None:
        """Unload a model now (keep_alive 0)."""
        await self._json("POST", "/api/generate", {"model": model, "keep_alive": 0, "stream": False})

    # ---- prompt tokens (a probe: Ollama has no tokenizer endpoint) --------------------------------
    @property
    def counts_whole_prompts(self) -> bool:
        """False: the count is a probe's prompt_eval_count, and Ollama cuts a prompt longer than its context
        (context shift) as it would cut the request."""
        return False

    async def count_chat(self, model: str, messages: Sequence[Mapping[str, str]], *,
                         context: int | None = None) -> int:
        """A chat's prompt tokens: the prompt_eval_count of the chat sent with one output token. Its load
        options are left out but for num_ctx where a request set its own (`context`), so the model loaded
        is the one counted with, not reloaded with others."""
        options: dict[str, int] = {"num_predict": 1}
        if context is not None:
            options["num_ctx"] = context
        body = {"model": model, "messages": [dict(m) for m in messages], "stream": False, "options": options}
        count = parse_final(await self._json("POST", "/api/chat", body)).prompt_tokens
        if count is None:
            raise malformed(f"/api/chat at {self.base_url} answered without prompt_eval_count")
        return count

    async def count_text(self, model: str, text: str, *, context: int | None = None) -> int:
        """The tokens of `text` alone: a chat with it, less the same chat with an empty message (the template's)."""
        whole = await self.count_chat(model, [{"role": "user", "content": text}], context=context)
        if self._template_counts is None:
            self._template_counts = {}
        if model not in self._template_counts:
            self._template_counts[model] = await self.count_chat(model, [{"role": "user", "content": ""}],
                                                                 context=context)
        return max(0, whole - self._template_counts[model])

    # ---- streams ----------------------------------------------------------------------------
    async def chat(self, model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
                   options: dict[str, Any] | None = None, keep_alive: str | int | None = None,
                   tools: list[dict[str, Any]] | None = None) -> AsyncIterator[StreamChunk]:
        """Stream a chat reply; the last chunk has done=True and `final` statistics."""
        body = _drop_none(model=model, messages=messages, think=think, options=options,
                          keep_alive=keep_alive, tools=tools, stream=True)
        async with aclosing(self._completed(self._stream("/api/chat", body, parse_chat_line))) as chunks:
            async for chunk in chunks:
                yield chunk

    async def generate(self, model: str, prompt: str, *, system: str | None = None,
                       think: bool | str | None = None, options: dict[str, Any] | None = None,
                       keep_alive: str | int | None = None) -> AsyncIterator[StreamChunk]:
        """Stream a completion; the last chunk has done=True and `final` statistics."""
        body = _drop_none(model=model, prompt=prompt, system=system, think=think, options=options,
                          keep_alive=keep_alive, stream=True)
        async with aclosing(self._completed(self._stream("/api/generate", body, parse_generate_line))) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _completed(self, chunks: AsyncGenerator[StreamChunk, None]) -> AsyncGenerator[StreamChunk, None]:
        done = False
        async with aclosing(chunks):
            async for chunk in chunks:
                done = chunk.done
                yield chunk
        if not done:
            raise missing_final_line(self.base_url)

    async def pull(self, model: str) -> AsyncIterator[PullProgress]:
        """Stream pull progress; ModelNotFound when the registry has no such name or tag."""
        status = ""
        lines = self._stream("/api/pull", {"model": model, "stream": True}, lambda obj, _t, _s: parse_pull_line(obj))
        try:
            async with aclosing(lines):
                async for progress in lines:
                    status = progress.status
                    yield progress
        except StreamDropped:
            raise
        except Exception as exc:
            message = getattr(exc, "message", "")
            if PULL_MISSING_TEXT in message and not isinstance(exc, MalformedResponse):
                raise ModelNotFound(message, hint=f"There is no '{model}' in the registry; check the name "
                                    "and tag on ollama.com/library.", status=404) from exc
            raise
        if status != "success":
            raise StreamDropped(f"Pull of {model} from {self.base_url} ended without success", status=200)

    async def create(self, model: str, from_: str, *, parameters: dict[str, Any] | None = None,
                     quantize: str | None = None, system: str | None = None) -> AsyncIterator[str]:
        """Create `model` from `from_` with new defaults; yields Ollama's status lines."""
        body = _drop_none(model=model, **{"from": from_}, parameters=parameters, quantize=quantize,
                          system=system, stream=True)
        status = ""
        lines = self._stream("/api/create", body, lambda obj, _t, _s: parse_status_line(obj))
        async with aclosing(lines):
            async for status in lines:
                yield status
        if status != "success":
            raise StreamDropped(f"Create of {model} at {self.base_url} ended without success", status=200)


def load_client(base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                clock: Callable[[], float] = time.monotonic) -> OllamaClient:
    """The load generator's client: refuses at once a URL the streaming transport cannot use."""
    require_streamable(base_url)
    return OllamaClient(base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s, clock=clock)
