"""ServerSupervisor against the stand-in `ollama` executable: real subprocesses, real sockets."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from pathlib import Path

import psutil
import pytest

from app.core.server.state import ExternalKind, ServerState
from app.core.server.settings import ServerSettings
from tests.fakes.ollama.server_fixtures import WAIT_S, free_port, is_gone
from tests.fakes.ollama.recorded import real_version

pytestmark = pytest.mark.slow


def answers(port: int) -> str:
    """The body of GET / on 127.0.0.1:port."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=WAIT_S) as reply:
        return reply.read().decode()


def load_model(port: int, model: str) -> None:
    """Ask the server to load a model (an empty generate), as `ollama run` does first."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/generate", data=json.dumps({"model": model}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT_S) as reply:
        assert json.loads(reply.read())["done_reason"] == "load"


def children_of(pid: int) -> list[int]:
    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


# ------------------------------------------------------------------ finding the binary


def test_missing_binary_is_not_installed_and_start_spawns_nothing(make_supervisor) -> None:
    h = make_supervisor(which=lambda _name: None)

    status = h.run(h.supervisor.probe())

    assert status.state is ServerState.NOT_INSTALLED
    assert "Install Ollama" in status.message and "Server page" in status.message
    assert h.run(h.supervisor.start()).state is ServerState.NOT_INSTALLED
    assert ServerState.STARTING not in h.statuses.states
    assert h.supervisor.server_pids() == []


def test_configured_binary_that_does_not_exist_is_named(make_supervisor, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "ollama"
    h = make_supervisor(ServerSettings(port=free_port()).with_options(ollama_binary=str(missing)))

    status = h.run(h.supervisor.probe())

    assert status.state is ServerState.NOT_INSTALLED
    assert str(missing) in status.message and "Server page" in status.message


def test_binary_found_and_port_free_is_stopped(make_supervisor, standin_ollama: Path) -> None:
    h = make_supervisor()

    status = h.run(h.supervisor.probe())

    assert status.state is ServerState.STOPPED
    assert status.binary == str(standin_ollama)


# ------------------------------------------------------------------ managing our own server


def test_start_and_stop_a_managed_server(make_supervisor, standin_ollama: Path) -> None:
    h = make_supervisor()

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.RUNNING_MANAGED
    assert status.version == real_version() and status.pid is not None
    assert h.statuses.states[-2:] == [ServerState.STARTING, ServerState.RUNNING_MANAGED]
    assert answers(h.supervisor.settings.port) == "Ollama is running"
    h.logs.wait_for("Listening on 127.0.0.1:")  # the log is read back from its file, a moment later
    pids = h.supervisor.server_pids()
    assert status.pid in pids and len(pids) == 2  # the server and its runner

    stopped = h.run(h.supervisor.stop())

    assert stopped.state is ServerState.STOPPED
    assert stopped.exit_code == 0
    assert all(is_gone(pid) for pid in pids)
    assert h.supervisor.server_pids() == []


def test_restart_gives_the_server_the_new_settings(make_supervisor, standin_ollama: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_OLLAMA_VERSION", "0.12.6")  # its runner line names parallel (0.32's: tests/e2e_ollama)
    h = make_supervisor(ServerSettings(port=free_port(), num_parallel=1))
    first = h.run(h.supervisor.start())
    old_pids = h.supervisor.server_pids()
    h.logs.wait_for("OLLAMA_NUM_PARALLEL:1 ")
    before = len(h.logs.lines)

    status = h.run(h.supervisor.restart(h.supervisor.settings.replace(num_parallel=4, kv_cache_type="q8_0")))

    assert status.state is ServerState.RUNNING_MANAGED and status.pid != first.pid
    config = h.logs.wait_for('msg="server config"', after=before)
    assert "OLLAMA_NUM_PARALLEL:4 " in config and "OLLAMA_KV_CACHE_TYPE:q8_0 " in config
    load_model(h.supervisor.settings.port, "qwen3:0.6b")  # the API server itself runs with 4 slots
    assert "parallel=4" in h.logs.wait_for('msg="starting runner"', after=before)
    assert all(is_gone(pid) for pid in old_pids)
    assert h.statuses.states[-4:] == [
        ServerState.STOPPING, ServerState.STOPPED, ServerState.STARTING, ServerState.RUNNING_MANAGED,
    ]


def test_inherited_tuning_variables_do_not_override_settings(
    make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OLLAMA_CONTEXT_LENGTH", "8192")
    monkeypatch.setenv("OLLAMA_NUM_PARALLEL", "9")
    monkeypatch.setenv("FAKE_OLLAMA_VERSION", "0.12.6")  # whose config line shows its default context, 4096
    h = make_supervisor(ServerSettings(port=free_port(), num_parallel=2))

    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED

    config = h.logs.wait_for('msg="server config"')
    assert "OLLAMA_CONTEXT_LENGTH:4096 " in config  # Ollama's own default, as the settings ask
    assert "OLLAMA_NUM_PARALLEL:2 " in config


def test_close_stops_a_managed_server(make_supervisor, standin_ollama: Path) -> None:
    h = make_supervisor()
    h.run(h.supervisor.start())
    pids = h.supervisor.server_pids()

    h.run(h.supervisor.close())

    assert all(is_gone(pid) for pid in pids)


# ------------------------------------------------------------------ failures


def test_crash_is_published_with_exit_code_and_last_lines(
    make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_AFTER_S", "1.0")
    h = make_supervisor()
    h.run(h.supervisor.start())
    server_pid = h.statuses.wait_for(ServerState.STARTING).pid
    assert server_pid is not None
    runner = children_of(server_pid)

    # The stand-in dies 1 s after listening; the report must follow the death within 2 s.
    crashed = h.statuses.wait_for(ServerState.CRASHED, timeout=1.0 + 2.0)

    assert crashed.exit_code == 2
    assert "exited with code 2" in crashed.message
    assert "panic: runtime error: invalid memory address" in crashed.message
    assert any(line.startswith("panic: runtime error") for line in crashed.last_log_lines)
    assert all(is_gone(pid) for pid in runner)  # the orphaned runner does not keep VRAM


def test_a_server_dying_during_start_is_reported_by_start(
    make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OLLAMA_START_DELAY_S", "30")
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_AFTER_S", "0.2")
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_EXIT_CODE", "1")
    monkeypatch.setenv("FAKE_OLLAMA_CRASH_MESSAGE", "Error: mkdir /usr/share/ollama: permission denied")
    h = make_supervisor()

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.CRASHED and status.exit_code == 1
    assert status.message.endswith("Error: mkdir /usr/share/ollama: permission denied")
    assert h.statuses.states == [ServerState.STARTING, ServerState.CRASHED]
    assert h.statuses.threads == {"test-supervisor-loop"}  # published on the loop thread
    assert h.supervisor.server_pids() == []


def test_a_killed_server_is_reported_within_two_seconds(make_supervisor, standin_ollama: Path) -> None:
    h = make_supervisor()
    status = h.run(h.supervisor.start())
    assert status.pid is not None
    runner = children_of(status.pid)

    os.kill(status.pid, signal.SIGKILL)  # the test plays the OOM killer
    crashed = h.statuses.wait_for(ServerState.CRASHED, timeout=2.0)

    assert crashed.exit_code == -signal.SIGKILL
    assert "killed by SIGKILL" in crashed.message
    assert any("inference compute" in line for line in crashed.last_log_lines)
    assert all(is_gone(pid) for pid in runner)


def test_hang_on_start_times_out_with_a_clear_error_and_leaves_nothing(
    make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OLLAMA_HANG_ON_START", "1")
    h = make_supervisor(start_timeout_s=1.0)
    pending = h.loop.submit(h.supervisor.start())
    h.logs.wait_for("discovering available GPUs")
    server_pid = h.statuses.wait_for(ServerState.STARTING).pid
    assert server_pid is not None
    tree = [server_pid, *children_of(server_pid)]

    status = pending.result(WAIT_S)

    assert status.state is ServerState.CRASHED
    assert "did not answer" in status.message and "within 1 s" in status.message
    assert "discovering available GPUs" in status.message
    assert any('msg="server config"' in line for line in status.last_log_lines)
    assert len(tree) == 2 and all(is_gone(pid) for pid in tree)
    assert h.supervisor.server_pids() == []


def test_server_ignoring_sigterm_is_killed_with_its_runner_after_the_grace(
    make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_OLLAMA_IGNORE_SIGTERM", "1")
    h = make_supervisor(stop_grace_s=0.5)
    h.run(h.supervisor.start())
    pids = h.supervisor.server_pids()
    assert len(pids) == 2

    status = h.run(h.supervisor.stop())

    assert status.state is ServerState.STOPPED
    assert status.exit_code == -signal.SIGKILL
    assert "did not stop within 0.5 s" in status.message
    assert all(is_gone(pid) for pid in pids)
    assert ServerState.CRASHED not in h.statuses.states


# ------------------------------------------------------------------ somebody else's port


def test_port_taken_by_a_web_server_is_a_conflict_and_nothing_is_killed(
    make_supervisor, standin_ollama: Path, plain_http_server
) -> None:
    port = plain_http_server.server_address[1]
    h = make_supervisor(ServerSettings(port=port))

    status = h.run(h.supervisor.probe())

    assert status.state is ServerState.PORT_CONFLICT
    assert f"Port {port}" in status.message and "taken" in status.message
    assert f"(pid {os.getpid()})" in status.message and "not Ollama" in status.message
    refused = h.run(h.supervisor.start())
    assert refused.state is ServerState.PORT_CONFLICT and refused.message == status.message
    assert ServerState.STARTING not in h.statuses.states
    assert "nginx" in answers(port)


def test_port_taken_by_something_that_is_not_http_is_a_conflict(
    make_supervisor, standin_ollama: Path, plain_tcp_server
) -> None:
    port = plain_tcp_server.server_address[1]
    h = make_supervisor(ServerSettings(port=port))

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.PORT_CONFLICT
    assert f"Port {port}" in status.message
    assert ServerState.STARTING not in h.statuses.states


# ------------------------------------------------------------------ attaching


def test_attaches_to_a_running_ollama_and_never_stops_it(
    make_supervisor, external_standin, standin_ollama: Path
) -> None:
    ext = external_standin()
    runners = ext.runner_pids()
    h = make_supervisor(ServerSettings(port=ext.port, num_parallel=4))

    status = h.run(h.supervisor.probe())

    assert status.state is ServerState.RUNNING_ATTACHED
    assert status.version == real_version()
    assert status.pid == ext.pid
    assert status.external_kind is ExternalKind.OTHER
    assert "Stop that server" in status.apply_hint
    assert set(h.supervisor.server_pids()) == {ext.pid, *runners}

    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_ATTACHED  # no second server
    refused = h.run(h.supervisor.stop())
    assert refused.state is ServerState.RUNNING_ATTACHED
    assert "never stops what it did not start" in refused.stop_disabled_reason
    restarted = h.run(h.supervisor.restart(h.supervisor.settings.replace(num_parallel=2)))
    assert restarted.state is ServerState.RUNNING_ATTACHED and restarted.pid == ext.pid
    h.run(h.supervisor.close())

    assert ServerState.STARTING not in h.statuses.states
    assert ext.process.poll() is None and not any(is_gone(pid) for pid in runners)
    assert answers(ext.port) == "Ollama is running"


def test_attached_server_going_away_is_reported(make_supervisor, external_standin, standin_ollama: Path) -> None:
    ext = external_standin()
    h = make_supervisor(ServerSettings(port=ext.port))
    assert h.run(h.supervisor.probe()).state is ServerState.RUNNING_ATTACHED

    ext.terminate()
    status = h.statuses.wait_for(ServerState.STOPPED)

    assert f"http://127.0.0.1:{ext.port} went away" in status.message
    assert h.supervisor.server_pids() == []
