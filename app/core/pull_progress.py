"""Progress of a model download from the server's status lines: bytes, speed and time left per
layer and overall.

Speeds are bytes per second over a sliding window of recent lines (so a stall shows as a drop,
not as a slowly sinking average); times are seconds on the caller's monotonic clock.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

DEFAULT_WINDOW_S = 3.0

@dataclass(frozen=True)
class LayerProgress:
    """One blob of a pull (bytes, bytes/s, s)."""

    digest: str
    total_bytes: int
    completed_bytes: int
    speed_bps: float | None
    eta_s: float | None

    @property
    def done(self) -> bool:
        """True once every byte of the blob has arrived."""
        return self.total_bytes > 0 and self.completed_bytes >= self.total_bytes

    @property
    def fraction(self) -> float:
        """Share downloaded, 0..1."""
        return min(1.0, self.completed_bytes / self.total_bytes) if self.total_bytes else 0.0


@dataclass(frozen=True)
class PullSnapshot:
    """The whole pull at one moment."""

    status: str
    layers: tuple[LayerProgress, ...]
    completed_bytes: int
    total_bytes: int
    speed_bps: float | None
    eta_s: float | None
    elapsed_s: float
    succeeded: bool

    @property
    def fraction(self) -> float:
        """Share of all known bytes downloaded, 0..1 (1 once the pull succeeded)."""
        if self.succeeded:
            return 1.0
        return min(1.0, self.completed_bytes / self.total_bytes) if self.total_bytes else 0.0


class _Rate:
    """Bytes per second over the last `window_s` seconds of samples."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: collections.deque[tuple[float, int]] = collections.deque()

    def add(self, t: float, value: int) -> None:
        self.samples.append((t, value))
        while len(self.samples) > 2 and self.samples[1][0] <= t - self.window_s:
            self.samples.popleft()

    def rate(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, v0), (t1, v1) = self.samples[0], self.samples[-1]
        return (v1 - v0) / (t1 - t0) if t1 > t0 else None


def _eta(remaining: int, speed: float | None) -> float | None:
    if remaining <= 0:
        return 0.0
    return remaining / speed if speed else None


class PullTracker:
    """Feed it each progress line with its receive time; read a PullSnapshot back."""

    def __init__(self, started_s: float, window_s: float = DEFAULT_WINDOW_S) -> None:
        self.started_s = started_s
        self.window_s = window_s
        self._totals: dict[str, int] = {}
        self._done: dict[str, int] = {}
        self._rates: dict[str, _Rate] = {}
        self._overall = _Rate(window_s)
        self._status = ""
        self._succeeded = False
        self._last_t = started_s

    def update(self, status: str, digest: str | None, total: int | None, completed: int | None,
               t: float) -> PullSnapshot:
        """Record one `/api/pull` line received at t (s) and return the new state."""
        self._status = status
        self._last_t = t
        if status == "success":
            self._succeeded = True
        if digest and total:
            self._totals[digest] = total
            # A line without `completed` (the first of a blob) means nothing arrived yet.
            done = max(self._done.get(digest, 0), completed or 0)
            self._done[digest] = done
            self._rates.setdefault(digest, _Rate(self.window_s)).add(t, done)
            self._overall.add(t, sum(self._done.values()))
        return self.snapshot()

    def snapshot(self) -> PullSnapshot:
        """The state after the last line."""
        layers = []
        for digest, total in self._totals.items():
            done = self._done.get(digest, 0)
            speed = self._rates[digest].rate() if done < total else None
            layers.append(LayerProgress(digest, total, done, speed, _eta(total - done, speed)))
        total = sum(self._totals.values())
        completed = sum(self._done.values())
        speed = self._overall.rate()
        return PullSnapshot(status=self._status, layers=tuple(layers), completed_bytes=completed,
                            total_bytes=total, speed_bps=speed, eta_s=_eta(total - completed, speed),
                            elapsed_s=self._last_t - self.started_s, succeeded=self._succeeded)


def fmt_bytes(n: float | None) -> str:
    """'9.3 GB', '512 MB', '11 kB' (decimal units, as model registries and their pull commands show sizes)."""
    if n is None:
        return "—"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_eta(seconds: float | None) -> str:
    """'42 s', '3 min 05 s', '1 h 02 min'; '—' when unknown."""
    if seconds is None:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


__all__ = ["LayerProgress", "PullSnapshot", "PullTracker", "fmt_bytes", "fmt_eta"]
