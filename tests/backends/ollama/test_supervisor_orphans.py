"""Servers left behind by a killed app: a real app-like parent process starts the stand-in `ollama`
through a real ServerSupervisor and is SIGKILLed; what happens to the server, and what the next
supervisor makes of it."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request

import psutil
import pytest

from app.adapters.process.runtime_record import RecordBook
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.fakes.ollama.app_like_parent import is_gone, start_app_like_parent, wait_gone
from tests.fakes.ollama.server_fixtures import free_port

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
DIES_WITHIN_S = 5.0


@linux_only
def test_a_killed_app_takes_its_server_and_runner_along(tmp_path, standin_ollama):
    parent = start_app_like_parent(free_port(), tmp_path / "run")
    assert len(parent.tree) == 2 and parent.server_pid in parent.tree  # the server and its runner
    record_files = list((tmp_path / "run").glob("server-ollama-*.json"))
    assert [f.name for f in record_files] == [f"server-ollama-{parent.server_pid}.json"]

    parent.kill()

    assert wait_gone(parent.tree, DIES_WITHIN_S) == [], "the server outlived the app that was killed"


def test_the_next_start_adopts_a_server_left_behind_and_stop_kills_only_its_tree(
        tmp_path, make_supervisor, external_standin):
    runtime_dir = tmp_path / "run"
    port = free_port()
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)  # as on a platform without it
    bystander = external_standin()  # another `ollama serve`, not ours: must survive
    parent.kill()
    assert all(not is_gone(pid) for pid in parent.tree)  # left behind

    harness = make_supervisor(ServerSettings(port=port), runtime_dir=runtime_dir)
    status = harness.run(harness.supervisor.probe())

    assert status.state is ServerState.RUNNING_MANAGED and status.orphan and status.can_stop
    assert status.pid == parent.server_pid
    assert f"pid {parent.server_pid}" in status.message and "started earlier" in status.message
    assert "closed without stopping it" in status.message
    log_file = runtime_dir / f"server-ollama-{port}.log"
    assert f"Its log is read from {log_file}" in status.message
    harness.logs.wait_for("Listening on")  # its earlier lines, from the file it still writes to
    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/tags", timeout=5).read()
    harness.logs.wait_for('"/api/tags"')  # and what it writes now: a broken pipe would have killed it
    assert set(harness.supervisor.server_pids()) == set(parent.tree)
    record = json.loads((runtime_dir / f"server-ollama-{parent.server_pid}.json").read_text())
    assert record["app_pid"] == os.getpid()  # now this run's: another instance would leave it alone

    stopped = harness.run(harness.supervisor.stop())

    assert stopped.state is ServerState.STOPPED and f"pid {parent.server_pid}" in stopped.message
    assert wait_gone(parent.tree) == []
    assert not is_gone(bystander.pid) and all(not is_gone(p) for p in bystander.runner_pids())
    assert list(runtime_dir.glob("server-*.json")) == []


def test_an_adopted_server_that_dies_is_reported(tmp_path, make_supervisor):
    runtime_dir = tmp_path / "run"
    port = free_port()
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)
    parent.kill()
    harness = make_supervisor(ServerSettings(port=port), runtime_dir=runtime_dir)
    assert harness.run(harness.supervisor.probe()).orphan

    os.kill(parent.server_pid, signal.SIGTERM)  # someone else stops it

    crashed = harness.statuses.wait_for(ServerState.CRASHED)
    assert f"pid {parent.server_pid}" in crashed.message and "without being asked to stop" in crashed.message
    assert wait_gone(parent.tree) == [] and list(runtime_dir.glob("server-*.json")) == []


def test_runners_of_a_killed_server_are_stopped_on_the_next_start(tmp_path, make_supervisor):
    runtime_dir = tmp_path / "run"
    port = free_port()
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)
    runner = next(pid for pid in parent.tree if pid != parent.server_pid)
    parent.kill()
    os.kill(parent.server_pid, signal.SIGKILL)  # a SIGKILLed server cannot stop its runner
    assert wait_gone([parent.server_pid]) == [] and not is_gone(runner)

    harness = make_supervisor(ServerSettings(port=port), runtime_dir=runtime_dir)
    status = harness.run(harness.supervisor.probe())

    assert status.state is ServerState.STOPPED and f"pid {runner}" in status.message
    assert "left behind" in status.message
    assert is_gone(runner) and list(runtime_dir.glob("server-*.json")) == []


def test_a_clean_stop_removes_the_record_and_a_live_app_keeps_its_own(tmp_path, make_supervisor):
    runtime_dir = tmp_path / "run"
    first = make_supervisor(ServerSettings(port=free_port()), runtime_dir=runtime_dir)
    running = first.run(first.supervisor.start())
    assert running.state is ServerState.RUNNING_MANAGED and not running.orphan
    (record,) = RecordBook(runtime_dir).load_all()
    assert record.pid == running.pid and record.app_pid == os.getpid() and record.port == first.supervisor.settings.port
    assert record.cmdline == tuple(psutil.Process(running.pid).cmdline())

    # A second supervisor on the same port (a second window of the same app) sees a live app's server.
    second = make_supervisor(first.supervisor.settings, runtime_dir=runtime_dir)
    assert second.run(second.supervisor.probe()).state is ServerState.RUNNING_ATTACHED
    assert len(RecordBook(runtime_dir).load_all()) == 1

    first.run(first.supervisor.stop())
    assert RecordBook(runtime_dir).load_all() == []


def test_start_on_an_orphans_port_adopts_it_instead_of_spawning_another(tmp_path, make_supervisor, standin_ollama):
    from tests.fakes.ollama.server_fixtures import launched_from

    runtime_dir = tmp_path / "run"
    port = free_port()
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)
    parent.kill()
    harness = make_supervisor(ServerSettings(port=port), runtime_dir=runtime_dir)

    status = harness.run(harness.supervisor.start())

    assert status.state is ServerState.RUNNING_MANAGED and status.orphan and status.pid == parent.server_pid
    serving = [p.pid for p in launched_from(standin_ollama) if "serve" in p.cmdline()]
    assert serving == [parent.server_pid]  # no second `ollama serve` was started
    restarted = harness.run(harness.supervisor.restart())  # applying settings: ours replaces it
    assert restarted.state is ServerState.RUNNING_MANAGED and not restarted.orphan
    assert restarted.pid != parent.server_pid and wait_gone(parent.tree) == []
    assert [r.pid for r in RecordBook(runtime_dir).load_all()] == [restarted.pid]


def test_an_orphan_on_another_port_is_named_and_left_alone(tmp_path, make_supervisor):
    runtime_dir = tmp_path / "run"
    orphan_port = free_port()
    parent = start_app_like_parent(orphan_port, runtime_dir, die_with_app=False)
    parent.kill()
    harness = make_supervisor(ServerSettings(port=free_port()), runtime_dir=runtime_dir)

    status = harness.run(harness.supervisor.probe())

    assert status.state is ServerState.STOPPED and not status.orphan
    assert f"http://127.0.0.1:{orphan_port} (pid {parent.server_pid})" in status.message
    assert all(not is_gone(pid) for pid in parent.tree)  # not ours to stop from here
    assert len(RecordBook(runtime_dir).load_all()) == 1
