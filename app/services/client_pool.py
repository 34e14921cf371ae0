"""One client per server URL, made and used on the asyncio loop thread, closed together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Closable(Protocol):
    """A client that holds connections until it is closed."""

    async def aclose(self) -> None:
        """Close its connections."""
        ...


C = TypeVar("C", bound=Closable)


class ClientPool(Generic[C]):
    """Caches `factory(url)` clients so pages reuse pooled connections; call only on the loop thread."""

    def __init__(self, factory: Callable[[str], C]) -> None:
        self._factory = factory
        self._clients: dict[str, C] = {}

    def get(self, url: str) -> C:
        """The client for url, made on first use."""
        client = self._clients.get(url)
        if client is None:
            client = self._clients[url] = self._factory(url)
        return client

    async def aclose(self) -> None:
        """Close every client made so far."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()


__all__ = ["ClientPool", "Closable"]
