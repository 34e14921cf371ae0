"""The runtime allowance learnt from loads: what a GPU model and driver hold per process beyond the buffers
the engine logs, kept per card.

One load teaches one figure: the process's GPU memory just after the load (the smallest reading before the
next load: the runtime's memory pool only grows with prompts) less the sum of the buffers the load logged on
that GPU. A card keeps the figures of its recent loads and prices their median: one reading caught while a
pool grew (or a load another process disturbed) moves a median of five by nothing, and a new driver is a new
card, so a median never lags behind a change that matters."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from app.core.memory.allowance import AllowanceSource, RuntimeAllowance
from app.core.units import GIB

MAX_ALLOWANCE_BYTES = 4 * GIB  # more than any runtime holds: a reading that says more is of something else
RECENT_LOADS = 5  # the loads a card's figure is the median of


def allowance_from(process_bytes: int, gpu_buffer_bytes: int) -> int | None:
    """What a process holds beyond its logged GPU buffers; None where that is no runtime allowance (no GPU
    buffers, a reading below the buffers themselves, or more than MAX_ALLOWANCE_BYTES beyond them)."""
    if gpu_buffer_bytes <= 0 or process_bytes <= 0:
        return None
    size = process_bytes - gpu_buffer_bytes
    return size if 0 <= size <= MAX_ALLOWANCE_BYTES else None


@dataclass(frozen=True)
class LearnedAllowance:
    """The allowance learnt on one GPU model and driver: the figures of its recent loads, newest last."""

    gpu_name: str
    driver: str
    recent_bytes: tuple[int, ...]
    loads: int  # loads learnt from, all told
    learned_at: str  # ISO-8601 time of the newest

    @property
    def key(self) -> tuple[str, str]:
        """The card it is kept for: GPU model and driver version."""
        return self.gpu_name, self.driver

    @property
    def size_bytes(self) -> int:
        """The figure priced: the median of the recent loads'."""
        return int(statistics.median(self.recent_bytes))

    def allowance(self) -> RuntimeAllowance:
        """As priced, with its source."""
        return RuntimeAllowance(self.size_bytes, AllowanceSource.LEARNED, self.gpu_name, self.driver, self.learned_at,
                                self.loads)

    def with_load(self, size_bytes: int, at: str) -> LearnedAllowance:
        """One more load's figure (the oldest of more than RECENT_LOADS dropped)."""
        return replace(self, recent_bytes=(*self.recent_bytes, size_bytes)[-RECENT_LOADS:], loads=self.loads + 1,
                       learned_at=at)

    def with_newest(self, size_bytes: int, at: str) -> LearnedAllowance:
        """The newest load's figure read again lower (a later reading of the same load)."""
        return replace(self, recent_bytes=(*self.recent_bytes[:-1], size_bytes), learned_at=at)

    @classmethod
    def first(cls, gpu_name: str, driver: str, size_bytes: int, at: str) -> LearnedAllowance:
        """A card's first load."""
        return cls(gpu_name, driver, (size_bytes,), 1, at)


__all__ = ["MAX_ALLOWANCE_BYTES", "RECENT_LOADS", "LearnedAllowance", "allowance_from"]
