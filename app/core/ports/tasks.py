"""The seam pages run their I/O through: coroutines scheduled on one loop thread, results as futures."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class CoroutineRunner(Protocol):
    """Runs coroutines on a loop of its own (the app's asyncio loop thread)."""

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule `coro`; once the loop has stopped, the future fails at once."""
        ...

    def submit_unless(self, closed: bool, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Submit, unless the caller is shut down (`closed`): then the future fails at once."""
        ...

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` and wait for its result, at most `timeout` seconds (never from the GUI thread)."""
        ...


__all__ = ["CoroutineRunner"]
