"""The pre-flight against real things: a port held by a socket this test opens, the stand-in `ollama serve` seen
through the real supervisor (its port in use by the server itself), and the embedded engine's real llama-server
started for one step's timing and stopped after."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import psutil
import pytest

from app.adapters.demo_script import load_script
from app.adapters.process.procs import loopback_port_holder
from app.backends.llama_server.engine import embedded_settings, engine_status
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.ollama.spec import OLLAMA
from app.core.demo.preflight import CheckVerdict
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.services.preflight import EngineFacts, PreflightTarget, check_model, check_port, check_server, check_step_time

PASS, WARN, FAIL = CheckVerdict.PASS, CheckVerdict.WARN, CheckVerdict.FAIL


def test_a_port_held_by_a_real_socket_fails_and_a_free_one_passes(make_supervisor) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert loopback_port_holder(port) is not None
        harness = make_supervisor(ServerSettings(port=port))
        target = PreflightTarget(OLLAMA, harness.supervisor, "Ollama")
        stopped = ServerStatus(ServerState.STOPPED, binary="ollama")
        check = harness.run(check_port(target, stopped, loopback_port_holder))
        assert check.verdict is FAIL, check.line()
        assert f"{port} on 127.0.0.1 is taken by" in check.detail and f"holds port {port}" in check.fix
    assert loopback_port_holder(port) is None  # closed: free again
    check = harness.run(check_port(target, stopped, loopback_port_holder))
    assert check.line() == f"PASS  port  {port} on 127.0.0.1 is free"


def test_the_servers_own_port_passes_as_in_use_by_the_server_itself(make_fake_ollama, make_supervisor) -> None:
    fake = make_fake_ollama()
    harness = make_supervisor(ServerSettings(port=fake.port))
    target = PreflightTarget(OLLAMA, harness.supervisor, "Ollama")
    check, status = harness.run(check_server(target))
    assert check.verdict is PASS and "answers at" in check.detail and status is not None
    port = harness.run(check_port(target, status, loopback_port_holder))
    assert port.verdict is PASS and "in use by the server itself" in port.detail
    assert harness.run(check_model(target, status)).verdict is PASS


@pytest.mark.engine
@pytest.mark.slow
def test_the_embedded_engine_is_started_for_one_step_and_stopped_after(tmp_path: Path, llama_server_binary,
                                                                       bundled_model) -> None:
    status = engine_status()
    engine = EngineFacts(status.ready, str(status.server), str(status.model), status.problems, status.commands)
    settings = embedded_settings()
    pids: list[int] = []

    def heard(s: ServerStatus) -> None:
        if s.pid is not None:
            pids.append(s.pid)

    async def scenario() -> tuple:
        server = LLAMA_SERVER.server(settings, on_status=heard, on_log=lambda line: None, runtime_dir=tmp_path / "run")
        target = PreflightTarget(LLAMA_SERVER.bound(lambda: settings), server, "llama-server (embedded)", engine)
        try:
            server_check, probed = await check_server(target)
            step = await check_step_time(load_script("builtin"), target, probed, max_tokens=8)
            return server_check, step, server.status
        finally:
            await server.close()

    server_check, step, after = asyncio.run(scenario())
    assert server_check.line() == f"PASS  server  llama-server (embedded) is installed: {llama_server_binary}"
    assert step.verdict in (PASS, WARN), step.line()
    assert re.match(r"\d+ tokens: TTFT \d+ ms, [\d.]+ tok/s; the script takes about ", step.detail), step.detail
    assert after.state is ServerState.STOPPED  # the pre-flight stopped what it started
    assert pids, "the engine was never started"
    gone, alive = psutil.wait_procs([psutil.Process(pid) for pid in set(pids) if psutil.pid_exists(pid)], timeout=30)
    assert not alive
    assert loopback_port_holder(settings.port) is None
