"""An app-like parent process for the tests of servers left behind: it starts the stand-in `ollama`
through a real ServerSupervisor on an asyncio loop thread (as the GUI does), prints the server's
pids as one JSON line, and waits until it is killed. Helpers to run it and to wait for processes
to go are below."""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.fakes.ollama.standin_ollama import PROJECT_ROOT

WAIT_S = 15.0


@dataclass
class AppLikeParent:
    """The running parent and what it reported about the server it started."""

    process: subprocess.Popen
    server_pid: int
    tree: list[int]  # the server and its runner

    def kill(self) -> None:
        """SIGKILL the parent, as `kill -9` would, and reap it."""
        self.process.kill()
        self.process.wait(WAIT_S)


def start_app_like_parent(port: int, runtime_dir: Path, die_with_app: bool = True) -> AppLikeParent:
    """Run this module as a process that manages a stand-in on port; returns once the server runs.
    The stand-in `ollama` must be on PATH (the standin_ollama fixture)."""
    command = [sys.executable, "-m", "tests.fakes.ollama.app_like_parent", "--port", str(port),
               "--runtime-dir", str(runtime_dir)]
    if not die_with_app:
        command.append("--no-die-with-app")
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               cwd=PROJECT_ROOT)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        lines.put(process.stdout.readline())

    threading.Thread(target=read, daemon=True).start()
    try:
        line = lines.get(timeout=WAIT_S)
    except queue.Empty:
        process.kill()
        raise AssertionError(f"the app-like parent did not start a server within {WAIT_S} s") from None
    report = json.loads(line) if line.startswith("{") else {"error": line or "it exited"}
    if "error" in report:
        process.kill()
        raise AssertionError(f"the app-like parent could not start the server: {report['error']}")
    return AppLikeParent(process, int(report["pid"]), [int(p) for p in report["tree"]])


def is_gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie nobody reaped yet counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], timeout_s: float = WAIT_S) -> list[int]:
    """Wait until every pid is gone or timeout_s seconds passed; returns the pids still running."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = [pid for pid in pids if not is_gone(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        handles = []
        for pid in left:
            try:
                handles.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        psutil.wait_procs(handles, timeout=0.1)  # returns at once when they exit


def _main() -> int:
    from app.adapters.aio import LoopThread
    from app.backends.ollama.supervisor import ServerSupervisor
    from app.core.server.settings import ServerSettings
    from app.core.server.state import ServerState

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--runtime-dir", required=True)
    parser.add_argument("--no-die-with-app", action="store_true")
    args = parser.parse_args()
    loop = LoopThread(name="app-like-loop")
    supervisor = ServerSupervisor(ServerSettings(port=args.port), runtime_dir=Path(args.runtime_dir),
                                  die_with_app=not args.no_die_with_app, start_timeout_s=WAIT_S)
    status = loop.run(supervisor.start(), timeout=WAIT_S + 5)
    if status.state is not ServerState.RUNNING_MANAGED:
        print(json.dumps({"error": status.message}), flush=True)
        return 1
    print(json.dumps({"pid": status.pid, "tree": supervisor.server_pids()}), flush=True)
    threading.Event().wait()  # like an app left open, until it is killed
    return 0


if __name__ == "__main__":
    sys.exit(_main())
