"""Async client for llama.cpp's llama-server: the prompt console's, the catalog's and the load generator's.

Streamed chats go to `POST /v1/chat/completions` ("stream": true, Server-Sent Events) through the
shared streaming transport (app.adapters.http.sse_chat_client over app.adapters.http.streaming), as
Ollama's do: every event carries the kernel's time its last byte arrived and every reply the time its request went out. Plain requests
(`/props`, `/v1/models`, `/health`) use httpx. SSE parsing and the timings → FinalFigures mapping
are in wire.py, every failure's typed error in errors.py, the model list and GGUF details in
catalog.py.

What llama-server does not have is said, not faked: it serves the one model it was started with
(load of another model, unload, delete, pull and create raise DeckError with what to do instead),
and it does not say where its weights sit, so `ps()` lists its served model without sizes (the
backend's capability `lists_loaded`, loaded models with their VRAM share, is off).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, aclosing
from pathlib import Path
from typing import Any

import httpx

from app.adapters.gguf_file import GgufError, GgufNotFound
from app.adapters.http import openai_sse
from app.adapters.http.sse_chat_client import SseChatClient
from app.backends.llama_server.probe import version_of
from app.backends.llama_server import catalog
from app.backends.llama_server.errors import (SERVER, error_from_body, malformed, missing_done, require_streamable,
                                              translated_errors)
from app.backends.llama_server.wire import SseChatParser, chat_body, parse_models, parse_props, request_body
from app.core.errors import BadRequest, ModelNotFound, ServerError
from app.core.models import LocalModel, ModelDetails, PullProgress, RunningModel
from app.core.replies import ChatRequest, FinalFigures, StreamChunk

# Connection: close because llama-server closes the connection after every streamed reply anyway
# (its chunked writer ends by returning false, which cpp-httplib takes as a cancelled write) but
# frames the reply as keep-alive: a pooled connection taken for the next request would be closed
# under it, "before replying". Saying close up front keeps the pool from reusing it.
STREAM_HEADERS = (("User-Agent", "ollama-deck"), ("Accept", "text/event-stream"),
                  ("Content-Type", "application/json"), ("Connection", "close"))
TOKENIZE_PATH = "/tokenize"  # {"content", "add_special"} -> {"tokens": [ids]}
TEMPLATE_PATH = "/apply-template"  # {"messages"} -> {"prompt": the chat template applied}
ONE_MODEL_HINT = ("llama-server serves the one model it was started with; to use another, set its GGUF file as "
                  "the model on the Server page and restart the server.")


class LlamaServerClient(SseChatClient):
    """One llama-server base URL: pooled streaming connections and an httpx.AsyncClient, both made
    on first use (short connect, long read timeout in s; times on `clock`). `models_dir`: a folder
    of GGUF files listed beside the served model (the settings' "models_dir" option)."""

    STREAM_HEADERS = STREAM_HEADERS

    def __init__(self, base_url: str, *, models_dir: str | Path | None = None, connect_timeout_s: float = 3.0,
                 read_timeout_s: float = 300.0, transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
                         transport=transport, clock=clock)
        self.models_dir = Path(models_dir).expanduser() if models_dir else None

    def _errors(self) -> AbstractContextManager[None]:
        return translated_errors(self.base_url, self.connect_timeout_s, self.read_timeout_s)

    def _parser(self) -> SseChatParser:
        return SseChatParser(self.base_url)

    def _missing_done(self, parser: openai_sse.SseChatParser) -> ServerError:
        return missing_done(self.base_url)

    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        return request_body(request)

    def _from_body(self, status: int, body: bytes) -> ServerError:
        return error_from_body(status, body, self.base_url)

    def _malformed(self, message: str) -> ServerError:
        return malformed(message)

    # ---- server facts -----------------------------------------------------------------------
    async def health(self) -> bool:
        """True when `/health` answers ok (the model is loaded); False while loading or for any failure."""
        try:
            return bool((await self._json("/health")).get("status") == "ok")
        except (ServerError, AttributeError):
            return False

    async def props(self) -> dict[str, Any]:
        """`/props`: model_path, chat_template, total_slots, build_info, … (see wire.parse_props)."""
        return parse_props(await self._json("/props"))

    async def version(self) -> str:
        """The server's build, as `/props` build_info says it (e.g. "b6000-1a2b3c4"; "local build" for one
        with no build number stamped in, as the status and the header say it)."""
        return version_of(await self.props()) or "unknown"

    async def _served(self) -> tuple[list[LocalModel], list[dict[str, Any]], dict[str, Any]]:
        props, models = await asyncio.gather(self.props(), self._json("/v1/models"))
        entries = parse_models(models)
        path = props["model_path"]
        # Single-model servers list one entry: its file is /props model_path.
        served = [catalog.served_model(e, path if len(entries) == 1 else "") for e in entries]
        return served, entries, props

    async def _folder(self) -> list[Path]:
        return await asyncio.to_thread(catalog.gguf_files, self.models_dir)

    # ---- the catalog ------------------------------------------------------------------------
    async def tags(self) -> list[LocalModel]:
        """The served model first, then the models folder's GGUF files (sizes in bytes on disk)."""
        (served, _, _), folder = await asyncio.gather(self._served(), self._folder())
        try:
            return await asyncio.to_thread(catalog.listed, served, folder)
        except GgufError as exc:  # a file vanished between listing and stat
            raise _catalog_error(exc) from None

    async def ps(self) -> list[RunningModel]:
        """The served model, loaded for as long as the server runs, with its context per slot; without
        sizes, since llama-server does not report how much of it sits in VRAM."""
        served, _, props = await self._served()
        return [catalog.loaded_model(entry, props["slot_context"]) for entry in served]

    async def show(self, model: str, verbose: bool = False) -> ModelDetails:
        """A model's details from its GGUF header (tensors when verbose) with the server's chat template
        for the served model; ModelNotFound for a name neither served nor in the models folder."""
        (served, entries, props), folder = await asyncio.gather(self._served(), self._folder())
        is_served = catalog.serving(model, served) is not None
        path = catalog.model_file(model, served, folder)
        if path is None:
            if is_served:  # a server on another machine: its file is not here
                entry = next(e for e, m in zip(entries, served) if model in catalog.names_of(m))
                return catalog.details_from_server(entry, props["chat_template"])
            raise ModelNotFound(f"{SERVER} at {self.base_url} does not serve '{model}', and it is not a GGUF file "
                                "in the models folder", hint=ONE_MODEL_HINT)
        try:
            info = await asyncio.to_thread(catalog.read_cached, path)
        except GgufError as exc:
            raise _catalog_error(exc) from None
        return catalog.details_from_file(info, props["chat_template"] if is_served else None, verbose)

    async def thinking_support(self, model: str) -> tuple[bool, str]:
        """Whether `model`'s chat template can switch thinking, and the reason when it cannot."""
        details = await self.show(model)
        return details.supports_thinking, str(details.details.get("thinking_reason", ""))

    async def load(self, model: str, keep_alive: str | int | None = None) -> FinalFigures:
        """The served model is loaded already (done_reason "load"); another raises ModelNotFound."""
        served, _, _ = await self._served()
        if catalog.serving(model, served) is None:
            raise ModelNotFound(f"{SERVER} at {self.base_url} serves {', '.join(m.name for m in served) or 'nothing'}, "
                                f"not '{model}'", hint=ONE_MODEL_HINT)
        return FinalFigures(done_reason="load")

    async def unload(self, model: str) -> None:
        """Not offered: llama-server keeps its model until it stops."""
        raise BadRequest(f"{SERVER} cannot unload '{model}': it keeps its model loaded until it stops",
                         hint="Stop the server on the Server page to free its memory.")

    async def delete(self, model: str) -> None:
        """Not offered: models are files; ollama-deck does not delete them."""
        raise BadRequest(f"{SERVER} has no model store to delete '{model}' from; its models are GGUF files",
                         hint="Delete the file in your file manager if you no longer want it.")

    async def pull(self, model: str) -> AsyncIterator[PullProgress]:
        """Not offered: llama-server has no registry to download from."""
        raise BadRequest(f"{SERVER} cannot download '{model}': it has no model registry",
                         hint="Download a GGUF file (e.g. from Hugging Face) into the models folder.")
        yield PullProgress(status="")  # pragma: no cover - makes this an async generator

    async def create(self, model: str, from_: str, *, parameters: dict[str, Any] | None = None,
                     quantize: str | None = None, system: str | None = None) -> AsyncIterator[str]:
        """Not offered: a variant's context and batch are llama-server's start flags."""
        raise BadRequest(f"{SERVER} cannot create '{model}' from '{from_}': a model's context and batch are "
                         "the server's start settings", hint="Set them on the Server page and restart.")
        yield ""  # pragma: no cover - makes this an async generator

    # ---- prompt tokens (its tokenizer: counts a prompt whole, however long) ---------------------
    @property
    def counts_whole_prompts(self) -> bool:
        """True: `/tokenize` counts a prompt longer than the context as it is."""
        return True

    async def _token_count(self, content: str, add_special: bool) -> int:
        reply = await self._json(TOKENIZE_PATH, {"content": content, "add_special": add_special})
        tokens = reply.get("tokens") if isinstance(reply, dict) else None
        if not isinstance(tokens, list):
            raise malformed(f"{TOKENIZE_PATH} at {self.base_url} answered without a token list: {str(reply)[:120]!r}")
        return len(tokens)

    async def count_text(self, model: str, text: str, *, context: int | None = None) -> int:
        """The tokens of `text` alone (`POST /tokenize`, no special tokens); `model` is the served one (a
        tokenizer loads nothing: `context` changes nothing)."""
        return await self._token_count(text, add_special=False)

    async def count_chat(self, model: str, messages: Sequence[Mapping[str, str]], *,
                         context: int | None = None) -> int:
        """A chat's prompt tokens as the server counts them: its chat template applied (`POST /apply-template`),
        then tokenized with the model's special tokens (`POST /tokenize`)."""
        reply = await self._json(TEMPLATE_PATH, {"messages": [dict(m) for m in messages]})
        prompt = reply.get("prompt") if isinstance(reply, dict) else None
        if not isinstance(prompt, str):
            raise malformed(f"{TEMPLATE_PATH} at {self.base_url} answered without a prompt: {str(reply)[:120]!r}")
        return await self._token_count(prompt, add_special=True)

    # ---- streams ----------------------------------------------------------------------------
    async def chat(self, model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
                   options: dict[str, Any] | None = None, keep_alive: str | int | None = None,
                   tools: list[dict[str, Any]] | None = None) -> AsyncIterator[StreamChunk]:
        """Stream a chat reply; the last chunk has done=True and `final` figures. keep_alive is
        ignored (the model stays loaded) and so are load options such as num_ctx."""
        body = chat_body(model, messages, think=think, options=options, tools=tools)
        async with aclosing(self._stream(body)) as chunks:
            async for chunk in chunks:
                yield chunk


def _catalog_error(exc: GgufError) -> ServerError:
    """A GGUF file's failure as a catalog error (callers handle ServerError), its words kept."""
    if isinstance(exc, GgufNotFound):
        return ModelNotFound(exc.message, hint=exc.hint)
    return ServerError(exc.message, hint=exc.hint)


def load_client(base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                clock: Callable[[], float] = time.monotonic) -> LlamaServerClient:
    """The load generator's client: refuses at once a URL the streaming transport cannot use."""
    require_streamable(base_url)
    return LlamaServerClient(base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
                             clock=clock)


__all__ = ["LlamaServerClient", "load_client"]
