"""Cyclic garbage is collected on the GUI thread only, so Qt objects are never destroyed elsewhere."""

from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QObject

from app.ui.app.gc_policy import GuiThreadCollection


class Holder:
    """A reference cycle around a QObject: only the cyclic collector can free it."""

    def __init__(self, died_on: list[str]) -> None:
        self.me = self
        self.obj = QObject()
        self._died_on = died_on

    def __del__(self) -> None:
        self._died_on.append(threading.current_thread().name)


def churn_on_a_worker() -> list:
    """Allocate container objects on another thread, as a server or the asyncio loop does; they stay
    alive (returned), so generation 0 stays past its threshold."""
    made: list = []

    def work() -> None:
        made.extend([i] for i in range(5_000))

    worker = threading.Thread(target=work, name="worker")
    worker.start()
    worker.join()
    return made


def test_without_the_policy_a_worker_thread_collects_gui_garbage():
    """The hazard itself: automatic collection runs on whichever thread allocates."""
    died_on: list[str] = []
    was_enabled = gc.isenabled()
    gc.collect()
    gc.enable()
    try:
        Holder(died_on)
        churn_on_a_worker()
    finally:
        if not was_enabled:
            gc.disable()
    # Off the GUI thread: on the worker, or on another thread an earlier test left allocating (the
    # hazard is the same: Qt objects die on a thread that is not theirs).
    assert died_on and died_on[0] != threading.current_thread().name, died_on


def test_with_the_policy_garbage_dies_on_the_gui_thread(qtbot):
    died_on: list[str] = []
    collection = GuiThreadCollection(interval_s=0.05)
    gc.collect()
    gc.enable()
    collection.start()
    try:
        assert collection.active and not gc.isenabled()
        Holder(died_on)
        alive = churn_on_a_worker()
        assert died_on == []  # the worker allocated plenty, but did not collect
        qtbot.waitUntil(lambda: died_on != [], timeout=5000)  # the GUI-thread timer did
        assert died_on == [threading.main_thread().name] and len(alive) == 5_000
        collection.stop()
        assert not collection.active and gc.isenabled()  # automatic collection given back as it was
    finally:
        collection.stop()
        gc.disable()  # the test session's own policy (tests/conftest.py)


def test_stop_collects_what_is_left_and_keeps_collection_off_if_it_was_off(qtbot):
    died_on: list[str] = []
    assert not gc.isenabled()  # the test session collects on the main thread itself
    collection = GuiThreadCollection(interval_s=60.0)
    collection.start()
    Holder(died_on)
    collection.stop()
    assert died_on == [threading.main_thread().name] and not gc.isenabled()



def test_an_app_that_stops_first_does_not_turn_collection_back_on_under_another(qtbot):
    first, second = GuiThreadCollection(interval_s=60.0), GuiThreadCollection(interval_s=60.0)
    gc.enable()
    try:
        first.start()
        second.start()
        first.stop()
        assert second.active and not gc.isenabled()  # the second app still collects on its GUI thread only
        second.stop()
        assert gc.isenabled()  # the last one out restores what the first one found
    finally:
        first.stop()
        second.stop()
        gc.disable()  # the test session's own policy (tests/conftest.py)
