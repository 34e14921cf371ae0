"""Who may call a llama-server ollama-deck starts, on the real engine: only pages served from this
machine (llama-server's default CORS echoes any page's Origin, with credentials), only on the form's
address (an extra flag cannot move it), and the app's own clients still reach it whatever the shell
exported. Checked with real CORS preflights and requests carrying an Origin."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import psutil
import pytest

from app.backends.llama_server import tuning
from app.core.server.state import ServerState
from tests.backends.llama_server.test_supervisor import get_json, make_llama  # noqa: F401 - the fixture
from tests.fakes.ollama.server_fixtures import WAIT_S

pytestmark = pytest.mark.engine
EVIL = "http://evil.example"
LOCAL_PAGE = "http://127.0.0.1:3000"


def with_origin(port: int, path: str, origin: str, method: str = "GET", body: bytes | None = None,
                ) -> tuple[int, str | None]:
    """(status, Access-Control-Allow-Origin) of a request a page at `origin` makes (OPTIONS: the preflight)."""
    headers = {"Origin": origin}
    if method == "OPTIONS":
        headers |= {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    elif body is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S) as reply:
            reply.read()
            return reply.status, reply.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Access-Control-Allow-Origin")


def test_a_managed_server_answers_pages_from_this_machine_only(make_llama) -> None:  # noqa: F811
    h = make_llama()
    status = h.run(h.supervisor.start())
    assert status.state is ServerState.RUNNING_MANAGED, status.message
    port = h.supervisor.settings.port
    chat = json.dumps({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}).encode()

    # A page elsewhere: no Access-Control-Allow-Origin, so the browser lets it read nothing.
    assert with_origin(port, "/v1/chat/completions", EVIL, "OPTIONS")[1] is None
    assert with_origin(port, "/props", EVIL)[1] is None
    assert with_origin(port, "/v1/chat/completions", EVIL, "POST", chat)[1] is None
    # A page served from this machine is let in, as are the app's own requests (no Origin at all).
    assert with_origin(port, "/v1/chat/completions", LOCAL_PAGE, "OPTIONS")[1] == LOCAL_PAGE
    assert with_origin(port, "/props", "http://localhost:5173") == (200, "http://localhost:5173")
    assert get_json(port, "/props")[0] == 200 and get_json(port, "/slots")[0] == 200
    cmdline = psutil.Process(status.pid).cmdline()
    assert cmdline[cmdline.index("--cors-origins") + 1] == "localhost"


def test_a_cors_line_for_any_site_with_the_permission_lets_any_page_in(make_llama) -> None:  # noqa: F811
    h = make_llama(extra_settings="--cors-origins '*'", network_allowed_for="127.0.0.1")
    status = h.run(h.supervisor.start())
    assert status.state is ServerState.RUNNING_MANAGED, status.message

    assert with_origin(h.supervisor.settings.port, "/props", EVIL) == (200, EVIL)


def test_without_the_permission_a_cors_line_for_any_site_is_refused_and_spawns_nothing(make_llama) -> None:  # noqa: F811
    h = make_llama(extra_settings="--no-warmup --cors-origins '*'")
    status = h.run(h.supervisor.start())

    assert status.state is ServerState.STOPPED and "Did not start the server" in status.message
    assert "any web page you open in a browser (--cors-origins '*')" in status.message
    assert ServerState.STARTING not in h.statuses.states and h.supervisor.server_pids() == []


def test_a_host_flag_hidden_after_another_cannot_move_the_address(make_llama) -> None:  # noqa: F811
    # Saved settings the form would refuse (a hand-edited file): the server still listens where the form says.
    h = make_llama(extra_settings="--cache-reuse 256 --host 0.0.0.0")
    status = h.run(h.supervisor.start())
    assert status.state is ServerState.RUNNING_MANAGED, status.message

    listening = {conn.laddr.ip for conn in psutil.Process(status.pid).net_connections("inet")
                 if conn.status == psutil.CONN_LISTEN}
    assert listening == {"127.0.0.1"}
    cmdline = psutil.Process(status.pid).cmdline()
    assert "0.0.0.0" not in cmdline and cmdline[cmdline.index("--cache-reuse") + 1] == "256"


def test_an_exported_api_key_does_not_lock_the_app_out(make_llama, monkeypatch) -> None:  # noqa: F811
    monkeypatch.setenv("LLAMA_API_KEY", "from-the-shell")
    h = make_llama()
    status = h.run(h.supervisor.start())

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    assert status.version  # read from /props, which a key would have refused
    assert get_json(h.supervisor.settings.port, "/props")[0] == 200
    assert "LLAMA_API_KEY" not in psutil.Process(status.pid).environ()
    assert tuning.REFUSED_FLAGS["--api-key"].startswith("ollama-deck's own requests send no API key")
