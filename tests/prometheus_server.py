"""The real Prometheus server and the real `ollama-deck exporter` command for the exporter's tests, its benchmark and
the fleet note's recording: started on free 127.0.0.1 ports, awaited through their own answers, stopped."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tests.backends.llama_server.engine_server import free_port, get, stop

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0
SERVING = re.compile(r"Serving Prometheus metrics at (http://\S+/metrics)")


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str | Callable[[], str], poll_s: float = 0.1) -> T:
    """The first truthy answer of `check`, polled every poll_s seconds; AssertionError naming `what` after timeout_s."""
    tick = threading.Event()  # never set: its wait is the pause between polls
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what() if callable(what) else what}")
        tick.wait(poll_s)


def get_json(url: str, timeout_s: float = 5.0) -> Any:
    """The decoded JSON of a GET."""
    with urllib.request.urlopen(url, timeout=timeout_s) as reply:
        return json.loads(reply.read())


@dataclass(frozen=True)
class RunningPrometheus:
    """A started Prometheus: its HTTP API's base URL."""

    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def targets(self) -> list[dict[str, Any]]:
        """/api/v1/targets' active targets."""
        return list(get_json(f"{self.base_url}/api/v1/targets")["data"]["activeTargets"])

    def all_up(self) -> bool:
        """True once every target was scraped and answered."""
        targets = self.targets()
        return bool(targets) and all(t.get("health") == "up" for t in targets)

    def query(self, promql: str) -> dict[str, Any]:
        """The JSON Prometheus returns for an instant query."""
        reply: dict[str, Any] = get_json(f"{self.base_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}")
        return reply

    def value(self, promql: str) -> float | None:
        """The single sample's value of an instant query (None while it has none)."""
        result = self.query(promql)["data"]["result"]
        return float(result[0]["value"][1]) if len(result) == 1 else None


@contextlib.contextmanager
def prometheus(binary: Path, targets: Sequence[str], workdir: Path, job: str = "ollama-deck",
               scrape_interval_s: int = 1, config_doc: dict[str, Any] | None = None) -> Iterator[RunningPrometheus]:
    """Prometheus scraping host:port `targets` every scrape_interval_s seconds (or with the whole `config_doc`, JSON
    being YAML), storing under workdir; stopped after."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    if config_doc is not None:
        config.write_text(json.dumps(config_doc, indent=1))
    else:
        quoted = ", ".join(f"'{t}'" for t in targets)
        config.write_text(f"global:\n  scrape_interval: {scrape_interval_s}s\n  evaluation_interval: "
                          f"{scrape_interval_s}s\nscrape_configs:\n  - job_name: {job}\n    static_configs:\n"
                          f"      - targets: [{quoted}]\n")
    log_path = workdir / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen([str(binary), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
                                    f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    running = RunningPrometheus(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_for(lambda: _ready(running), START_TIMEOUT_S, lambda: f"Prometheus to be ready (see {log_path})")
        yield running
    finally:
        stop(process)


def _ready(running: RunningPrometheus) -> bool:
    if running.process.poll() is not None:
        raise AssertionError(f"prometheus exited with {running.process.returncode}; see {running.log_path}")
    try:
        return get(f"{running.base_url}/-/ready", timeout_s=2.0)[0] == 200
    except OSError:
        return False


@dataclass
class ExporterProcess:
    """A running `python -m app exporter`: its process, what it printed, and the URL it serves."""

    process: subprocess.Popen[str]
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    url: str = ""
    _lines: queue.Queue[tuple[str, str | None]] = field(default_factory=queue.Queue)

    @property
    def address(self) -> str:
        """host:port of the URL."""
        return urllib.parse.urlsplit(self.url).netloc

    def read(self, timeout_s: float) -> None:
        """Take in what it printed until its URL line or its end (AssertionError after timeout_s)."""
        deadline = time.monotonic() + timeout_s
        ended = 0
        while not self.url and ended < 2:
            try:
                stream, line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the exporter printed no URL within {timeout_s:.0f} s; stderr: "
                                     f"{''.join(self.stderr)}") from None
            if line is None:
                ended += 1
                continue
            (self.stdout if stream == "out" else self.stderr).append(line)
            if match := SERVING.search(line):
                self.url = match.group(1)

    def finish(self, timeout_s: float = 30.0) -> int:
        """Wait for its end and take in the rest of its output; the exit status."""
        code = self.process.wait(timeout=timeout_s)
        for reader in self._readers:
            reader.join(timeout_s)
        while not self._lines.empty():
            stream, line = self._lines.get_nowait()
            if line is not None:
                (self.stdout if stream == "out" else self.stderr).append(line)
        return code

    def stop(self) -> int:
        """SIGTERM, then its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish()

    def __post_init__(self) -> None:
        self._readers = [threading.Thread(target=self._pump, args=(name, pipe), daemon=True)
                         for name, pipe in (("out", self.process.stdout), ("err", self.process.stderr))]
        for reader in self._readers:
            reader.start()

    def _pump(self, name: str, pipe: Any) -> None:
        for line in iter(pipe.readline, ""):
            self._lines.put((name, line))
        self._lines.put((name, None))


def start_exporter(*args: str, env: dict[str, str] | None = None) -> ExporterProcess:
    """`python -m app exporter ARGS` from the working tree (its output read as it comes)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    process = subprocess.Popen([sys.executable, "-m", "app", "exporter", *args], cwd=ROOT, env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    return ExporterProcess(process)


@contextlib.contextmanager
def exporter(*args: str, env: dict[str, str] | None = None) -> Iterator[ExporterProcess]:
    """A started exporter serving (its URL read), SIGTERMed after the block."""
    running = start_exporter(*args, env=env)
    try:
        running.read(START_TIMEOUT_S)
        if not running.url:
            raise AssertionError(f"the exporter ended without serving: {''.join(running.stderr)}")
        yield running
    finally:
        if running.process.poll() is None:
            running.stop()
