"""The streamed half of a client for a server that speaks OpenAI's `/v1/chat/completions` with SSE.

Both ways the app reads a reply go over the shared streaming transport (streaming.py), so every event
carries the kernel's arrival time and every reply the time its request left: `_stream(body)` yields
StreamChunks for the console, `stream_chat(request, on_chunk)` hands them to a callback with no task
switch per event for the load generator. A backend says how its server is parsed (`_parser`), how its
failures read (`_errors`, `_missing_done`, `_from_body`, `_malformed`) and what a load-generator request's
body is (`_request_body`). Plain JSON requests (`_json`) go through httpx.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractContextManager
from typing import Any

from app.adapters.http.openai_sse import SseChatParser
from app.adapters.http.server_connections import ConnectedClient
from app.core.errors import ServerError
from app.core.replies import ChatRequest, StreamChunk

CHAT_PATH = "/v1/chat/completions"


class SseChatClient(ConnectedClient):
    """A ConnectedClient that streams OpenAI-style chat replies; subclasses fill in the hooks."""

    def _parser(self) -> SseChatParser:
        raise NotImplementedError

    def _errors(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _missing_done(self, parser: SseChatParser) -> ServerError:
        raise NotImplementedError

    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _from_body(self, status: int, body: bytes) -> ServerError:
        """The typed error of an error reply to a plain request."""
        raise NotImplementedError

    def _malformed(self, message: str) -> ServerError:
        raise NotImplementedError

    async def _json(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """GET `path` (POST `body` as JSON where one is given) and read its JSON reply; errors typed."""
        with self._errors():
            response = await (self._http.get(path) if body is None else self._http.post(path, json=body))
            if response.status_code >= 400:
                raise self._from_body(response.status_code, await response.aread())
        try:
            return response.json()
        except ValueError:
            raise self._malformed(f"{path} at {self.base_url} did not answer JSON: "
                                  f"{response.text.strip()[:120]!r}") from None

    async def _stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamChunk, None]:
        """POST body to the chat path and yield each event's chunk as it arrives; the last has done=True."""
        parser = self._parser()
        data = json.dumps(body, ensure_ascii=False).encode()
        with self._errors():
            async with self._stream_pool().stream("POST", CHAT_PATH, data) as lines:
                sent = lines.sent_at_s
                async for line, received in lines:
                    chunk = parser.feed(line, received, sent)
                    if chunk is not None:
                        yield chunk
        if not parser.done:
            raise self._missing_done(parser)

    async def stream_chat(self, request: ChatRequest, on_chunk: Callable[[StreamChunk], None]) -> None:
        """One streamed request whose events go to on_chunk as they are parsed, with no task switch
        per event (the load generator's way); returns once `data: [DONE]` arrived. on_chunk may
        raise to abort the request."""
        parser = self._parser()
        sent: float | None = None

        def on_sent(t: float) -> None:
            nonlocal sent
            sent = t

        def on_line(line: bytes, received: float) -> None:
            chunk = parser.feed(line, received, sent)
            if chunk is not None:
                on_chunk(chunk)

        data = json.dumps(self._request_body(request), ensure_ascii=False).encode()
        with self._errors():
            await self._stream_pool().request("POST", CHAT_PATH, data, on_line, on_sent=on_sent)
        if not parser.done:
            raise self._missing_done(parser)


__all__ = ["CHAT_PATH", "SseChatClient"]
