"""The app's supervisor and GUI on the real Ollama 0.32.15: attach without touching it, manage its own
`ollama serve`, stop it with nothing left behind, and see crashes (its llama-server, or the server
itself) within two seconds."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.services.prompts import PromptOptions, PromptRequest, stream_reply
from tests.fakes.ollama.server_fixtures import free_port, is_gone
from tests.ollama_real_fixtures import MODEL_NAME, llama_server_children

pytestmark = pytest.mark.ollama_real
VERSION = "0.32.15"
CRASH_SEEN_S = 2.0  # the README's promise: a crash is reported within two seconds


def _tree(pid: int) -> list[int]:
    try:
        root = psutil.Process(pid)
        return [root.pid] + [p.pid for p in root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def test_attaches_to_a_real_server_and_leaves_it_running(make_real_ollama, real_supervisor):
    server = make_real_ollama()
    harness = real_supervisor(ServerSettings(port=server.port))
    status = harness.run(harness.supervisor.probe(), timeout=30)

    assert status.state is ServerState.RUNNING_ATTACHED, status.message
    assert status.version == VERSION and status.pid == server.pid
    assert f"Attached to Ollama {VERSION} at {server.base_url}" in status.message
    stopped = harness.run(harness.supervisor.stop(), timeout=30)
    assert stopped.state is ServerState.RUNNING_ATTACHED  # never stops what it did not start
    harness.run(harness.supervisor.close(), timeout=30)
    assert server.process is not None and server.process.poll() is None


def test_manages_its_own_server_and_stops_it_with_its_llama_server(real_supervisor):
    harness = real_supervisor(ServerSettings(port=free_port(), context_length=1024))
    status = harness.run(harness.supervisor.start(), timeout=90)
    assert status.state is ServerState.RUNNING_MANAGED, status.message
    assert status.version == VERSION
    harness.logs.wait_for(f"(version {VERSION})")

    async def load() -> None:
        async with OllamaClient(harness.supervisor.settings.base_url) as client:
            await client.load(MODEL_NAME)

    harness.run(load(), timeout=90)
    runners = llama_server_children(status.pid)
    assert len(runners) == 1, "the load started one llama-server below ollama serve"
    tree = _tree(status.pid)

    stopped = harness.run(harness.supervisor.stop(), timeout=60)
    assert stopped.state is ServerState.STOPPED, stopped.message
    assert all(is_gone(pid) for pid in tree), [pid for pid in tree if not is_gone(pid)]


def test_a_killed_llama_server_ends_the_reply_with_the_real_error_within_two_seconds(make_real_ollama):
    server = make_real_ollama()
    loop = LoopThread(name="e2e-crash-loop")
    killed_at: list[float] = []
    ended_at: list[float] = []

    class KillOnFirstToken:
        def on_chunk(self, index, chunk):
            if not killed_at and chunk.content:
                for runner in server.runners():
                    runner.kill()
                killed_at.append(time.monotonic())

        def on_done(self, outcome):
            ended_at.append(time.monotonic())

    async def reply():
        async with OllamaClient(server.base_url) as client:
            request = PromptRequest(MODEL_NAME, "Write a long story about a lighthouse.", think=None,
                                    options=PromptOptions(num_predict=2000, seed=1))
            return await stream_reply(client, request, sink=KillOnFirstToken())

    try:
        outcome = loop.run(reply(), timeout=120)
    finally:
        loop.stop()
    assert killed_at, "the reply never produced a token"
    assert outcome.error is not None and not outcome.ok
    assert "an error was encountered while running the model" in outcome.error.message
    assert ended_at[0] - killed_at[0] < CRASH_SEEN_S
    assert server.process is not None and server.process.poll() is None  # ollama serve itself lives on


def test_a_killed_server_is_reported_crashed_within_two_seconds_and_its_runner_stopped(real_supervisor):
    harness = real_supervisor(ServerSettings(port=free_port(), context_length=1024))
    status = harness.run(harness.supervisor.start(), timeout=90)
    assert status.state is ServerState.RUNNING_MANAGED, status.message

    async def load() -> None:
        async with OllamaClient(harness.supervisor.settings.base_url) as client:
            await client.load(MODEL_NAME)

    harness.run(load(), timeout=90)
    runner_pids = [p.pid for p in llama_server_children(status.pid)]
    before = len(harness.statuses.statuses)
    os.kill(status.pid, signal.SIGKILL)
    crashed = harness.statuses.wait_for(ServerState.CRASHED, timeout=CRASH_SEEN_S, after=before)

    assert crashed.exit_code == -signal.SIGKILL and "was killed by SIGKILL" in crashed.message, crashed.message
    # The app stops a dead server's runners (within its stop grace): wait for them to exit.
    runners = []
    for pid in runner_pids:
        try:
            runners.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(runners, timeout=15)
    assert not [p for p in alive if not is_gone(p.pid)], f"llama-server {runner_pids} outlived its killed ollama serve"


def _args(tmp_path: Path, url: str) -> argparse.Namespace:
    return argparse.Namespace(config_dir=str(tmp_path / "cfg"), url=url, page="dashboard", screenshot=None)


def test_the_window_attached_to_a_real_server_shows_its_version_and_the_model_on_the_cpu(
        qtbot, tmp_path, make_real_ollama, deck_factory):
    server = make_real_ollama()
    deck = deck_factory(_args(tmp_path, server.base_url))
    header = deck.window.header
    qtbot.waitUntil(lambda: header.state_pill.text() == ServerState.RUNNING_ATTACHED.value, timeout=30_000)
    qtbot.waitUntil(lambda: header.version_label.text() == f"Ollama {VERSION}", timeout=30_000)
    assert not deck.server_page.stop_button.isEnabled()

    async def load() -> None:
        async with OllamaClient(server.base_url) as client:
            await client.load(MODEL_NAME)

    deck.loop.run(load(), timeout=90)
    qtbot.waitUntil(lambda: MODEL_NAME in header.models_label.full_text(), timeout=30_000)
    assert "100% CPU" in header.models_label.full_text()  # no GPU here: /api/ps size_vram is 0
    deck.window.resize(1280, 720)  # the smallest window the app is made for shows the line whole
    qtbot.waitUntil(lambda: not header.models_label.is_elided(), timeout=5_000)
