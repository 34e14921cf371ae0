"""The clock seam: monotonic seconds, so schedules and durations can be driven by a fake clock in tests."""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """Returns monotonic time in seconds (time.monotonic in production)."""

    def __call__(self) -> float:
        ...


__all__ = ["Clock"]
