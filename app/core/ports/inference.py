"""What the app's procedures need from an inference server's client to stream replies.

The console's procedures (services/prompts: one reply, a burst, thinking vs not) iterate a reply;
the load generator hands each line to a callback, with no task switch per line. Both get neutral
StreamChunks, each stamped with when its line arrived and when its request went out. Backends
implement these (each in its folder under app/backends/); tests may pass others.
"""

from __future__ import annotations

from typing import Any, Protocol
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from app.core.models import LocalModel, ModelDetails
from app.core.replies import ChatRequest, StreamChunk

ChunkHandler = Callable[[StreamChunk], None]


class ChatStreaming(Protocol):
    """Streams one chat reply as it arrives (the console's way)."""

    def chat(self, model: str, messages: list[dict[str, Any]], *, think: bool | str | None = None,
             options: dict[str, Any] | None = None, keep_alive: str | int | None = None,
             tools: list[dict[str, Any]] | None = None) -> AsyncIterator[StreamChunk]:
        """The reply's chunks; the last has done=True and its final figures. Failures raise the
        app's typed errors (DeckError); cancelling the consumer closes the stream at once."""
        ...


class ChatRequestStreaming(Protocol):
    """Sends prepared chat requests whose lines go to a callback as they are parsed (the load generator's way)."""

    async def stream_chat(self, request: ChatRequest, on_chunk: ChunkHandler) -> None:
        """One streamed request, written in the backend's own format; returns once the final line arrived.
        on_chunk may raise to abort the request; failures raise the app's typed errors."""
        ...

    async def aclose(self) -> None:
        """Close the client's connections."""
        ...


class StreamingClientFactory(Protocol):
    """Makes the load generator's client for a server URL; refuses a URL it cannot stream from
    at once (the app's typed errors), so a sweep fails before it sends anything."""

    def __call__(self, base_url: str, *, connect_timeout_s: float, read_timeout_s: float,
                 clock: Callable[[], float]) -> ChatRequestStreaming:
        """A client with these timeouts (s), stamping on `clock` (time.monotonic's timeline)."""
        ...


class ConsoleClient(ChatStreaming, Protocol):
    """What the prompt console needs of a server: its models, one model's details, streamed chats."""

    async def tags(self) -> list[LocalModel]:
        """The models the server has, in its order."""
        ...

    async def show(self, model: str, verbose: bool = False) -> ModelDetails:
        """One model's metadata and capabilities (verbose: with its tensors)."""
        ...

    async def aclose(self) -> None:
        """Close the client's connections."""
        ...


ConsoleClientFactory = Callable[[str], ConsoleClient]  # base URL -> client


class PromptTokenCounter(Protocol):
    """Counts prompts in the server's own tokens, for the model in use: so prompts of a requested length can be
    made, and what the server used of a prompt held against what was sent."""

    @property
    def counts_whole_prompts(self) -> bool:
        """True when a prompt longer than the server's context is still counted whole (a tokenizer); False when
        the count comes from running the prompt, which the server cuts as it would cut the request."""
        ...

    async def count_text(self, model: str, text: str, *, context: int | None = None) -> int:
        """The tokens of `text` alone, without any chat template or special tokens. `context`: the context per
        slot the model runs with where a request set its own (a server that counts by running the text asks
        for the same, so that counting does not reload the model); None: the server's default."""
        ...

    async def count_chat(self, model: str, messages: Sequence[Mapping[str, str]], *, context: int | None = None) -> int:
        """The prompt tokens of a chat request with these messages as the server counts them (template included);
        `context` as for count_text."""
        ...

    async def aclose(self) -> None:
        """Close the counter's connections."""
        ...


PromptCounterFactory = Callable[[str], PromptTokenCounter]  # base URL -> counter

__all__ = ["ChatRequestStreaming", "ChatStreaming", "ChunkHandler", "ConsoleClient", "ConsoleClientFactory",
           "PromptCounterFactory", "PromptTokenCounter", "StreamingClientFactory"]
