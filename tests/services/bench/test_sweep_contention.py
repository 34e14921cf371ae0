"""A point's contention window when its workload fails after measuring began: the first readings, still
being taken in their thread, are waited for and a failure there goes with the window."""

from __future__ import annotations

import asyncio
import threading

from app.services.bench.sweep_contention import ContentionWindow


class _FailingProbe:
    def __init__(self) -> None:
        self.release = threading.Event()
        self.began = threading.Event()
        self.ended = False

    def begin(self, server_pids):
        self.began.set()
        self.release.wait(30)
        self.ended = True
        raise PermissionError("the process table cannot be read")

    def end(self, server_pids, on_gpu):
        raise AssertionError("a window whose workload failed is not judged")


def test_closing_a_window_that_is_never_judged_waits_for_its_readings_and_drops_their_failure():
    probe = _FailingProbe()

    async def go() -> None:
        window = ContentionWindow(lambda: probe, lambda: [1234])
        window.start()
        await asyncio.to_thread(probe.began.wait, 30)  # the first readings are being taken
        probe.release.set()
        await window.close()  # no exception: the failure is the window's, and it is not judged
        assert probe.ended
        await window.close()  # twice is harmless

    asyncio.run(go())
