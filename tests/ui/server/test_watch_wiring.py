"""The app's watchdog fed from what the app reads: log lines and statuses through the server controller (on
the loop thread), GPU samples through a real Sampler, server samples through the telemetry poller's tap, and
its events on the dashboard (GUI thread) — with a small log reader of the tests' own."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import pytest

from app.adapters.aio import LoopThread
from app.adapters.telemetry.host import HostProbe
from app.adapters.telemetry.sampler import Sampler
from app.core.memory.verdict import Verdict
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.throughput import TokenMeter
from app.core.watch.events import EventKind, Severity
from app.core.watch.signals import EngineExited, LaunchSeen, LogSignal, ServerListening
from app.services.watchdog import Watchdog
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.server.controller import ServerController
from app.ui.server.watch import ServerWatch, asked_for
from tests.backends.llama_server.recorded_samples import recorded_samples
from tests.fakes.scripted_gpu import RTX_4090, GpuReading, ScriptedGpuBackend, gpu_with


class LineReader:
    """Reads three kinds of line and notes the thread it was called on."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def read(self, line: str) -> Sequence[LogSignal]:
        self.threads.add(threading.current_thread().name)
        if "exit status" in line:
            return [EngineExited(line, error=line.rsplit(": ", 1)[-1])]
        if "listening on" in line:
            return [ServerListening(line)]
        if "n_slots" in line:
            return [LaunchSeen(line, parallel=int(line.rsplit("=", 1)[-1]))]
        return []


@pytest.fixture
def loop():
    with LoopThread() as running:
        yield running


@pytest.fixture
def wired(qtbot, loop, page_context):
    """A server controller (no supervisor: its callbacks are called as a supervisor calls them, on the loop
    thread), a ServerWatch tapped into it, and a dashboard on the same watchdog."""
    settings = {"now": ServerSettings(num_parallel=4, port=8080)}
    readers: list[LineReader] = []

    def reader() -> LineReader:
        readers.append(LineReader())
        return readers[-1]

    controller = ServerController(loop, None, lambda _url: None, lambda _s: None, last_good=settings["now"])
    watchdog = Watchdog()
    watch = ServerWatch(watchdog, reader, lambda: settings["now"])
    controller.tap(on_log=watch.on_log, on_status=watch.on_status, on_loaded=watch.on_loaded)
    page = DashboardPage(page_context(loop=loop, server=controller, watchdog=watchdog, gpu=gpu_with(RTX_4090)))
    qtbot.addWidget(page)
    page.resize(1280, 720)
    page.show()
    yield controller, watch, page, readers, settings
    page.shutdown()
    controller.shutdown()


def on_loop(loop: LoopThread, *calls) -> None:
    """Make the calls on the loop thread, as the supervisor does, and wait for them."""

    async def run() -> None:
        for fn, arg in calls:
            fn(arg)

    loop.run(run(), timeout=10)


def test_a_log_line_through_the_controller_is_an_event_in_the_list_read_off_the_gui_thread(qtbot, loop, wired):
    controller, _watch, page, readers, _settings = wired
    line = 'time=2026-12-02T12:00:00 level=ERROR msg="llama runner terminated" error="exit status 2": exit status 2'
    on_loop(loop, (controller.on_log, line))
    qtbot.waitUntil(lambda: len(page.events.events) == 1, timeout=5000)
    event = page.events.events[0]
    assert event.kind is EventKind.SERVER_CRASHED and event.severity is Severity.SEVERE
    assert event.evidence[0].text == line
    assert page.tabs.tabText(page.tabs.indexOf(page.events)) == "Events (1)"
    assert readers[-1].threads and threading.main_thread().name not in readers[-1].threads


def test_statuses_feed_it_and_a_start_by_the_app_is_a_new_server_with_one_history(qtbot, loop, wired):
    controller, watch, page, readers, settings = wired
    followed = watch.servers_followed
    on_loop(loop, (controller.on_log, "main: server is listening on http://127.0.0.1:8080"),
            (controller.on_status, ServerStatus(ServerState.RUNNING_MANAGED, pid=100)),
            (controller.on_status, ServerStatus(ServerState.CRASHED, exit_code=137, message="killed")))
    qtbot.waitUntil(lambda: len(page.events.events) == 1, timeout=5000)
    assert page.events.events[0].kind is EventKind.SERVER_CRASHED
    assert page.events.events[0].subject == "http://127.0.0.1:8080"
    # The app starts it again with other settings: a fresh reader, so its "listening" is no restart.
    settings["now"] = ServerSettings(num_parallel=4, port=8081)
    on_loop(loop, (controller.on_status, ServerStatus(ServerState.STARTING, pid=101)),
            (controller.on_log, "main: server is listening on http://127.0.0.1:8081"),
            (controller.on_log, "srv: n_slots = 2"),
            (controller.on_status, ServerStatus(ServerState.RUNNING_MANAGED, pid=101)))
    qtbot.waitUntil(lambda: len(page.events.events) == 2, timeout=5000)
    assert watch.servers_followed == followed + 1 and len(readers) == 2
    second = page.events.events[1]
    assert second.kind is EventKind.FEWER_SLOTS and second.subject == "http://127.0.0.1:8081"
    assert [e.kind for e in watch.watchdog.events()] == [EventKind.SERVER_CRASHED, EventKind.FEWER_SLOTS]


def test_gpu_samples_from_a_real_sampler_feed_it(qtbot, wired):
    _controller, watch, page, _readers, _settings = wired
    # Another program takes 14 GiB while the server holds 9 GiB: 560 MiB of the 4090 left.
    gpu = ScriptedGpuBackend(script=[GpuReading(10_000.0, 50.0, 200.0, 60.0, 9_000.0),
                                     GpuReading(24_004.0, 50.0, 200.0, 60.0, 9_000.0)])
    sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [os.getpid()], token_meter=TokenMeter(), interval_s=0.05,
                      on_sample=watch.on_sample)
    sampler.start()
    try:
        qtbot.waitUntil(lambda: any(e.kind is EventKind.VRAM_FROM_OTHERS for e in page.events.events), timeout=5000)
    finally:
        assert sampler.stop()
    event = next(e for e in page.events.events if e.kind is EventKind.VRAM_FROM_OTHERS)
    assert event.evidence[0].figures["others_mib"] == pytest.approx(15_004.0)


def test_server_samples_and_loaded_models_reach_it(qtbot, wired):
    _controller, watch, page, _readers, _settings = wired
    watch.settings_applied(ServerSettings(num_parallel=4, port=8080))
    for sample in recorded_samples():  # the real llama-server's answers: 2 slots, one request waiting
        watch.on_server_sample(sample)
    qtbot.waitUntil(lambda: {e.kind for e in page.events.events} >= {EventKind.FEWER_SLOTS,
                                                                       EventKind.REQUESTS_DEFERRED}, timeout=5000)


def test_what_is_asked_comes_from_the_settings_and_the_price_of_the_same_settings():
    s = ServerSettings(num_parallel=2, context_length=None)

    class Est:
        n_ctx_total = 8192
        verdict = Verdict.FITS
        cpu_only = False

    priced = asked_for(s, s.replace(port=9999), Est())  # type: ignore[arg-type]
    assert (priced.parallel, priced.context_per_slot, priced.fits_on_gpu) == (2, 4096, True)
    other = asked_for(s, s.replace(num_parallel=4), Est())  # type: ignore[arg-type]
    assert (other.parallel, other.context_per_slot, other.fits_on_gpu) == (2, None, None)
    assert asked_for(ServerSettings(num_parallel=1, context_length=2048)).context_per_slot == 2048
