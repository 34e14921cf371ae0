"""Live slots of the real Ollama 0.32.15 (built from its source, ../shared/ollama) managed by the app's
supervisor, read by the same poller and Slots tab as the app's: a prompt makes a slot busy with
decoded tokens, then idle; a restart with another parallel is followed to the new child's port, with
as many slots as its -np. The poller finds the child only through the log the supervisor reads."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import urllib.request
from pathlib import Path

import psutil
import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.spec import OLLAMA
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.core.server_telemetry import ServerSample
from app.ui.app.telemetry_poller import ServerTelemetryPoller
from app.ui.pages.server.slots_view import SlotsView
from tests.ollama_real_fixtures import OllamaKit
from tests.fakes.raw_http import closed_port

pytestmark = [pytest.mark.ollama_real, pytest.mark.slow]

LOAD_WAIT_MS = 240_000  # a load and a reply on a busy 2-core machine
PROXY = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}


@pytest.fixture
def real_ollama(ollama_kit: OllamaKit) -> Path:
    """The real `ollama` program the suite found once (on PATH, or the kit laid out): skipped, or failed with
    DECK_REQUIRE_OLLAMA=1, with what is missing."""
    return ollama_kit.ollama


def post(url: str, body: dict, timeout_s: float = 300.0) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout_s) as reply:
        return json.loads(reply.read())


def answers_on(port: int) -> bool:
    """True once GET / on 127.0.0.1:port answers (the server is up)."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(f"http://127.0.0.1:{port}/",
                                                                             timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def children_on(port: int) -> list[psutil.Process]:
    """llama-server processes started with --port `port`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        words = proc.info["cmdline"] or []
        if words and words[0].endswith("llama-server") and "--port" in words and str(port) in words:
            found.append(proc)
    return found


def test_a_prompt_busies_a_slot_and_a_restart_is_followed_to_the_new_child(
        qtbot, tmp_path: Path, real_ollama: Path, bundled_model: Path, monkeypatch) -> None:
    for name, value in {**PROXY, "HOME": str(tmp_path / "home"), "OLLAMA_MODELS": str(tmp_path / "models")}.items():
        monkeypatch.setenv(name, value)  # the server's own folders; nothing leaves the machine
    settings = ServerSettings(port=closed_port(), num_parallel=2, context_length=1024)
    base = settings.base_url
    with LoopThread() as loop:
        supervisor = ServerSupervisor(settings, which=lambda _name: str(real_ollama), start_timeout_s=60.0,
                                      stop_grace_s=10.0)
        poller = ServerTelemetryPoller(loop, OLLAMA, lambda: base, interval_s=0.25)
        view = SlotsView()
        qtbot.addWidget(view)
        samples: list[ServerSample] = []
        poller.sample_ready.connect(samples.append)
        poller.sample_ready.connect(view.set_sample)
        poller.notice_changed.connect(view.set_notice)
        child_ports: list[int] = []
        try:
            started = loop.run(supervisor.start(), 90)
            assert started.state is ServerState.RUNNING_MANAGED, started.message
            poller.on_status(started)
            qtbot.waitUntil(lambda: "has not started a llama-server" in view.notice.text(), timeout=15_000)
            assert view.summary.text() == "No slots to show now"
            (tmp_path / "Modelfile").write_text(f"FROM {bundled_model}\n")
            subprocess.run([str(real_ollama), "create", "smollm2", "-f", str(tmp_path / "Modelfile")], check=True,
                           capture_output=True, env={**os.environ, "OLLAMA_HOST": settings.bind_address})

            replies: list[dict] = []
            body = {"model": "smollm2", "prompt": "Write a long story about a lighthouse keeper.", "stream": False,
                    "options": {"num_predict": 64, "temperature": 0}}
            thread = threading.Thread(target=lambda: replies.append(post(f"{base}/api/generate", body)))
            thread.start()
            qtbot.waitUntil(lambda: any(s.slots_busy == 1 and any(x.decoded for x in s.slots if x.busy)
                                        for s in samples), timeout=LOAD_WAIT_MS)
            busy = next(s for s in samples if s.slots_busy == 1 and any(x.decoded for x in s.slots if x.busy))
            assert busy.slots_total == 2 and all(x.n_ctx == 1024 for x in busy.slots)  # Ollama: -c = 1024 × -np
            qtbot.waitUntil(lambda: bool(replies) and view.summary.text() == "0 of 2 slots busy",
                            timeout=LOAD_WAIT_MS)
            thread.join()
            assert replies[0]["done"] and replies[0]["eval_count"] >= 1
            first = samples[-1]
            port = int(first.source.split("127.0.0.1:")[1].split(" ")[0])
            child_ports.append(port)
            assert "-np 2 · -c 2048 (1024 per slot)" in first.source and "loaded in" in first.source
            assert f"--port {port}" in first.server_command and "-np 2" in first.server_command
            assert "without --metrics" in view.notice.text()

            restarted = loop.run(supervisor.restart(settings.replace(num_parallel=3)), 120)
            assert restarted.state is ServerState.RUNNING_MANAGED, restarted.message
            poller.on_status(restarted)
            post(f"{base}/api/generate", {"model": "smollm2"})  # load: a new child, on a new port
            qtbot.waitUntil(lambda: view.table.rowCount() == 3 and view.summary.text() == "0 of 3 slots busy",
                            timeout=LOAD_WAIT_MS)
            second = samples[-1]
            new_port = int(second.source.split("127.0.0.1:")[1].split(" ")[0])
            child_ports.append(new_port)
            assert new_port != port and "-np 3 · -c 3072 (1024 per slot)" in second.source
            assert f"--port {new_port}" in view.logged_command and not children_on(port)

            post(f"{base}/api/generate", {"model": "smollm2", "keep_alive": 0})  # unload: the child exits
            qtbot.waitUntil(lambda: "no longer answers" in view.notice.text(), timeout=60_000)
            assert view.summary.text() == "No slots to show now" and "has exited" in view.source.text()
        finally:
            poller.close()
            loop.run(supervisor.close(), 60)
    assert not [p for port in child_ports for p in children_on(port)]  # no child outlives its server


def test_an_attached_ollama_whose_log_is_not_read_has_its_child_found_among_its_processes(
        qtbot, tmp_path: Path, real_ollama: Path, bundled_model: Path) -> None:
    port = closed_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, **PROXY, "HOME": str(tmp_path / "home"), "OLLAMA_MODELS": str(tmp_path / "models"),
           "OLLAMA_HOST": f"127.0.0.1:{port}", "OLLAMA_NUM_PARALLEL": "2", "OLLAMA_CONTEXT_LENGTH": "1024"}
    with open(tmp_path / "serve.log", "wb") as log:  # its log goes where the app does not look (a terminal's)
        server = subprocess.Popen([str(real_ollama), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        qtbot.waitUntil(lambda: server.poll() is None and answers_on(port), timeout=30_000)
        (tmp_path / "Modelfile").write_text(f"FROM {bundled_model}\n")
        subprocess.run([str(real_ollama), "create", "smollm2", "-f", str(tmp_path / "Modelfile")], check=True,
                       capture_output=True, env=env)
        post(f"{base}/api/generate", {"model": "smollm2"})  # loaded before the app attaches
        with LoopThread() as loop:
            supervisor = ServerSupervisor(ServerSettings(port=port), which=lambda _name: str(real_ollama))
            poller = ServerTelemetryPoller(loop, OLLAMA, lambda: base, interval_s=0.25)
            view = SlotsView()
            qtbot.addWidget(view)
            poller.sample_ready.connect(view.set_sample)
            poller.notice_changed.connect(view.set_notice)
            try:
                attached = loop.run(supervisor.probe(), 30)
                assert attached.state is ServerState.RUNNING_ATTACHED and attached.pid == server.pid
                poller.on_status(attached)
                qtbot.waitUntil(lambda: view.summary.text() == "0 of 2 slots busy", timeout=LOAD_WAIT_MS)
                (child,) = [p for p in psutil.Process(server.pid).children(recursive=True)
                            if p.name().startswith("llama-server")]
                assert f", pid {child.pid} · -np 2 · -c 2048 (1024 per slot)" in view.source.text()
                assert view.logged_command == " ".join(child.cmdline())  # its argv, word for word
                post(f"{base}/api/generate", {"model": "smollm2", "keep_alive": 0})  # unload: the child exits
                qtbot.waitUntil(lambda: "has exited" in view.source.text(), timeout=60_000)
                assert view.summary.text() == "No slots to show now"
            finally:
                poller.close()
                loop.run(supervisor.close(), 60)
        assert server.poll() is None  # an attached server is never stopped
    finally:
        server.terminate()
        server.wait(30)
