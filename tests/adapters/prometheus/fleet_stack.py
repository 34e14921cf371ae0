"""The fleet's real parts for tests and the screenshot script: Debian's Prometheus scraping two real
llama-servers, and a small static HTTP server serving the DCGM and node-exporter exposition files of
tests/data/fleet/ (written from the documented formats, see that folder's README) as those exporters would.

Every wait is a poll with a deadline on asyncio (no sleeping thread): `wait_until` in async code."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.backends.llama_server.engine_server import free_port

DATA = Path(__file__).resolve().parents[2] / "data" / "fleet"
HOSTS = ("box-a", "box-b")
START_TIMEOUT_S = 60.0


async def wait_until(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = START_TIMEOUT_S,
                     poll_s: float = 0.2) -> None:
    """Return once `await check()` is true; AssertionError naming `what` after timeout_s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        if await check():
            return
        await asyncio.sleep(poll_s)
    raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")


class _Files(http.server.BaseHTTPRequestHandler):
    """Serves DATA's *.prom files by name, as an exporter serves /metrics (text format 0.0.4)."""

    def do_GET(self) -> None:
        path = DATA / self.path.lstrip("/").split("?")[0]
        if path.suffix != ".prom" or path.parent != DATA or not path.is_file():
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def exposition_files() -> Iterator[str]:
    """A static HTTP server on 127.0.0.1 serving tests/data/fleet/*.prom; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, name="exposition-files", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def scrape_config(servers: Sequence[str], files_url: str | None) -> dict[str, object]:
    """Prometheus's configuration: the servers' own /metrics (job llama-server), and per host its DCGM file
    (instance left as the file server's address: matched by DCGM's Hostname) and its node-exporter file
    (instance relabelled to HOST:9100, as a real node exporter's target would be named); and a third host, box-c,
with the app's own exporter only (instance box-c:9464)."""
    jobs: list[dict[str, object]] = [{"job_name": "llama-server", "static_configs": [
        {"targets": [url.removeprefix("http://") for url in servers]}]}]
    if files_url is not None:
        address = files_url.removeprefix("http://")
        for host in HOSTS:
            jobs.append({"job_name": f"dcgm-{host}", "metrics_path": f"/dcgm-{host}.prom",
                         "static_configs": [{"targets": [address]}]})
            jobs.append({"job_name": f"node-{host}", "metrics_path": f"/node-{host}.prom",
                         "static_configs": [{"targets": [address], "labels": {"instance": f"{host}:9100"}}]})
        jobs.append({"job_name": "ollama-deck-box-c", "metrics_path": "/deck-box-c.prom",
                     "static_configs": [{"targets": [address], "labels": {"instance": "box-c:9464"}}]})
    return {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": jobs}


@dataclass(frozen=True)
class RunningPrometheus:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path


@contextlib.contextmanager
def prometheus(binary: Path, folder: Path, config: dict[str, object]) -> Iterator[RunningPrometheus]:
    """Debian's Prometheus on a free 127.0.0.1 port with `config` (JSON is YAML), its data in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    config_path = folder / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=1))
    port = free_port()
    log_path = folder / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), f"--config.file={config_path}", f"--storage.tsdb.path={folder / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)
    base_url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(_ready(base_url, process, log_path))
        yield RunningPrometheus(base_url, process, log_path)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


async def _ready(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    async with httpx.AsyncClient(timeout=2.0) as client:
        async def ready() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {process.returncode}: {log_path.read_text()[-2000:]}")
            try:
                return (await client.get(f"{base_url}/-/ready")).status_code == 200
            except httpx.HTTPError:
                return False

        await wait_until(ready, f"Prometheus at {base_url} answering /-/ready")


async def wait_for_series(base_url: str, query: str, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until `query` gives at least `count` series (the targets have been scraped)."""
    async with httpx.AsyncClient(timeout=2.0) as client:
        async def scraped() -> bool:
            reply = (await client.get(f"{base_url}/api/v1/query", params={"query": query})).json()
            return len(reply["data"]["result"]) >= count

        await wait_until(scraped, f"{count} series of {query}", timeout_s)


def fleet_toml(servers: Sequence[str], prometheus_url: str | None, *, balancer_url: str | None = None,
               hosts: Sequence[str] = HOSTS, backend: str = "llama_server") -> str:
    """A fleet file naming each server box-a, box-b… on the matching host, and Prometheus where given."""
    parts = [f'[[server]]\nname = "{host}"\nurl = "{url}"\nbackend = "{backend}"\nhost = "{host}"\n'
             for host, url in zip(hosts, servers)]
    if balancer_url is not None:
        names = ", ".join(f'"{host}"' for host in hosts[:len(servers)])
        parts.append(f'[balancer]\nname = "nginx"\nurl = "{balancer_url}"\nservers = [{names}]\n')
    if prometheus_url is not None:
        parts.append(f'[prometheus]\nurl = "{prometheus_url}"\n')
    return "\n".join(parts)


__all__ = ["DATA", "HOSTS", "RunningPrometheus", "exposition_files", "fleet_toml", "prometheus", "scrape_config",
           "wait_for_series", "wait_until"]
