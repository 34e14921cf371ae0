"""The server view-model's parts on their own (lifecycle, status poller, model lookups), against the
stand-in Ollama over real sockets, and the controller that joins them for the pages."""

from __future__ import annotations

import dataclasses

import threading

import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.ui.server.lifecycle import ServerLifecycle
from app.ui.server.loop_gate import LoopGate
from app.core.server.url import settings_for_url
from app.ui.server.model_lookups import ModelLookups
from app.ui.server.controller import ServerController
from app.ui.server.status_poller import StatusPoller
from app.services.guarded_apply import GuardedApplier
from tests.fakes.scripted_gpu import ScriptedGpuBackend

NO_GPU = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")

WAIT_MS = 10_000


@pytest.fixture
def attached(fake_ollama):
    """(loop, gate, supervisor) with the supervisor pointed at the stand-in server."""
    loop = LoopThread(name="test-parts-loop")
    supervisor = ServerSupervisor(settings_for_url(ServerSettings(), fake_ollama.url))
    yield loop, LoopGate(loop, lambda: supervisor), supervisor
    loop.run(supervisor.close(), timeout=10)
    loop.stop()


def test_the_model_lookups_list_models_and_read_a_shape_on_their_own(qtbot, attached):
    _loop, gate, _supervisor = attached
    lookups = ModelLookups(gate, OllamaClient)
    with qtbot.waitSignal(lookups.models_listed, timeout=WAIT_MS) as listed:
        lookups.list_models()
    assert "qwen3:14b" in [m.name for m in listed.args[0]]
    with qtbot.waitSignal(lookups.model_shape_ready, timeout=WAIT_MS) as ready:
        lookups.fetch_model_shape("qwen3:14b")
    name, shape, error = ready.args
    assert name == "qwen3:14b" and error == "" and shape.n_layer == 40
    with qtbot.waitSignal(lookups.model_shape_ready, timeout=WAIT_MS) as missing:
        lookups.fetch_model_shape("nope:1b")
    assert missing.args[1] is None and missing.args[2].startswith("Cannot price nope:1b")


def test_a_held_lifecycle_refuses_start_stop_and_apply_with_the_reason(qtbot, attached):
    _loop, gate, _supervisor = attached
    saved: list[ServerSettings] = []
    lifecycle = ServerLifecycle(gate, saved.append)
    lifecycle.hold("A sweep owns the server.")
    for action in (lifecycle.start, lifecycle.stop, lambda: lifecycle.apply(ServerSettings(num_parallel=2))):
        with qtbot.waitSignal(lifecycle.error, timeout=WAIT_MS) as refused:
            future = action()
        assert future.cancelled() and refused.args == ["A sweep owns the server."]
    assert saved == [] and lifecycle.busy == 0
    lifecycle.release()
    with qtbot.waitSignal(lifecycle.busy_changed, timeout=WAIT_MS, check_params_cb=lambda busy: not busy):
        status = lifecycle.probe()
    assert status.result(5).state is ServerState.RUNNING_ATTACHED and lifecycle.probed


def test_an_apply_that_does_not_keep_puts_the_settings_in_force_without_saving_them(qtbot, attached):
    _loop, gate, supervisor = attached
    saved: list[ServerSettings] = []
    lifecycle = ServerLifecycle(gate, saved.append)
    kept, passing = (dataclasses.replace(supervisor.settings, num_parallel=n) for n in (2, 8))
    for settings, keep in ((passing, False), (kept, True)):
        with qtbot.waitSignal(lifecycle.settings_applied, timeout=WAIT_MS) as applied:
            future = lifecycle.apply(settings, keep=keep)
        assert applied.args == [settings]
        assert future.result(WAIT_MS / 1000).state is ServerState.RUNNING_ATTACHED
    assert saved == [kept]


