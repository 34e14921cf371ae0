"""Async client for Ollama's HTTP API (httpx).

Streams are async generators: cancelling the consuming task (or `aclose()` on the generator,
e.g. through `contextlib.aclosing` when breaking out early) closes the HTTP response at once,
which the server sees as the client going away. Every streamed line is checked for an in-band
`{"error"}`; HTTP errors keep Ollama's own message (see ollama_stream for the error mapping).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, aclosing
from typing import Any, TypeVar
from collections.abc import AsyncIterator, Callable

import httpx

from app.backends.ollama.stream import StreamDropped, ndjson_objects, raise_for_error, translated_errors
from app.core.errors import MalformedResponse, ModelNotFound, error_for_stream_line
from app.core.ollama_types import (FinalStats, LocalModel, ModelDetails, PullProgress, RunningModel,
                                   StreamChunk, parse_chat_line, parse_generate_line,
                                   parse_final_stats, parse_ps, parse_pull_line, parse_show,
                                   parse_status_line, parse_tags, parse_version)

__all__ = ["OllamaClient", "StreamDropped"]

OLLAMA_BANNER = "Ollama is running"
# What the registry answers through Ollama when a name or tag does not exist.
PULL_MISSING_TEXT = "file does not exist"
T = TypeVar("T")


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class OllamaClient:
    """One httpx.AsyncClient bound to an Ollama base URL (short connect, long read timeout)."""

    def __init__(self, base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        timeout = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s,
                                write=read_timeout_s, pool=read_timeout_s)
        # trust_env=False: a desktop's HTTP(S)_PROXY must not reroute calls to a local server.
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                       trust_env=False)

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> OllamaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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
            raise MalformedResponse(
                f"{path} at {self.base_url} did not answer JSON: {response.text.strip()[:120]!r}") from None
        if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
            raise error_for_stream_line(decoded["error"])
        return decoded

    async def _stream(self, path: str, body: dict[str, Any], parse: Callable[[dict[str, Any], float], T]
                      ) -> AsyncIterator[T]:
        with self._errors():
            async with self._http.stream("POST", path, json=body) as response:
                await raise_for_error(response, self.base_url)
                async for obj, received in ndjson_objects(response, self.base_url):
                    yield parse(obj, received)

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

    async def load(self, model: str, keep_alive: str | int | None = None) -> FinalStats:
        """Load a model into memory without generating (done_reason "load")."""
        body = _drop_none(model=model, keep_alive=keep_alive, stream=False)
        return parse_final_stats(await self._json("POST", "/api/generate", body))

    async def unload(self, model: str) -> None:
        """Unload a model now (keep_alive 0)."""
        await self._json("POST", "/api/generate", {"model": model, "keep_alive": 0, "stream": False})

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

    async def _completed(self, chunks: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
        done = False
        async with aclosing(chunks):
            async for chunk in chunks:
                done = chunk.done
                yield chunk
        if not done:
            raise StreamDropped(f"Ollama at {self.base_url} ended the reply without its final line", status=200)

    async def pull(self, model: str) -> AsyncIterator[PullProgress]:
        """Stream pull progress; ModelNotFound when the registry has no such name or tag."""
        status = ""
        lines = self._stream("/api/pull", {"model": model, "stream": True}, lambda obj, _t: parse_pull_line(obj))
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
        lines = self._stream("/api/create", body, lambda obj, _t: parse_status_line(obj))
        async with aclosing(lines):
            async for status in lines:
                yield status
        if status != "success":
            raise StreamDropped(f"Create of {model} at {self.base_url} ended without success", status=200)
