"""The fleet's host seam: something that knows a fleet server's host (its GPUs and RAM) and says where each
figure came from, e.g. a Prometheus server's HTTP API. One reader is bound to one source URL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.core.fleet import FleetServer
from app.core.fleet_status import HostFigures, ScrapeTarget


class HostFiguresReader(Protocol):
    """Reads a fleet server's host figures on the asyncio loop thread."""

    async def host_figures(self, server: FleetServer) -> HostFigures:
        """The host's GPUs, RAM and the server's scraped series with the queries asked; DeckError when the
        source itself fails (a host it does not know is HostFigures with source UNKNOWN and the reason)."""
        ...

    async def targets(self) -> list[ScrapeTarget]:
        """What the source scrapes, with each target's health (DeckError when it cannot say)."""
        ...

    async def aclose(self) -> None:
        """Close pooled connections."""
        ...


HostFiguresReaderFactory = Callable[[str], HostFiguresReader]
"""Makes a reader bound to a source's base URL (e.g. Prometheus at http://127.0.0.1:9090)."""

__all__ = ["HostFiguresReader", "HostFiguresReaderFactory"]
