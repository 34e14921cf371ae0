"""A measured window's readings: poll something every interval while a workload runs, keep what
answered, and take a last reading when it ends. A failed reading is a gap, never a failed benchmark."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PollingWindow(Generic[T]):
    """Readings every interval_s seconds between start() and finish(); subclasses say how to read."""

    def __init__(self, interval_s: float, on_sample: Callable[[T], None] | None = None) -> None:
        self._interval_s = interval_s
        self.samples: list[T] = []
        self._task: asyncio.Task[None] | None = None
        self._on_sample = on_sample  # told each reading kept (a watchdog), on the loop thread

    def keep(self, sample: T) -> None:
        """Keep one reading (and hand it on)."""
        self.samples.append(sample)
        if self._on_sample is not None:
            try:
                self._on_sample(sample)
            except Exception:  # noqa: BLE001 - whoever follows the readings must not end the window
                pass

    @property
    def enabled(self) -> bool:
        """True when there is something to read."""
        raise NotImplementedError

    async def read(self) -> T | None:
        """One reading now (None when nothing answered)."""
        raise NotImplementedError

    @property
    def started(self) -> bool:
        """True between start() and finish()."""
        return self._task is not None

    def start(self) -> None:
        """Begin polling (a reading is taken at once)."""
        if self.enabled and self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def finish(self) -> None:
        """Stop polling and take a last reading (the workload has ended)."""
        if self._task is None:
            return
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        self._task = None
        last = await self.read()
        if last is not None:
            self.keep(last)

    async def _run(self) -> None:
        while True:
            sample = await self.read()
            if sample is not None:
                self.keep(sample)
            await asyncio.sleep(self._interval_s)


__all__ = ["PollingWindow"]
