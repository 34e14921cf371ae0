"""Async client for any OpenAI-compatible server (vLLM, SGLang, TGI, LM Studio, llama-server, Ollama's /v1):
the prompt console's, the catalog's and the load generator's.

Streamed chats go to `POST {base}/v1/chat/completions` ("stream": true, SSE, `stream_options.include_usage`)
over the shared streaming transport (app.adapters.http.sse_chat_client), https included (tls_socket.py):
every event carries the kernel's arrival time and every reply the time its request left. Models come
from `GET {base}/v1/models` (httpx). Every request carries `Authorization: Bearer KEY` where a key is
known for the base URL (endpoint.py: this session's, OLLAMA_DECK_API_KEY, the secret store).

What the API does not have is said, not faked: no version (vLLM's and SGLang's `/version` is asked,
"unknown" otherwise), no model sizes or file details, no loading, unloading, pulling, creating or
deleting (BadRequest with what to do instead), no server-side times (FinalFigures' times are None; see wire.py).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractContextManager, aclosing
from typing import Any

import httpx

from app.adapters.http.openai_sse import SseChatParser
from app.adapters.http.sse_chat_client import SseChatClient
from app.adapters.http.tls_socket import client_context
from app.backends.openai import wire
from app.backends.openai.endpoint import SESSION, header_safe, parse_base_url
from app.backends.openai.errors import SERVER, error_from_body, malformed, missing_done, translated_errors
from app.core.errors import BadRequest, ModelNotFound, ServerError, ServerUnreachable
from app.core.model_facts import ModelFacts
from app.core.models import LocalModel, ModelDetails, PullProgress, RunningModel
from app.core.replies import ChatRequest, FinalFigures, StreamChunk
from app.core.server.url import ServerUrlError

STREAM_HEADERS = (("User-Agent", "ollama-deck"), ("Accept", "text/event-stream"),
                  ("Content-Type", "application/json"))
MODELS_PATH = "/v1/models"
VERSION_PATH = "/version"  # vLLM's and SGLang's; others answer 404
ATTACHED_HINT = ("ollama-deck attaches to an OpenAI-compatible server and does not manage it: load, pull, create "
                 "or delete models with the server's own tools, where it was started.")
THINKING_NOTE = ("sent as chat_template_kwargs.enable_thinking; whether it is obeyed depends on the server (vLLM, "
                 "SGLang and llama-server pass it to the chat template) and the model's template (Qwen3's reads it)")


class TlsChoice:
    """How https:// servers are trusted in this run: the system's CAs, or a CA bundle given with --ca-bundle."""

    def __init__(self) -> None:
        self.ca_bundle: str | None = None
        self._context: ssl.SSLContext | None = None

    def trust(self, ca_bundle: str | None) -> None:
        """Trust the CAs in this PEM file instead of the system's (None: the system's again)."""
        self.ca_bundle = ca_bundle
        self._context = None

    def context(self) -> ssl.SSLContext:
        """The client context (default verification: certificate chain and host name)."""
        if self._context is None:
            self._context = client_context(self.ca_bundle)
        return self._context


TLS = TlsChoice()


def plain_transport(base_url: str) -> httpx.AsyncBaseTransport | None:
    """For a plain-request client of its own (the /metrics reader): a transport that checks an https server's
    certificate as this run's streams do (--ca-bundle); None for http:// (httpx's default)."""
    if not base_url.lower().startswith("https://"):
        return None
    return httpx.AsyncHTTPTransport(verify=TLS.context(), trust_env=False)


def checked_base_url(base_url: str) -> str:
    """The normalised base URL; ServerUnreachable saying why when it is not one."""
    try:
        return parse_base_url(base_url).base_url
    except ServerUrlError as exc:
        raise ServerUnreachable(exc.message, hint=exc.hint) from None


