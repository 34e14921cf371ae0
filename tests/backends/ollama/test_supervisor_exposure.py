"""The supervisor never opens a server to others without the permission for that host (real stand-in processes)."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import psutil
import pytest

from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.fakes.ollama.server_fixtures import WAIT_S, free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("settings", [
    ServerSettings(host="0.0.0.0"),
    ServerSettings(extra_settings="OLLAMA_ORIGINS=*"),
    # A permission for 0.0.0.0 does not carry over to another host.
    ServerSettings(host="0.0.0.0", network_allowed_for="0.0.0.0").replace(host="::"),
], ids=["all-interfaces", "any-web-origin", "permission-for-another-host"])
def test_an_exposed_start_without_permission_is_refused_and_spawns_nothing(
    make_supervisor, standin_ollama: Path, settings: ServerSettings
) -> None:
    h = make_supervisor(settings.replace(port=free_port()))

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.STOPPED
    address = h.supervisor.settings.bind_address
    assert f"Did not start the server on {address}" in status.message
    assert "delete your models" in status.message and "Allow network access on" in status.message
    assert ServerState.STARTING not in h.statuses.states
    assert h.supervisor.server_pids() == [] and h.logs.lines == []


def test_with_the_permission_for_0000_it_starts_there(make_supervisor, standin_ollama: Path) -> None:
    port = free_port()
    h = make_supervisor(ServerSettings(host="0.0.0.0", port=port, network_allowed_for="0.0.0.0"))

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    h.logs.wait_for(f"Listening on 0.0.0.0:{port}")  # the log is read back from its file, a moment later
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=WAIT_S) as reply:
        assert reply.read().decode() == "Ollama is running"
    # Restarting onto another exposed host drops the permission with the host, so it is refused.
    moved = h.run(h.supervisor.restart(h.supervisor.settings.replace(host="::")))
    assert moved.state is ServerState.STOPPED and "not allowed for ::" in moved.message


def test_inherited_host_and_origins_are_not_passed_on_and_the_message_says_so(
        make_supervisor, standin_ollama: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_ORIGINS", "*")
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0")
    port = free_port()
    h = make_supervisor(ServerSettings(port=port))

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    environ = psutil.Process(status.pid).environ()
    assert "OLLAMA_ORIGINS" not in environ and environ["OLLAMA_HOST"] == f"127.0.0.1:{port}"
    assert "Not passed on from the environment ollama-deck was started with: OLLAMA_HOST=0.0.0.0, " \
           "OLLAMA_ORIGINS=*" in status.message
