"""LlamaServerSupervisor on the real llama-server with the bundled SmolLM2 model: start, health,
restart with new flags, stop with nothing left behind, attach without ever signalling, port
conflicts, bad model files and a crash. Each server is small: -c 2048 in all, -t 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import httpx
import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server import probe
from app.backends.llama_server.client import LlamaServerClient
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import llama_server_settings
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.services.guarded_apply import GuardedApplier
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from tests.fakes.ollama.server_fixtures import WAIT_S, LogRecorder, StatusRecorder, free_port, is_gone, kill_tree

START_S = 60.0  # SmolLM2 loads in about a second; a busy 2-core machine may take far longer


def get_json(port: int, path: str) -> tuple[int, Any]:
    """(status, JSON body) of GET path on 127.0.0.1:port."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT_S) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


@dataclass
class Harness:
    supervisor: LlamaServerSupervisor
    loop: LoopThread
    statuses: StatusRecorder
    logs: LogRecorder
    runtime_dir: Path

    def run(self, coro: Any, timeout: float = START_S) -> Any:
        return self.loop.run(coro, timeout)


@pytest.fixture
def make_llama(supervisor_loop: LoopThread, tmp_path: Path, llama_server_binary: Path,
               bundled_model: Path) -> Iterator[Callable[..., Harness]]:
    """Factory: a supervisor for the bundled model on a free port (closed after the test)."""
    made: list[Harness] = []

    def make(model: Path | None = None, **fields: Any) -> Harness:
        base = ServerSettings(backend="llama_server", port=free_port(), context_length=2048)
        settings = llama_server_settings(base.replace(**fields), binary=str(llama_server_binary),
                                         model_path=str(model or bundled_model), threads=2)
        statuses, logs = StatusRecorder(), LogRecorder()
        runtime_dir = tmp_path / f"run{len(made)}"
        supervisor = LlamaServerSupervisor(settings, on_status=statuses, on_log=logs, start_timeout_s=START_S,
                                           stop_grace_s=5.0, health_interval_s=0.2, runtime_dir=runtime_dir)
        harness = Harness(supervisor, supervisor_loop, statuses, logs, runtime_dir)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.run(harness.supervisor.close())


def records_in(folder: Path) -> list[Path]:
    return sorted(folder.glob("server-*.json")) if folder.exists() else []


@pytest.mark.engine
def test_start_is_managed_with_the_build_from_props_and_stop_leaves_nothing(make_llama) -> None:
    h = make_llama(num_parallel=2)
    status = h.run(h.supervisor.start())
    port = h.supervisor.settings.port

    assert status.state is ServerState.RUNNING_MANAGED, status.message
    code, props = get_json(port, "/props")
    assert code == 200 and status.version == probe.version_of(props) and status.version  # its build, as said
    assert get_json(port, "/health") == (200, {"status": "ok"})
    assert props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 2048  # per slot
    assert ServerState.STARTING in h.statuses.states and str(props["model_path"]) in status.message
    record = json.loads(records_in(h.runtime_dir)[0].read_text())
    assert record["backend"] == "llama_server" and record["pid"] == status.pid
    assert record["cmdline"][1:3] == ["-m", props["model_path"]]
    tree = [psutil.Process(pid) for pid in h.supervisor.server_pids()]
    assert status.pid in {p.pid for p in tree}

    stopped = h.run(h.supervisor.stop())

    assert stopped.state is ServerState.STOPPED and "stopped in" in stopped.message
    assert all(is_gone(p.pid) for p in tree) and h.supervisor.server_pids() == []
    assert records_in(h.runtime_dir) == []
    assert any("listening on" in line for line in h.supervisor.log_lines)


@pytest.mark.engine
def test_restart_applies_new_flags(make_llama) -> None:
    h = make_llama(num_parallel=1, context_length=1024)
    first = h.run(h.supervisor.start())
    assert first.state is ServerState.RUNNING_MANAGED, first.message

    again = h.run(h.supervisor.restart(h.supervisor.settings.replace(num_parallel=2)))

    assert again.state is ServerState.RUNNING_MANAGED and again.pid != first.pid
    assert is_gone(first.pid)
    _code, props = get_json(h.supervisor.settings.port, "/props")
    assert props["total_slots"] == 2 and props["default_generation_settings"]["n_ctx"] == 1024
    cmdline = psutil.Process(again.pid).cmdline()
    assert cmdline[cmdline.index("-np") + 1] == "2" and cmdline[cmdline.index("-c") + 1] == "2048"


