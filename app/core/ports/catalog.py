"""The model-catalog seam: the models a server has on disk and in memory, and changing them.

One catalog is bound to one server URL (a `CatalogFactory` makes one per URL) and is an async
context manager that closes its connections. Which operations a backend really offers is said
by its spec's capabilities (app/backends/registry.py); calling one it lacks raises DeckError."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, Self

from app.core.models import LocalModel, ModelDetails, PullProgress, RunningModel
from app.core.replies import FinalFigures


class ModelCatalog(Protocol):
    """Lists, reads, loads and changes a server's models; every call runs on the asyncio loop thread."""

    async def __aenter__(self) -> Self:
        ...

    async def __aexit__(self, *exc: object) -> None:
        ...

    async def aclose(self) -> None:
        """Close pooled connections."""
        ...

    async def version(self) -> str:
        """The server's version text, e.g. "0.12.6"."""
        ...

    async def tags(self) -> list[LocalModel]:
        """Models stored locally (sizes in bytes on disk)."""
        ...

    async def ps(self) -> list[RunningModel]:
        """Models loaded in memory now (sizes in bytes, VRAM share included)."""
        ...

    async def show(self, model: str, verbose: bool = False) -> ModelDetails:
        """A model's metadata (architecture keys; tensors when verbose) with its neutral `facts` (what the
        estimator prices, built by the backend from its own source); ModelNotFound if unknown."""
        ...

    async def load(self, model: str, keep_alive: str | int | None = None) -> FinalFigures:
        """Load a model into memory without generating."""
        ...

    async def unload(self, model: str) -> None:
        """Free a loaded model's memory now."""
        ...

    async def delete(self, model: str) -> None:
        """Delete a stored model; ModelNotFound if it does not exist."""
        ...

    def pull(self, model: str) -> AsyncIterator[PullProgress]:
        """Download a model, streaming progress lines (byte counts per layer)."""
        ...

    def create(self, model: str, from_: str, *, parameters: dict[str, Any] | None = None,
               quantize: str | None = None, system: str | None = None) -> AsyncIterator[str]:
        """Create a model from another with new defaults, streaming status lines."""
        ...


CatalogFactory = Callable[[str], ModelCatalog]
"""Makes a catalog bound to a server's base URL (e.g. http://127.0.0.1:11434)."""

__all__ = ["CatalogFactory", "ModelCatalog"]
