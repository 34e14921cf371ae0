"""Test-wide setup: Qt runs offscreen; fixtures live in tests/fakes/*_fixtures.py."""

import gc
import os
import sys

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = [
    "tests.fakes.ollama.ollama_fixtures",
    "tests.fakes.ollama.server_fixtures",
    "tests.fakes.gpu_fixtures",
    "tests.engine_fixtures",
    "tests.ollama_real_fixtures",
    "tests.system_fixtures",
    "tests.fleet_fixtures",
]


def pytest_collection_finish(session: pytest.Session) -> None:
    """As in the app (app/ui/app/gc_policy.py): no automatic cyclic collection, which would run on
    whichever thread allocates — a fake server's, the asyncio loop's — and destroy the widgets that
    earlier tests left behind there, off the GUI thread. The main thread collects after each test."""
    gc.collect()
    gc.freeze()  # the modules' objects live for the whole session: no need to walk them every test
    gc.disable()


@pytest.fixture(autouse=True)
def _collect_on_the_main_thread():
    yield
    _delete_what_the_test_scheduled_for_deletion()
    gc.collect()


def _delete_what_the_test_scheduled_for_deletion() -> None:
    """pytest-qt closes a test's widgets with deleteLater(), and outside an event loop Qt keeps those
    deletions pending until the next test first waits. Destroying a few windows then frees thousands
    of Python objects inside that test, which lowers the allocation count the collectors compare with
    their thresholds: the next test would start with another test's deletions still to come."""
    if "PySide6.QtCore" not in sys.modules:
        return  # no Qt in this session: nothing can be pending
    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is not None:
        # First what the test's threads queued for its widgets (as qWait does), while they still exist.
        QCoreApplication.processEvents()
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