@pytest.fixture
def outside_server(llama_server_binary: Path, bundled_model: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """A llama-server this test starts itself, as a user would in a terminal; killed at teardown."""
    port = free_port()
    process = subprocess.Popen(
        [str(llama_server_binary), "-m", str(bundled_model), "--host", "127.0.0.1", "--port", str(port),
         "-c", "2048", "-t", "2", "-np", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    listening = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if "listening on" in line:
                listening.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert listening.wait(START_S), "the outside llama-server did not start listening"
        yield process, port
    finally:
        kill_tree(process.pid)
        process.wait(WAIT_S)
        reader.join(WAIT_S)


@pytest.mark.engine
def test_attach_to_one_started_outside_and_never_signal_it(make_llama, outside_server) -> None:
    process, port = outside_server
    h = make_llama(port=port)

    probed = h.run(h.supervisor.probe())

    assert probed.state is ServerState.RUNNING_ATTACHED, probed.message
    assert probed.pid == process.pid and "Attached to llama-server" in probed.message
    assert f"--port {port} -np 1 -c 2048" in probed.apply_hint  # how to give it these settings itself
    assert not probed.can_stop and "never stops what it did not start" in probed.stop_disabled_reason
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_ATTACHED
    assert h.run(h.supervisor.stop()).state is ServerState.RUNNING_ATTACHED
    restarted = h.run(h.supervisor.restart(h.supervisor.settings.replace(num_parallel=4)))
    assert restarted.state is ServerState.RUNNING_ATTACHED and "-np 4 -c 8192" in restarted.apply_hint
    assert h.supervisor.server_pids() == [process.pid]

    h.run(h.supervisor.close())

    assert process.poll() is None and get_json(port, "/health") == (200, {"status": "ok"})
    assert records_in(h.runtime_dir) == []


@pytest.mark.engine
def test_a_port_held_by_something_else_is_a_conflict_and_left_alone(make_llama, plain_http_server,
                                                                     plain_tcp_server) -> None:
    for holder in (plain_http_server, plain_tcp_server):
        h = make_llama(port=holder.server_address[1])

        status = h.run(h.supervisor.start())

        assert status.state is ServerState.PORT_CONFLICT
        assert f"Port {holder.server_address[1]} on 127.0.0.1" in status.message
        assert "not llama-server" in status.message and "will not touch it" in status.message
        assert status.pid == os.getpid()  # this test process holds it
        assert ServerState.STARTING not in h.statuses.states
    assert urllib.request.urlopen(f"http://127.0.0.1:{plain_http_server.server_address[1]}/",
                                  timeout=WAIT_S).status == 200  # still serving


@pytest.mark.engine
def test_a_file_that_is_not_gguf_or_is_missing_is_refused_naming_it(make_llama, tmp_path: Path) -> None:
    garbage = tmp_path / "x.gguf"
    garbage.write_bytes(os.urandom(4096))
    for model, words in ((garbage, "is not a GGUF file"), (tmp_path / "gone.gguf", "does not exist")):
        h = make_llama(model=model)

        status = h.run(h.supervisor.start())

        assert status.state is ServerState.STOPPED and str(model) in status.message and words in status.message
        assert ServerState.STARTING not in h.statuses.states and h.supervisor.server_pids() == []


@pytest.mark.engine
def test_a_truncated_gguf_crashes_with_the_readers_reason(make_llama, tmp_path: Path, bundled_model: Path) -> None:
    truncated = tmp_path / "cut.gguf"
    with bundled_model.open("rb") as whole:
        truncated.write_bytes(whole.read(1 << 20))  # the header starts right, the rest is missing
    h = make_llama(model=truncated)

    status = h.run(h.supervisor.start())

    assert status.state is ServerState.CRASHED and status.exit_code == 1
    assert f"could not load the model file {truncated}" in status.message
    assert "gguf_init_from_reader" in status.message and "complete GGUF" in status.message
    assert status.pid is not None and is_gone(status.pid) and records_in(h.runtime_dir) == []


@pytest.mark.engine
def test_kill_minus_nine_mid_run_is_a_crash(make_llama) -> None:
    h = make_llama()
    running = h.run(h.supervisor.start())
    assert running.state is ServerState.RUNNING_MANAGED, running.message
    after = len(h.statuses.statuses)

    assert running.pid is not None
    os.kill(running.pid, signal.SIGKILL)

    crashed = h.statuses.wait_for(ServerState.CRASHED, timeout=START_S, after=after)
    assert "was killed by SIGKILL without being asked to stop" in crashed.message
    # What a SIGKILL means and what to do, with the log's last lines (not a line it wrote while starting).
    assert "out-of-memory killer" in crashed.message and "journalctl -k" in crashed.message
    last = [line for line in h.logs.lines if line.strip()][-1]
    assert "Its last lines:" in crashed.message and probe.log_text(last) in crashed.message
    assert crashed.exit_code == -signal.SIGKILL and h.supervisor.server_pids() == []
    assert records_in(h.runtime_dir) == []


def test_a_chosen_program_that_does_not_exist_is_not_installed(supervisor_loop: LoopThread, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "llama-server"
    statuses = StatusRecorder()
    settings = llama_server_settings(ServerSettings(backend="llama_server", port=free_port()), binary=str(missing))
    supervisor = LlamaServerSupervisor(settings, on_status=statuses, runtime_dir=tmp_path / "run")

    status = supervisor_loop.run(supervisor.start(), WAIT_S)

    assert status.state is ServerState.NOT_INSTALLED and str(missing) in status.message
    assert "ollama-deck[engine]" in status.message and ServerState.STARTING not in statuses.states
    supervisor_loop.run(supervisor.close(), WAIT_S)


async def _served_model(base_url: str) -> str:
    async with LlamaServerClient(base_url) as client:
        return (await client.tags())[0].name


@pytest.mark.engine
def test_a_guarded_apply_sees_the_model_llama_server_serves(make_llama) -> None:
    # llama-server lists no loaded models with their GPU/CPU split (Ollama's /api/ps does): the model it
    # answers for is loaded all the same, and the check must say so, not "no model was loaded".
    h = make_llama(num_parallel=1)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    good = h.supervisor.settings
    model = h.run(_served_model(good.base_url))
    records: list[dict[str, Any]] = []
    applier = GuardedApplier(h.supervisor, LlamaServerClient, ScriptedGpuBackend(available=False, reason="none"),
                             record=records.append)

    report = h.run(applier.apply(good.replace(num_parallel=2), good, model, None))

    assert report.judgement.keep and h.supervisor.settings.num_parallel == 2
    assert report.observation.model_loaded and "no model was loaded" not in report.judgement.reason
    assert report.judgement.reason.startswith(f"{model} is loaded with the new settings")
    assert records[0]["observation"]["model_loaded"] is True


@pytest.mark.engine
def test_the_process_scan_names_a_foreign_llama_server_as_llama_server(outside_server, external_standin) -> None:
    from app.adapters.process.procs import server_pids
    from app.backends.llama_server.spec import LLAMA_SERVER
    from app.backends.ollama.spec import OLLAMA

    process, _port = outside_server
    ollama = external_standin()  # an `ollama serve` beside it: the llama-server's scan must not take it

    llama_pids, ollama_pids = server_pids(LLAMA_SERVER.process), server_pids(OLLAMA.process)

    assert process.pid in llama_pids and ollama.pid not in llama_pids
    assert ollama.pid in ollama_pids and process.pid not in ollama_pids
    assert (LLAMA_SERVER.process.label, OLLAMA.process.label) == ("llama-server", "ollama serve")


@pytest.mark.engine
def test_a_managed_bench_on_a_foreign_llama_server_calls_it_a_llama_server(outside_server, tmp_path: Path) -> None:
    import sys

    process, port = outside_server
    root = Path(__file__).resolve().parents[3]
    result = subprocess.run(
        [sys.executable, "-m", "app", "bench", "--config-dir", str(tmp_path / "cfg"), "--no-history",
         "--backend", "llama_server", "--model", "smollm2", "--url", f"http://127.0.0.1:{port}", "--managed"],
        env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True, timeout=120)

    assert result.returncode == 2, result.stderr
    assert "--managed: a llama-server that ollama-deck did not start already answers" in result.stderr
    assert "Ollama" not in result.stderr and f"llama-server (pid {process.pid})" in result.stderr
    assert process.poll() is None  # never touched


@pytest.mark.engine
def test_llama_servers_behind_nginx_are_attached_to_not_a_port_conflict(make_llama, backend_pair,
                                                                       balancer_over) -> None:
    # nginx answers with its own Server header, so only /props says that llama-server is behind it.
    balancer = balancer_over([server.base_url for server in backend_pair])
    port = int(balancer.base_url.rsplit(":", 1)[1])
    h = make_llama(port=port)

    probed = h.run(h.supervisor.probe())

    assert probed.state is ServerState.RUNNING_ATTACHED, probed.message
    assert "SmolLM2" in probed.message  # the model /props names, through the proxy
    assert probed.pid is None and not probed.can_stop  # nginx is not llama-server: nothing of it is ever signalled
    assert "behind nginx" in probed.message and "a proxy" in probed.message
    # The attached watch reads /health through the proxy as it is: ok without llama-server's header.
    assert h.run(_health(balancer.base_url)).proxied_ok
    h.run(h.supervisor.close())
    assert balancer.process.poll() is None and all(server.process.poll() is None for server in backend_pair)


async def _health(base_url: str):
    from app.backends.llama_server import probe

    async with httpx.AsyncClient(trust_env=False) as client:
        return await probe.health(client, base_url)