class OpenAiClient(SseChatClient):
    """One OpenAI-compatible base URL (normalised: see endpoint.py): pooled streaming connections and an
    httpx.AsyncClient, both made on first use (short connect, long read timeout in s; times on `clock`)."""

    STREAM_HEADERS = STREAM_HEADERS

    def __init__(self, base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 clock: Callable[[], float] = time.monotonic, api_key: str | None = None) -> None:
        url = SESSION.resolve(base_url)
        found = SESSION.find(url)
        key = api_key if api_key is not None else found.key
        if key and not header_safe(key):
            raise BadRequest(f"the API key from {found.source.value} has characters an HTTP header cannot carry "
                             "(only printable ASCII without spaces)", hint="Check that it holds the key alone.")
        headers = (("Authorization", f"Bearer {key}"),) if key else ()
        tls = TLS.context() if url.lower().startswith("https://") else None
        super().__init__(url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s,
                         transport=transport, clock=clock, headers=headers, tls=tls)

    # ---- the streaming hooks ------------------------------------------------------------------
    def _errors(self) -> AbstractContextManager[None]:
        return translated_errors(self.base_url, self.connect_timeout_s, self.read_timeout_s)

    def _parser(self) -> SseChatParser:
        return wire.parser(self.base_url)

    def _missing_done(self, parser: SseChatParser) -> ServerError:
        if parser.events == 0 and parser.first_other_line:  # not an event stream at all (an HTML page, plain text)
            first = parser.first_other_line.decode("utf-8", errors="replace")
            return malformed(f"{SERVER} at {self.base_url} answered the chat with something that is not an event "
                             f"stream (Server-Sent Events); it began {first!r}", status=200)
        return missing_done(self.base_url)

    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        return wire.request_body(request)

    def _from_body(self, status: int, body: bytes) -> ServerError:
        return error_from_body(status, body, self.base_url)

    def _malformed(self, message: str) -> ServerError:
        return malformed(message)

    # ---- the catalog --------------------------------------------------------------------------
    async def models(self) -> list[Mapping[str, Any]]:
        """`GET /v1/models`: the entries the server lists (each with an `id`)."""
        return wire.model_ids(await self._json(MODELS_PATH))

    async def version(self) -> str:
        """The server's version where it says one (`/version`: vLLM, SGLang), else "unknown". The model list
        is asked first, so a wrong key or a server that is not OpenAI-compatible fails here."""
        await self.models()
        try:
            reply = await self._json(VERSION_PATH)
        except ServerError:
            return "unknown"
        version = reply.get("version") if isinstance(reply, dict) else None
        return version if isinstance(version, str) and version else "unknown"

    async def tags(self) -> list[LocalModel]:
        """The models the server lists, by id (no sizes: the API does not give them)."""
        return [_local(entry) for entry in await self.models()]

    async def ps(self) -> list[RunningModel]:
        """The listed models, served for as long as the server runs; without sizes (not reported)."""
        return [RunningModel(name=str(e["id"]), model=str(e["id"]), size_bytes=None, size_vram_bytes=None,
                             context_length=_context(e)) for e in await self.models()]

    async def _entry(self, model: str) -> Mapping[str, Any]:
        entries = await self.models()
        for entry in entries:
            if entry["id"] == model:
                return entry
        listed = ", ".join(str(e["id"]) for e in entries) or "nothing"
        raise ModelNotFound(f"{SERVER} at {self.base_url} serves {listed}, not '{model}'",
                            hint="Use a model id from GET /v1/models (the model list).")

    async def show(self, model: str, verbose: bool = False) -> ModelDetails:
        """What the server says of a listed model: its id, owner and context (vLLM's max_model_len) where sent.
        Thinking is offered: whether it works depends on the server and the model (see THINKING_NOTE)."""
        entry = await self._entry(model)
        details: dict[str, Any] = {"owned_by": entry.get("owned_by") or "", "thinking_note": THINKING_NOTE}
        context = _context(entry)
        info: dict[str, Any] = {"context_length": context} if context else {}
        return ModelDetails(model_info=info, capabilities=("completion", "thinking"), details=details,
                            facts=ModelFacts(source=str(entry["id"])))

    async def thinking_support(self, model: str) -> tuple[bool, str]:
        """Offered for every listed model, with what it depends on."""
        await self._entry(model)
        return True, THINKING_NOTE

    async def load(self, model: str, keep_alive: str | int | None = None) -> FinalFigures:
        """A listed model is served already (done_reason "load"); another raises ModelNotFound."""
        await self._entry(model)
        return FinalFigures(done_reason="load")

    async def unload(self, model: str) -> None:
        """Not offered: the server decides what it keeps loaded."""
        raise BadRequest(f"{SERVER} at {self.base_url} cannot be asked to unload '{model}'", hint=ATTACHED_HINT)

    async def delete(self, model: str) -> None:
        """Not offered: the server's models are managed where it runs."""
        raise BadRequest(f"{SERVER} at {self.base_url} cannot delete '{model}' through its API", hint=ATTACHED_HINT)

    async def pull(self, model: str) -> AsyncIterator[PullProgress]:
        """Not offered: the API has no download."""
        raise BadRequest(f"{SERVER} at {self.base_url} cannot download '{model}' through its API",
                         hint=ATTACHED_HINT)
        yield PullProgress(status="")  # pragma: no cover - makes this an async generator

    async def create(self, model: str, from_: str, *, parameters: dict[str, Any] | None = None,
                     quantize: str | None = None, system: str | None = None) -> AsyncIterator[str]:
        """Not offered: the API has no model variants."""
        raise BadRequest(f"{SERVER} at {self.base_url} cannot create '{model}' from '{from_}'", hint=ATTACHED_HINT)
        yield ""  # pragma: no cover - makes this an async generator

    # ---- streams ------------------------------------------------------------------------------
    async def chat(self, model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
                   options: dict[str, Any] | None = None, keep_alive: str | int | None = None,
                   tools: list[dict[str, Any]] | None = None) -> AsyncIterator[StreamChunk]:
        """Stream a chat reply; the last chunk has done=True and `final` figures (tokens only, see wire.py).
        keep_alive and load options such as num_ctx are not sent: the server was started with its own."""
        body = wire.chat_body(model, messages, think=think, options=options, tools=tools)
        async with aclosing(self._stream(body)) as chunks:
            async for chunk in chunks:
                yield chunk


def _context(entry: Mapping[str, Any]) -> int | None:
    value = entry.get("max_model_len")  # vLLM's; others do not say
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _local(entry: Mapping[str, Any]) -> LocalModel:
    created = entry.get("created")
    modified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created)) if isinstance(created, int) else ""
    return LocalModel(name=str(entry["id"]), model=str(entry["id"]), size_bytes=0, digest="", modified_at=modified,
                      family=str(entry.get("owned_by") or ""))


def load_client(base_url: str, *, connect_timeout_s: float = 3.0, read_timeout_s: float = 300.0,
                clock: Callable[[], float] = time.monotonic) -> OpenAiClient:
    """The load generator's client: refuses at once a URL that is not a server's base URL."""
    checked_base_url(base_url)
    return OpenAiClient(base_url, connect_timeout_s=connect_timeout_s, read_timeout_s=read_timeout_s, clock=clock)


__all__ = ["OpenAiClient", "TLS", "TlsChoice", "checked_base_url", "load_client", "plain_transport"]
