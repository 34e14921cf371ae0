"""The contention seam: what else used the server's device over a sweep point's measured window.

A probe is made per point; begin() and end() read the process table (and the GPU driver), which
blocks for milliseconds: the sweep calls them in a worker thread."""

from __future__ import annotations

from typing import Protocol
from collections.abc import Sequence

from app.core.bench.contention import Contention


class ContentionProbe(Protocol):
    """Measures one window: begin() at its start, end() at its end with the verdict."""

    def begin(self, server_pids: Sequence[int]) -> None:
        """Take the window's first readings (the server's root pids name its process tree)."""
        ...

    def end(self, server_pids: Sequence[int], on_gpu: bool) -> Contention:
        """Take the last readings and judge the window for the device the server computes on (the GPU
        when on_gpu, else the CPU); UNMEASURED when it cannot be told."""
        ...


class ContentionProbeFactory(Protocol):
    """Makes a fresh probe for one window."""

    def __call__(self) -> ContentionProbe:
        """A probe that has not begun."""
        ...


__all__ = ["ContentionProbe", "ContentionProbeFactory"]
