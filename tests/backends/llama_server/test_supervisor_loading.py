"""A model that takes a while to load: /health's 503 "Loading model" is progress, and the start
timeout counts from the spawn. The real server loads SmolLM2 too fast to watch, so a stand-in
replays its recorded /health answers (tests/fakes/llama_server/standin_llama_server.py)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import sys
import threading
from pathlib import Path

import httpx
import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server import probe
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import llama_server_settings
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from tests.fakes.ollama.server_fixtures import WAIT_S, StatusRecorder, free_port, is_gone

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
RECORDED = json.loads((ROOT / "tests/data/llama_server/health.json").read_text(encoding="utf-8"))


@pytest.fixture
def standin(tmp_path: Path) -> Path:
    """An executable `llama-server` that runs the stand-in with this interpreter."""
    launcher = tmp_path / "bin" / "llama-server"
    launcher.parent.mkdir()
    launcher.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                        "from tests.fakes.llama_server.standin_llama_server import main\nsys.exit(main())\n")
    launcher.chmod(0o755)
    return launcher


def _supervisor(standin: Path, tmp_path: Path, start_timeout_s: float) -> tuple[LlamaServerSupervisor, StatusRecorder]:
    model = tmp_path / "slow.gguf"
    model.write_bytes(b"GGUF" + bytes(60))
    settings = llama_server_settings(ServerSettings(backend="llama_server", port=free_port()),
                                     binary=str(standin), model_path=str(model))
    statuses = StatusRecorder()
    return LlamaServerSupervisor(settings, on_status=statuses, start_timeout_s=start_timeout_s, stop_grace_s=2.0,
                                 runtime_dir=tmp_path / "run"), statuses


def _response(answer: dict) -> httpx.Response:
    return httpx.Response(answer["status"], json=answer["body"], headers={"Server": answer["server"]})


def test_the_recorded_health_answers_read_as_loading_and_ready():
    loading = probe.read_health(_response(RECORDED["loading"]))
    assert loading.is_llama_server and loading.loading and not loading.ready
    ready = probe.read_health(_response(RECORDED["ready"]))
    assert ready.is_llama_server and ready.ready
    assert not probe.read_health(httpx.Response(503, text="busy")).is_llama_server  # no header, no body
    other = probe.read_health(httpx.Response(200, json={"status": "ok"}, headers={"Server": "nginx"}))
    assert not other.is_llama_server and not other.ready  # many programs answer /health like this
    recorded = RECORDED["props"]["build_info"]
    assert probe.version_of(RECORDED["props"]) == ("local build" if recorded == probe.UNSTAMPED_BUILD else recorded)
    assert probe.version_of({"build_info": "b6123-abc1234"}) == "b6123-abc1234"
    assert probe.version_of({"build_info": "b0-unknown"}) == "local build" and probe.version_of({}) is None


def test_loading_is_progress_until_the_model_is_in(supervisor_loop: LoopThread, standin: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_LLAMA_LOAD_S", "1.5")
    supervisor, statuses = _supervisor(standin, tmp_path, start_timeout_s=30.0)

    status = supervisor_loop.run(supervisor.start(), 40)

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    loading = [s for s in statuses.statuses if s.state is ServerState.STARTING and "is loading" in s.message]
    assert len(loading) == 1 and str(tmp_path / "slow.gguf") in loading[0].message
    supervisor_loop.run(supervisor.close(), WAIT_S)
    assert status.pid is not None and is_gone(status.pid)


def test_the_start_timeout_counts_from_the_spawn(supervisor_loop: LoopThread, standin: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_LLAMA_LOAD_S", "60")
    supervisor, statuses = _supervisor(standin, tmp_path, start_timeout_s=2.0)

    status = supervisor_loop.run(supervisor.start(), 30)

    assert status.state is ServerState.CRASHED
    assert "did not become ready" in status.message and "within 2 s" in status.message
    assert "slow.gguf" in status.message and "raise the start timeout" in status.message
    started = next(s for s in statuses.statuses if s.state is ServerState.STARTING)
    assert started.pid is not None and is_gone(started.pid) and supervisor.server_pids() == []
    supervisor_loop.run(supervisor.close(), WAIT_S)


class _OkHealth(http.server.BaseHTTPRequestHandler):
    """Another program's health endpoint, worded as many are."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
        data = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return None


def test_another_programs_ok_health_is_a_port_conflict(supervisor_loop: LoopThread, standin: Path, tmp_path: Path):
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OkHealth)
    thread = threading.Thread(target=other.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        supervisor, statuses = _supervisor(standin, tmp_path, start_timeout_s=5.0)
        supervisor.settings = supervisor.settings.replace(port=other.server_address[1])

        status = supervisor_loop.run(supervisor.start(), WAIT_S)

        assert status.state is ServerState.PORT_CONFLICT and "which is not llama-server" in status.message
        assert ServerState.STARTING not in statuses.states
        supervisor_loop.run(supervisor.close(), WAIT_S)
    finally:
        other.shutdown()
        other.server_close()
        thread.join(WAIT_S)


def test_a_sigkill_is_said_for_what_it_is_with_the_last_lines_not_a_line_from_the_start(
        supervisor_loop: LoopThread, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A CUDA build on a machine without a GPU says so first; nothing to do with a later kill.
    monkeypatch.setenv("FAKE_LLAMA_EARLY_LINES", "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable "
                                                 "device is detected\nbuild: 6123 (abc1234) with cc for x86_64")
    supervisor, statuses = _supervisor(standin, tmp_path, start_timeout_s=30.0)
    running = supervisor_loop.run(supervisor.start(), 40)
    assert running.state is ServerState.RUNNING_MANAGED and running.pid is not None, running.message
    after = len(statuses.statuses)
    try:
        os.kill(running.pid, signal.SIGKILL)
        crashed = statuses.wait_for(ServerState.CRASHED, timeout=WAIT_S, after=after)
    finally:
        supervisor_loop.run(supervisor.close(), WAIT_S)
    text = crashed.message
    assert text.startswith("llama-server was killed by SIGKILL without being asked to stop; SIGKILL comes from "
                           "outside the server")
    assert "out-of-memory killer" in text and "journalctl -k" in text and "fewer parallel slots" in text
    assert "Its last lines:" in text and f"listening on http://127.0.0.1:{supervisor.settings.port}" in text
    assert "failed to initialize CUDA" not in text  # the early line is not the reason
    assert "0.00.000.002 I" not in text  # quoted without the log's timestamps


def test_a_build_for_another_cpu_dying_of_sigill_is_said_with_what_to_do(
        supervisor_loop: LoopThread, standin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_LLAMA_EARLY_LINES", "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable "
                                                 "device is detected")
    monkeypatch.setenv("FAKE_LLAMA_DIE_BY", "SIGILL")
    supervisor, statuses = _supervisor(standin, tmp_path, start_timeout_s=30.0)
    try:
        status = supervisor_loop.run(supervisor.start(), 40)
    finally:
        supervisor_loop.run(supervisor.close(), WAIT_S)
    crashed = next(s for s in statuses.statuses if s.state is ServerState.CRASHED)
    assert status.state is ServerState.CRASHED and crashed.exit_code == -signal.SIGILL
    text = crashed.message
    assert text.startswith("llama-server was killed by SIGILL without being asked to stop; SIGILL: it ran an "
                           "instruction this processor does not run")
    assert "AMX" in text and "Illegal instruction" in text
    assert "Install or build a llama-server for this machine" in text
    assert f"Its last lines: “ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected” | " \
           f"“srv    load_model: loading model '{tmp_path / 'slow.gguf'}'”." in text