def test_the_poller_batches_log_lines_and_follows_the_loaded_models(qtbot, attached, fake_ollama):
    loop, gate, supervisor = attached
    poller = StatusPoller(gate, OllamaClient)
    writer = threading.Thread(target=lambda: [poller.on_log(f"line {i}") for i in range(500)])
    batches: list[list[str]] = []
    poller.log_lines.connect(batches.append)
    writer.start()
    writer.join()
    qtbot.waitUntil(lambda: sum(len(b) for b in batches) == 500, timeout=WAIT_MS)
    assert len(batches) <= 3 and batches[0][0] == "line 0"  # batched, in order
    supervisor_status = loop.run(supervisor.probe(), timeout=10)
    poller.on_status(supervisor_status)  # running: the poller starts reading the loaded models

    async def load() -> None:
        async with OllamaClient(fake_ollama.url) as client:
            await client.load("qwen3:0.6b")

    with qtbot.waitSignal(poller.running_models_changed, timeout=WAIT_MS,
                          check_params_cb=lambda models: [m.name for m in models] == ["qwen3:0.6b"]):
        loop.run(load(), timeout=10)
    assert poller.status.state is ServerState.RUNNING_ATTACHED
    poller.stop()


def test_a_status_never_overtakes_the_log_lines_written_before_it(qtbot, attached):
    """The loop thread logs a stopped server's last lines, then the next server's start: the GUI sees them in
    that order, although lines wait for the next flush and a status does not (a late launch line of the old
    server was read as the new one's)."""
    _loop, gate, _supervisor = attached
    poller = StatusPoller(gate, OllamaClient)
    poller._log_timer.stop()  # no flush on its own: only the status can carry the lines out in time
    seen: list[object] = []
    poller.log_lines.connect(lambda lines: seen.extend(lines))
    poller.status_changed.connect(seen.append)
    starting = ServerStatus(ServerState.STARTING, "Starting…")

    def loop_thread() -> None:
        poller.on_log("old server: starting runner -np 1")
        poller.on_status(starting)
        poller.on_log("new server: listening")

    writer = threading.Thread(target=loop_thread)
    writer.start()
    writer.join()
    qtbot.waitUntil(lambda: starting in seen, timeout=WAIT_MS)
    assert seen == ["old server: starting runner -np 1", starting]
    poller._flush_log()
    assert seen[-1] == "new server: listening"
    poller.stop()


def test_the_controller_passes_on_its_parts_signals(qtbot, attached):
    loop, _gate, _unused = attached
    controller = ServerController(loop, None, OllamaClient, lambda _s: None)
    supervisor = ServerSupervisor(_unused.settings, on_status=controller.on_status, on_log=controller.on_log)
    controller.attach_supervisor(supervisor)
    seen: list[str] = []
    controller.held_changed.connect(seen.append)
    controller.lifecycle.hold("busy")
    controller.release()
    assert seen == ["busy", ""] and controller.held_reason == ""
    with qtbot.waitSignal(controller.status_changed, timeout=WAIT_MS):
        controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_ATTACHED, timeout=WAIT_MS)
    with qtbot.waitSignal(controller.models_listed, timeout=WAIT_MS):
        controller.lookups.list_models()
    controller.shutdown()


def test_serving_makes_the_controller_and_its_supervisor_in_one_step(qtbot, attached):
    loop, _gate, pointed = attached
    made = []

    def make_server(on_status, on_log):
        supervisor = ServerSupervisor(pointed.settings, on_status=on_status, on_log=on_log)
        made.append(supervisor)
        return supervisor

    controller = ServerController.serving(loop, make_server, OllamaClient, lambda _s: None,
                                          make_applier=lambda server: GuardedApplier(server, OllamaClient, NO_GPU))
    try:
        [supervisor] = made
        assert controller.supervisor is supervisor and controller.settings == pointed.settings
        assert controller.lifecycle.applier is not None
        with qtbot.waitSignal(controller.status_changed, timeout=WAIT_MS):  # the supervisor reports to it
            controller.probe()
        qtbot.waitUntil(lambda: controller.status.state is ServerState.RUNNING_ATTACHED, timeout=WAIT_MS)
    finally:
        controller.shutdown()
        loop.run(made[0].close(), timeout=10)


def test_before_a_supervisor_the_settings_are_the_last_good_ones(qtbot, attached):
    loop, _gate, _pointed = attached
    wanted = ServerSettings(num_parallel=3)
    controller = ServerController(loop, None, OllamaClient, lambda _s: None, last_good=wanted)
    try:
        assert controller.supervisor is None and controller.settings == wanted
    finally:
        controller.shutdown()
