"""Test-wide setup: Qt runs offscreen; fixtures live in tests/fakes/*_fixtures.py."""

import gc
import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

pytest_plugins = [
    "tests.fakes.ollama.ollama_fixtures",
    "tests.fakes.ollama.server_fixtures",
    "tests.fakes.gpu_fixtures",
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
    gc.collect()
