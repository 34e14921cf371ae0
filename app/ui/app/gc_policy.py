"""Python's cyclic garbage collector runs on the GUI thread only.

Left automatic, the collector runs on whichever thread happens to allocate when a generation fills
up: the asyncio loop, the sampler or a worker. Widgets, timers and pyqtgraph items that have become
garbage are then destroyed on that thread, which Qt does not allow: it can crash, or deadlock with
the GUI thread waiting for the interpreter lock while it holds a Qt lock. pyqtgraph ships the
remedy — disable automatic collection and collect on a GUI-thread timer with the same thresholds —
and this module installs it for the running app and gives it an off switch.
"""

from __future__ import annotations

import gc
from typing import ClassVar

from pyqtgraph.util.garbage_collector import GarbageCollector


class GuiThreadCollection:
    """Owns the switch: `start()` moves collection to a GUI-thread timer, `stop()` gives it back."""

    # gc.enable()/gc.disable() is one switch for the whole process, and several apps can hold a
    # collection at once (tests build a few in one process). So the first start remembers how the
    # switch was and only the last stop restores it: an app that stops early must not turn automatic
    # collection back on under another one that is still running.
    _started: ClassVar[int] = 0
    _enabled_before_first: ClassVar[bool] = True

    def __init__(self, interval_s: float = 1.0) -> None:
        self._interval_s = interval_s
        self._collector: GarbageCollector | None = None

    @property
    def active(self) -> bool:
        return self._collector is not None

    def start(self) -> None:
        """Call on the GUI thread once a QApplication exists."""
        if self._collector is not None:
            return
        if GuiThreadCollection._started == 0:
            GuiThreadCollection._enabled_before_first = gc.isenabled()
        GuiThreadCollection._started += 1
        self._collector = GarbageCollector(interval=self._interval_s)  # disables automatic collection

    def stop(self) -> None:
        """Stop the timer, collect what is left (here, on the GUI thread) and, if no other collection
        is still running, restore automatic collection as the first start found it."""
        if self._collector is None:
            return
        self._collector.timer.stop()
        self._collector = None
        GuiThreadCollection._started -= 1
        gc.collect()
        if GuiThreadCollection._started == 0 and GuiThreadCollection._enabled_before_first:
            gc.enable()
