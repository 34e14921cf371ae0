"""One Ollama client per server URL, made and used on the asyncio loop thread, closed together."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable


class ClientPool:
    """Caches `factory(url)` clients so pages reuse pooled connections; call only on the loop thread."""

    def __init__(self, factory: Callable[[str], Any]) -> None:
        self._factory = factory
        self._clients: dict[str, Any] = {}

    def get(self, url: str) -> Any:
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


__all__ = ["ClientPool"]
