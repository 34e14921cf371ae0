"""Work for the asyncio loop thread from the GUI's view-models, refused once they closed."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from app.core.ports.tasks import CoroutineRunner
from app.core.ports.server import ServerControl

T = TypeVar("T")


class LoopGate:
    """Submits coroutines to the loop until close(); after that nothing new runs (a late signal
    must not reach a loop that is shutting down). Shared by the server's view-models."""

    def __init__(self, loop: CoroutineRunner, server: Callable[[], ServerControl | None]) -> None:
        self.loop = loop
        self._server = server
        self.closed = False

    @property
    def server(self) -> ServerControl:
        """The supervisor (set once the composition root made it)."""
        server = self._server()
        if server is None:
            raise RuntimeError("no server supervisor attached yet")
        return server

    @property
    def has_server(self) -> bool:
        """True once a supervisor is attached."""
        return self._server() is not None

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule on the loop thread; a cancelled future after close()."""
        return self.loop.submit_unless(self.closed, coro)

    def close(self) -> None:
        """Refuse new work from now on."""
        self.closed = True


__all__ = ["LoopGate"]
