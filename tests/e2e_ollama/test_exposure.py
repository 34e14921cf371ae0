"""Who may call a managed real Ollama 0.32.15 from a browser: only what the settings say. An
OLLAMA_ORIGINS (or OLLAMA_HOST) exported in the shell ollama-deck was started from is not passed on
to `ollama serve`, and the running message says so; the extra environment, where the exposure check
sees it, is the one place to let other sites in. Checked with real CORS preflights."""

from __future__ import annotations

import urllib.error
import urllib.request

import psutil
import pytest

from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.fakes.ollama.server_fixtures import free_port

pytestmark = pytest.mark.ollama_real
EVIL = "http://evil.example"


def preflight(base_url: str, origin: str) -> tuple[int, str | None]:
    """(status, Access-Control-Allow-Origin) of the preflight a browser sends before a page's POST /api/chat."""
    request = urllib.request.Request(f"{base_url}/api/chat", method="OPTIONS", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Access-Control-Allow-Origin")


def test_an_inherited_wildcard_origin_does_not_reach_the_managed_server(real_supervisor, monkeypatch):
    monkeypatch.setenv("OLLAMA_ORIGINS", "*")
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:11434")
    port = free_port()
    harness = real_supervisor(ServerSettings(port=port))

    status = harness.run(harness.supervisor.start(), timeout=90)

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    base_url = harness.supervisor.settings.base_url
    assert preflight(base_url, EVIL) == (403, None)  # Ollama's own answer to a page it does not allow
    assert preflight(base_url, "http://127.0.0.1:3000") == (204, "http://127.0.0.1:3000")
    environ = psutil.Process(status.pid).environ()
    assert "OLLAMA_ORIGINS" not in environ and environ["OLLAMA_HOST"] == f"127.0.0.1:{port}"
    assert "Not passed on from the environment ollama-deck was started with: OLLAMA_HOST=0.0.0.0:11434, " \
           "OLLAMA_ORIGINS=*" in status.message


def test_a_wildcard_origin_in_the_extra_environment_reaches_it_with_the_permission(real_supervisor):
    settings = ServerSettings(port=free_port(), extra_settings="OLLAMA_ORIGINS=*", network_allowed_for="127.0.0.1")
    harness = real_supervisor(settings)

    status = harness.run(harness.supervisor.start(), timeout=90)

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    assert preflight(harness.supervisor.settings.base_url, EVIL) == (204, "*")
    assert "Not passed on" not in status.message
