"""Fixtures of the end-to-end tests on the real Ollama: the app's own supervisor driving it from a loop
thread, as the GUI and the CLI do (the kit and servers are tests/ollama_real_fixtures.py, registered in
tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.settings import ServerSettings
from tests.fakes.ollama.server_fixtures import LogRecorder, StatusRecorder, SupervisorHarness, free_port
from tests.ui.app.conftest import deck_factory  # noqa: F401 - the GUI composition root's fixture
from tests.ollama_real_fixtures import OllamaKit

START_TIMEOUT_S = 60.0  # a real start and a first load on a busy 2-core machine


@pytest.fixture
def real_supervisor(real_ollama_on_path: OllamaKit) -> Iterator[Callable[..., SupervisorHarness]]:
    """Factory: the app's ServerSupervisor for the real `ollama` on PATH on a free port, on its own loop
    thread; each is closed after the test (which stops a server it manages)."""
    loop = LoopThread(name="e2e-ollama-loop")
    made: list[SupervisorHarness] = []

    def make(settings: ServerSettings | None = None, **kwargs: object) -> SupervisorHarness:
        statuses, logs = StatusRecorder(), LogRecorder()
        options: dict[str, object] = {"start_timeout_s": START_TIMEOUT_S, "stop_grace_s": 10.0,
                                      "health_interval_s": 0.2}
        options.update(kwargs)
        supervisor = ServerSupervisor(settings or ServerSettings(port=free_port()), on_status=statuses,
                                      on_log=logs, **options)
        harness = SupervisorHarness(supervisor, loop, statuses, logs)
        made.append(harness)
        return harness

    yield make
    try:
        for harness in made:
            harness.run(harness.supervisor.close(), timeout=60)
    finally:
        loop.stop()
