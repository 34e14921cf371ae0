"""The server-telemetry seam: what a running inference server reports about its own work.

One ServerTelemetry is bound to one server URL (a ServerTelemetryFactory makes one per URL) and
is polled on the asyncio loop thread. A backend without such endpoints has no factory
(BackendSpec.server_telemetry is None) and its spec says why."""

from __future__ import annotations

from typing import Protocol

from app.core.server_telemetry import ServerSample


class ServerTelemetry(Protocol):
    """Reads one server's slots, queue and counters; rates are taken between consecutive calls."""

    async def sample(self) -> ServerSample:
        """The server's state now (DeckError when neither slots nor counters could be read)."""
        ...

    async def aclose(self) -> None:
        """Close pooled connections."""
        ...


class ServerTelemetryFactory(Protocol):
    """Makes the telemetry reader of the server at `base_url` (e.g. http://127.0.0.1:8080)."""

    def __call__(self, base_url: str) -> ServerTelemetry:
        """A reader for `base_url`; it connects on its first sample."""
        ...


__all__ = ["ServerTelemetry", "ServerTelemetryFactory"]
