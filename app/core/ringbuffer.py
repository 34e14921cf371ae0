"""Preallocated numpy ring buffers for time series: O(1) append, ordered views for plotting."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np


class TimeSeriesRing:
    """A fixed-capacity buffer of (t, channel values) rows; NaN marks a gap.

    One writer thread and one reader thread may use it at once: appends and views are guarded
    by a lock held only for a copy, and `version` lets a reader skip redraws when nothing changed.
    """

    def __init__(self, capacity: int, channels: int) -> None:
        if capacity < 2 or channels < 1:
            raise ValueError("capacity must be >= 2 and channels >= 1")
        self.capacity = capacity
        self.channels = channels
        self._t = np.full(capacity, np.nan)
        self._v = np.full((capacity, channels), np.nan)
        self._next = 0
        self._count = 0
        self._lock = threading.Lock()
        self.version = 0

    def __len__(self) -> int:
        return self._count

    def append(self, t: float, values: Sequence[float] | np.ndarray) -> None:
        """Add one row; `values` has one number per channel (NaN for N/A)."""
        with self._lock:
            i = self._next
            self._t[i] = t
            self._v[i, :] = values
            self._next = (i + 1) % self.capacity
            self._count = min(self._count + 1, self.capacity)
            self.version += 1

    def clear(self) -> None:
        """Forget every row (a reset); `version` still grows, so a reader redraws the empty buffer."""
        with self._lock:
            self._t.fill(np.nan)
            self._v.fill(np.nan)
            self._next = 0
            self._count = 0
            self.version += 1

    def view(self, since: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Copies of (t, values) in time order, optionally only rows with t >= since."""
        with self._lock:
            if self._count < self.capacity:
                parts = [(0, self._count)]
            else:  # the oldest rows sit after the write position
                parts = [(self._next, self.capacity), (0, self._next)]
            if since is not None:
                parts = self._since(parts, since)
            # Slices joined by concatenate copy at memcpy speed; a fancy index gathers row by row.
            t = np.concatenate([self._t[a:b] for a, b in parts]) if parts else self._t[:0].copy()
            v = np.concatenate([self._v[a:b] for a, b in parts]) if parts else self._v[:0].copy()
        return t, v

    def _since(self, parts: list[tuple[int, int]], since: float) -> list[tuple[int, int]]:
        """The (start, stop) slices of `parts` (time order) left after dropping rows with t < since."""
        kept: list[tuple[int, int]] = []
        for a, b in parts:
            if b <= a:
                continue
            if kept or self._t[b - 1] >= since:
                start = a if kept else a + int(np.searchsorted(self._t[a:b], since, side="left"))
                kept.append((start, b))
        return kept

    def last(self) -> tuple[float, np.ndarray] | None:
        """The newest row, or None when empty."""
        with self._lock:
            if not self._count:
                return None
            i = (self._next - 1) % self.capacity
            return float(self._t[i]), self._v[i].copy()
