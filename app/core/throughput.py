"""Aggregate token rate over every request the app has in flight."""

from __future__ import annotations

import collections
import threading
from contextlib import contextmanager
from collections.abc import Iterator

DEFAULT_WINDOW_S = 2.0


class TokenMeter:
    """Counts tokens as streams deliver them and requests while they run.

    Any thread may call any method. Times are seconds on one monotonic clock shared by
    writers and readers (the sampler's clock, normally `time.monotonic`).
    """

    def __init__(self, keep_s: float = 10.0) -> None:
        if keep_s <= 0:
            raise ValueError("keep_s must be positive")
        self._keep_s = keep_s
        self._events: collections.deque[tuple[float, int]] = collections.deque()
        self._in_flight = 0
        self._total_tokens = 0
        self._lock = threading.Lock()

    def begin(self) -> None:
        """Mark one request as started."""
        with self._lock:
            self._in_flight += 1

    def end(self) -> None:
        """Mark one request as finished (normally, with an error, or cancelled)."""
        with self._lock:
            if self._in_flight == 0:
                raise ValueError("TokenMeter.end() called more often than begin()")
            self._in_flight -= 1

    @contextmanager
    def request(self) -> Iterator[TokenMeter]:
        """`begin()` on entry and `end()` on exit, whatever ends the request."""
        self.begin()
        try:
            yield self
        finally:
            self.end()

    @property
    def in_flight(self) -> int:
        """Requests begun and not yet ended."""
        with self._lock:
            return self._in_flight

    @property
    def total_tokens(self) -> int:
        """Tokens counted since the meter was made."""
        with self._lock:
            return self._total_tokens

    def add(self, n_tokens: int, t: float) -> None:
        """Record n_tokens received at time t (seconds)."""
        if n_tokens < 0:
            raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
        if n_tokens == 0:
            return
        with self._lock:
            # Streams report from several threads, so a stamp may arrive a hair after a newer
            # one; filing it at the newest time keeps the log sorted for `rate` and pruning.
            if self._events and t < self._events[-1][0]:
                t = self._events[-1][0]
            self._events.append((t, n_tokens))
            self._total_tokens += n_tokens
            horizon = t - self._keep_s
            while self._events and self._events[0][0] < horizon:
                self._events.popleft()

    def rate(self, t: float, window_s: float = DEFAULT_WINDOW_S) -> float:
        """Tokens per second received in the window (t - window_s, t]; 0.0 when idle."""
        if not 0 < window_s <= self._keep_s:
            raise ValueError(f"window_s must be in (0, {self._keep_s}], got {window_s}")
        start = t - window_s
        with self._lock:
            # The log is sorted: walk from the newest end and stop once past the window.
            tokens = 0
            for when, n in reversed(self._events):
                if when <= start:
                    break
                if when <= t:
                    tokens += n
        return tokens / window_s
