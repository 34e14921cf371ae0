"""The log-signal seam: a backend reads its server's log lines into neutral signals for the watchdog.

A reader may keep state between lines (a load logged over several lines); one reader per server log.
A backend whose log says nothing the watchdog reads has no factory (BackendSpec.log_signals is None)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.core.watch.signals import LogSignal


class LogSignalReader(Protocol):
    """Reads one server's log, line by line, in the order logged."""

    def read(self, line: str) -> Sequence[LogSignal]:
        """The signals this line holds (most lines: none). Never raises on what a log holds."""
        ...


class LogSignalReaderFactory(Protocol):
    """Makes a fresh reader (one per log followed)."""

    def __call__(self) -> LogSignalReader:
        """A reader with no state."""
        ...


__all__ = ["LogSignalReader", "LogSignalReaderFactory"]
