"""A real llama-server child for end-to-end tests: started on a free loopback port, waited for
until /health says ok, stopped (and reaped) afterwards."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

START_TIMEOUT_S = 180.0  # a loaded 2-core machine takes a while to map and warm even a small model


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(binary: Path, model: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """(base URL, process) of a llama-server serving `model` with `-t 2` and `args`, ready to answer."""
    port = free_port()
    # The log goes to a file, not a pipe: nobody reads a pipe while the server runs, and a full one
    # would stall the server mid-reply.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([str(binary), "-m", str(model), "-t", "2", "--host", "127.0.0.1", "--port", str(port),
                             *args], stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2.0, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"llama-server on port {port} was not ready within {START_TIMEOUT_S:g} s")
            try:
                proc.wait(timeout=0.2)  # waits on the process, and notices at once if it died
            except subprocess.TimeoutExpired:
                continue
            log.seek(0)
            stderr = log.read().decode(errors="replace")[-2000:]
            raise AssertionError(f"llama-server exited with {proc.returncode} before it was ready:\n{stderr}")
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
