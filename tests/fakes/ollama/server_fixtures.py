"""Pytest fixtures (registered in tests/conftest.py): the stand-in `ollama` on PATH, servers the
test owns (an external stand-in, a plain non-Ollama HTTP server), and supervisors on a loop thread."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Callable, Coroutine, Iterator

import psutil
import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.server.state import ServerState, ServerStatus
from app.core.server.settings import ServerSettings
from tests.fakes.ollama.standin_ollama import PROJECT_ROOT

T = TypeVar("T")
WAIT_S = 10.0  # upper bound for conditions that normally hold within milliseconds


def free_port() -> int:
    """A TCP port nothing listens on right now (bound to 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_launcher(bin_dir: Path) -> Path:
    """Write an executable `ollama` into bin_dir that runs the stand-in with this interpreter."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    launcher = bin_dir / "ollama"
    launcher.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(PROJECT_ROOT)!r})\n"
        "from tests.fakes.ollama.standin_ollama import main\n"
        "sys.exit(main())\n"
    )
    launcher.chmod(0o755)
    return launcher


def is_gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie waiting for init to reap it counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_tree(pid: int) -> None:
    """Test cleanup: SIGKILL a process the test started and everything below it."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    for proc in root.children(recursive=True) + [root]:
        try:
            proc.kill()  # dead at once; a grandchild stays a zombie until init reaps it, which is fine
        except psutil.NoSuchProcess:
            pass


def launched_from(launcher: Path) -> list[psutil.Process]:
    """Processes running this test's own launcher (its path is unique to the test)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(launcher) in (proc.info.get("cmdline") or []):
            found.append(proc)
    return found


@pytest.fixture
def standin_ollama(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in `ollama` launcher, first on PATH; FAKE_OLLAMA_* set via monkeypatch reach it.
    Whatever this launcher started and is still running when the test ends is killed."""
    launcher = write_launcher(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{launcher.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the records of started servers stay here
    for name in list(os.environ):
        if name.startswith(("FAKE_OLLAMA_", "OLLAMA_")):
            monkeypatch.delenv(name)
    yield launcher
    for proc in launched_from(launcher):
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


class StatusRecorder:
    """An on_status callback that keeps every snapshot and lets a test wait for a state."""

    def __init__(self) -> None:
        self.statuses: list[ServerStatus] = []
        self.threads: set[str] = set()  # names of the threads that published
        self._changed = threading.Condition()

    def __call__(self, status: ServerStatus) -> None:
        with self._changed:
            self.statuses.append(status)
            self.threads.add(threading.current_thread().name)
            self._changed.notify_all()

    def wait_for(self, state: ServerState, timeout: float = WAIT_S, after: int = 0) -> ServerStatus:
        """The first snapshot in `state` published at index >= after; fails after timeout seconds."""
        def found() -> ServerStatus | None:
            return next((s for s in self.statuses[after:] if s.state is state), None)

        with self._changed:
            if not self._changed.wait_for(lambda: found() is not None, timeout):
                seen = [s.state.name for s in self.statuses]
                raise AssertionError(f"no {state.name} status within {timeout} s; saw {seen}")
            status = found()
            assert status is not None
            return status

    @property
    def states(self) -> list[ServerState]:
        with self._changed:
            return [s.state for s in self.statuses]


class LogRecorder:
    """An on_log callback that keeps lines and lets a test wait for one containing some text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, line: str) -> None:
        with self._changed:
            self.lines.append(line)
            self._changed.notify_all()

    def wait_for(self, text: str, timeout: float = WAIT_S, after: int = 0) -> str:
        """The first line at index >= after containing text; fails after timeout seconds."""
        with self._changed:
            def found() -> str | None:
                return next((line for line in self.lines[after:] if text in line), None)

            if not self._changed.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(f"no log line with {text!r} within {timeout} s")
            return found() or ""

    def wait_for_all(self, texts: tuple[str, ...], count: int, timeout: float = WAIT_S) -> list[str]:
        """At least `count` lines containing every one of texts (a server logs a request after its
        reply has gone out); fails after timeout seconds."""
        with self._changed:
            def found() -> list[str]:
                return [line for line in self.lines if all(text in line for text in texts)]

            if not self._changed.wait_for(lambda: len(found()) >= count, timeout):
                raise AssertionError(f"{len(found())} log lines with {texts!r} within {timeout} s, not {count}")
            return found()


@pytest.fixture
def supervisor_loop() -> Iterator[LoopThread]:
    """An asyncio loop thread like the app's, for driving a supervisor from a test."""
    loop = LoopThread(name="test-supervisor-loop")
    yield loop
    loop.stop()


@dataclass
class SupervisorHarness:
    """A supervisor on its loop, with the statuses and log lines it published."""

    supervisor: ServerSupervisor
    loop: LoopThread
    statuses: StatusRecorder
    logs: LogRecorder

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = WAIT_S) -> T:
        """Run a supervisor coroutine on its loop and return its result (timeout in seconds)."""
        return self.loop.run(coro, timeout)


@pytest.fixture
def make_supervisor(
    supervisor_loop: LoopThread, standin_ollama: Path
) -> Iterator[Callable[..., SupervisorHarness]]:
    """Factory: a ServerSupervisor with small timeouts and the stand-in `ollama` on PATH (tests
    that want no binary pass `which`); every supervisor is closed after the test."""
    made: list[SupervisorHarness] = []

    def make(settings: ServerSettings | None = None, **kwargs: object) -> SupervisorHarness:
        statuses, logs = StatusRecorder(), LogRecorder()
        options: dict[str, object] = {
            "start_timeout_s": 5.0, "stop_grace_s": 0.5, "health_interval_s": 0.2,
        }
        options.update(kwargs)
        supervisor = ServerSupervisor(
            settings or ServerSettings(port=free_port()), on_status=statuses, on_log=logs, **options,
        )
        harness = SupervisorHarness(supervisor, supervisor_loop, statuses, logs)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.run(harness.supervisor.close(), timeout=30)


@dataclass
class ExternalServer:
    """A stand-in `ollama serve` the test started itself (the supervisor must never stop it)."""

    process: subprocess.Popen
    port: int
    logs: LogRecorder = field(default_factory=LogRecorder)

    @property
    def lines(self) -> list[str]:
        return self.logs.lines

    @property
    def pid(self) -> int:
        return self.process.pid

    def runner_pids(self) -> list[int]:
        """Pids of its child runner processes."""
        try:
            return [p.pid for p in psutil.Process(self.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def terminate(self) -> None:
        """Stop it the way a service manager would (SIGTERM) and wait."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(WAIT_S)


@pytest.fixture
def external_standin(standin_ollama: Path) -> Iterator[Callable[..., ExternalServer]]:
    """Factory: start a stand-in `ollama serve` on a free port, owned by the test."""
    started: list[ExternalServer] = []

    def start(port: int | None = None, **env: str) -> ExternalServer:
        port = port or free_port()
        full_env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}", **env)
        process = subprocess.Popen(
            [str(standin_ollama), "serve"], env=full_env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        server = ExternalServer(process, port)
        started.append(server)

        def read() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                server.logs(line.rstrip("\n"))

        threading.Thread(target=read, daemon=True).start()
        server.logs.wait_for("Listening on")
        return server

    yield start
    for server in started:
        kill_tree(server.pid)
        server.process.wait(WAIT_S)


class _NotOllamaHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = b"<html><body>Welcome to nginx!</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def plain_http_server() -> Iterator[http.server.ThreadingHTTPServer]:
    """A web server that is not Ollama, holding a free port in this test process."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotOllamaHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(WAIT_S)


class _SshBannerHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.sendall(b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n")


@pytest.fixture
def plain_tcp_server() -> Iterator[socketserver.ThreadingTCPServer]:
    """A TCP server that is not HTTP at all (it greets like sshd and hangs up)."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _SshBannerHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(WAIT_S)
