"""The supervisor's log hook: every line of the server's log reaches the child watch of its address,
whether the log is a managed server's output (the stand-in `ollama`) or an attached desktop app's
log file; a stop forgets the child. With a readable log file and a real llama-server named in it, the
attached server's child slots are read."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.adapters.process import procs
from app.adapters.process.attached_log import follow_file
from app.backends.ollama.child import ChildWatches
from app.backends.ollama.child_telemetry import OllamaChildTelemetry
from app.core.server.settings import ServerSettings
from app.core.server.state import ExternalKind, ServerState
from tests.backends.llama_server.engine_server import llama_server
from tests.backends.ollama.test_child_telemetry import STARTED, starting_line
from tests.fakes.ollama.server_fixtures import free_port

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[2] / "data" / "ollama"


def test_a_managed_servers_log_reaches_its_watch_and_a_stop_forgets_the_child(make_supervisor) -> None:
    children = ChildWatches()
    h = make_supervisor(ServerSettings(port=free_port()), children=children)
    watch = children.watch(h.supervisor.settings.base_url)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    assert watch.state.server_lines > 0  # the lines the Server page shows reach the watch too
    watch.feed(starting_line("/x/llama-server", "/m.gguf", 5001))
    assert watch.state.command.port == 5001
    h.run(h.supervisor.stop())
    assert watch.state.command is None and watch.state.server_lines == 0  # its child went with it


@pytest.mark.engine
def test_an_attached_server_whose_log_is_read_has_its_childs_slots_read(
        make_supervisor, external_standin, tmp_path, monkeypatch, llama_server_binary, bundled_model) -> None:
    monkeypatch.setattr(procs, "external_kind_of", lambda _pid, _server: ExternalKind.TRAY_APP)
    log = tmp_path / "server.log"
    recorded = (DATA / "log_starting_llama_server.txt").read_text().splitlines()
    log.write_text("\n".join(recorded[:12]) + "\n")  # what the desktop app's Ollama logged before any load
    ext = external_standin()
    children = ChildWatches()
    h = make_supervisor(ServerSettings(port=ext.port), children=children,
                        log_follower_for=lambda _kind: lambda sink: follow_file(sink, log, poll_s=0.02))
    assert h.run(h.supervisor.probe()).state is ServerState.RUNNING_ATTACHED
    h.logs.wait_for("vram-based default context")
    base = h.supervisor.settings.base_url
    telemetry = OllamaChildTelemetry(base, children=children)
    waiting = h.run(telemetry.sample())
    assert "has not started a llama-server in the 12 log lines read so far" in waiting.slots_reason
    with llama_server(llama_server_binary, bundled_model, tmp_path, ("-np", "2", "-c", "2048", "-t", "2")) as child:
        port = int(child.base_url.rsplit(":", 1)[1])
        with log.open("a") as out:  # the desktop app's Ollama loads a model
            out.write(starting_line(str(llama_server_binary), str(bundled_model), port) + "\n" + STARTED + "\n")
        h.logs.wait_for("llama-server started in")
        sample = h.run(telemetry.sample())
        h.run(telemetry.aclose())
    assert (sample.slots_total, sample.slots_busy) == (2, 0)
    assert sample.source.startswith(f"Ollama's llama-server at 127.0.0.1:{port} · -np 2")
    assert ext.process.poll() is None  # the attached server is never touched
