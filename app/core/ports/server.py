"""The server seam: what starts, stops, restarts and probes one inference server.

The controller, the guarded apply and the sweep drive a server only through this; each backend
(a folder under app/backends/) supplies its own supervisor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.core.server.settings import ServerSettings
from app.core.server.state import ServerStatus


class ServerControl(Protocol):
    """A supervised server: its settings, its state, and the coroutines that change the state.

    The coroutines run on the asyncio loop thread; `status` and `server_pids` may be read from any
    thread (they return snapshots)."""

    settings: ServerSettings  # what the next start uses; assigning it does not restart anything
    program: str  # how messages name the server, e.g. the backend's display name

    @property
    def status(self) -> ServerStatus:
        """The latest state, as last published."""
        ...

    async def probe(self) -> ServerStatus:
        """Find the binary and look at host:port (attaching to a server that already answers)."""
        ...

    async def start(self) -> ServerStatus:
        """Start a managed server with `settings` (or attach to one that answers)."""
        ...

    async def stop(self) -> ServerStatus:
        """Stop the managed server; a server that was attached to is left running."""
        ...

    async def restart(self, settings: ServerSettings | None = None) -> ServerStatus:
        """Restart a managed server, with `settings` when given."""
        ...

    def server_pids(self) -> Sequence[int]:
        """PIDs of the server's process tree (for attributing GPU memory and CPU); may be empty."""
        ...

    async def close(self) -> None:
        """Stop what was started and release watchers (on quit)."""
        ...


__all__ = ["ServerControl"]
