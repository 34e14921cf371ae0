"""A real llama-server on a free 127.0.0.1 port for tests and recordings: started, awaited, stopped."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.ports.telemetry import ServerTelemetry
from app.core.server_telemetry import ServerSample

START_TIMEOUT_S = 120.0  # loading the 98 MB model takes seconds, more on a busy 2-core machine


@dataclass(frozen=True)
class RunningServer:
    """A started llama-server: its URL and process."""

    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path


def free_port() -> int:
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, timeout_s: float = 5.0) -> tuple[int, bytes]:
    """(status, body) of a GET, HTTP errors included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post_json(url: str, body: dict, timeout_s: float = 600.0) -> dict:
    """POST a JSON body and return the decoded JSON reply."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:
        return json.loads(reply.read())


def wait_healthy(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    """Return once /health says ok; RuntimeError naming the log when the server died or took too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"llama-server exited with {process.returncode}; see {log_path}")
        try:
            status, _ = get(f"{base_url}/health", timeout_s=2.0)
        except OSError:
            status = 0
        if status == 200:
            return
        time.sleep(0.2)  # a start-up poll, not a test's wait
    raise RuntimeError(f"llama-server at {base_url} was not healthy within {START_TIMEOUT_S:.0f} s; see {log_path}")


@contextlib.contextmanager
def llama_server(binary: Path, model: Path, log_dir: Path, extra: Sequence[str] = ()) -> Iterator[RunningServer]:
    """Run `binary -m model` on a free port with `extra` flags until the block ends, then stop it."""
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = log_dir / f"llama-server-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
                                    *extra], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_healthy(base_url, process, log_path)
        yield RunningServer(base_url, process, log_path)
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any], grace_s: float = 15.0, first: int = signal.SIGTERM) -> None:
    """Stop a process this test started (`first` signal: SIGTERM, or SIGQUIT for nginx to finish what is in flight)
    and wait for it, killing it when it outlives grace_s seconds."""
    if process.poll() is not None:
        return
    process.send_signal(first)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace_s)



async def sample_until(telemetry: ServerTelemetry, done: Callable[[ServerSample], object], what: str,
                       wait_s: float = 240.0, poll_s: float = 0.25) -> list[ServerSample]:
    """Samples of `telemetry` taken every poll_s seconds until `done(sample)`; fails naming `what` after wait_s."""
    seen: list[ServerSample] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while loop.time() < deadline:
        seen.append(await telemetry.sample())
        if done(seen[-1]):
            return seen
        await asyncio.sleep(poll_s)
    raise AssertionError(f"never saw {what} within {wait_s:.0f} s; last sample {seen[-1] if seen else None}")
