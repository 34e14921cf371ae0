"""Running one coroutine to its end from a test, within a time limit (a hang fails the test instead of the run)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run_within(make: Callable[[], Awaitable[T]], timeout: float) -> T:
    """asyncio.run of what `make` returns, cancelled with TimeoutError after `timeout` seconds."""
    async def bounded() -> T:
        return await asyncio.wait_for(make(), timeout)
    return asyncio.run(bounded())
