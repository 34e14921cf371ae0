"""What else used the server's device over a point's measured window: a probe from the contention
port, begun when measuring starts and read when it ends, both in a worker thread (the probe reads the
process table and the GPU driver, which must not stall the loop that drives the workload)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from app.core.bench.contention import Contention, unmeasured
from app.core.ports.contention import ContentionProbeFactory


class ContentionWindow:
    """One window's contention: start() when measuring starts (on the loop), verdict() when it ends."""

    def __init__(self, probes: ContentionProbeFactory | None, server_pids: Callable[[], Sequence[int]]) -> None:
        self._probe = probes() if probes is not None else None
        self._server_pids = server_pids
        self._began: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Take the first readings in a worker thread (call on the loop)."""
        if self._probe is not None and self._began is None:
            self._began = asyncio.ensure_future(asyncio.to_thread(self._probe.begin, list(self._server_pids())))

    async def verdict(self, on_gpu: bool) -> Contention:
        """The window's verdict for the server's device (the GPU when on_gpu); UNMEASURED when it cannot be told."""
        if self._probe is None:
            return unmeasured("no probe of the machine's processes")
        if self._began is None:
            return unmeasured("the measured window did not start")
        try:
            await self._began
            return await asyncio.to_thread(self._probe.end, list(self._server_pids()), on_gpu)
        except Exception as exc:  # noqa: BLE001 - a failed reading is a gap, never a failed benchmark
            return unmeasured(f"the process table could not be read ({exc})")

    async def close(self) -> None:
        """Wait for the first readings if they are still being taken (a window whose workload failed is never
        judged): their thread ends, and a failure there is dropped with the window instead of left unread."""
        if self._began is not None and not self._began.done():
            await asyncio.gather(self._began, return_exceptions=True)
        elif self._began is not None and not self._began.cancelled():
            self._began.exception()  # read, so a failed reading is not reported as never retrieved


__all__ = ["ContentionWindow"]
