"""The fleet's real parts for tests and the screenshot script: Debian's Prometheus scraping two real
llama-servers, and a small static HTTP server serving the DCGM and node-exporter exposition files of
tests/data/fleet/ (written from the documented formats, see that folder's README) as those exporters would.

Every wait is a poll with a deadline on asyncio (no sleeping thread): `wait_until` in async code."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.backends.llama_server.engine_server import llama_server
from tests.fleet_fixtures import nginx_balancer
from tests.prometheus_server import prometheus as running_prometheus

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


@contextlib.contextmanager
def prometheus(binary: Path, folder: Path, config: dict[str, object]) -> Iterator[str]:
    """Debian's Prometheus on a free 127.0.0.1 port with `config`, its data in `folder`; yields its base URL."""
    with running_prometheus(binary, (), folder, config_doc=config) as running:
        yield running.base_url


async def wait_for_series(base_url: str, query: str, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until `query` gives at least `count` series (the targets have been scraped)."""
    async with httpx.AsyncClient(timeout=2.0) as client:
        async def scraped() -> bool:
            reply = (await client.get(f"{base_url}/api/v1/query", params={"query": query})).json()
            return len(reply["data"]["result"]) >= count

        await wait_until(scraped, f"{count} series of {query}", timeout_s)


@dataclass(frozen=True)
class FleetStack:
    """Two llama-servers (box-a, box-b), nginx in front of them, the exposition files and Prometheus."""

    servers: tuple[str, str]
    balancer_url: str
    prometheus_url: str
    files_url: str

    def toml(self, *, prometheus: bool = True, extra: str = "") -> str:
        return fleet_toml(self.servers, self.prometheus_url if prometheus else None,
                          balancer_url=self.balancer_url) + extra


SERVER_FLAGS = ("-c", "512", "-np", "2", "-t", "1", "--metrics", "--slots")


@contextlib.contextmanager
def fleet_stack(llama_server_binary: Path, model: Path, nginx_binary: Path | None, prometheus_binary: Path,
                folder: Path) -> Iterator[FleetStack]:
    """The whole fleet, each part real, started and awaited (every target scraped), stopped at the end."""
    with llama_server(llama_server_binary, model, folder, SERVER_FLAGS) as first, \
            llama_server(llama_server_binary, model, folder, SERVER_FLAGS) as second, \
            exposition_files() as files_url, \
            contextlib.ExitStack() as balancer, \
            prometheus(prometheus_binary, folder / "prometheus",
                       scrape_config([first.base_url, second.base_url], files_url)) as prometheus_url:
        urls = (first.base_url, second.base_url)
        balancer_url = balancer.enter_context(
            nginx_balancer(nginx_binary, urls, folder / "nginx")).base_url if nginx_binary else ""
        for query, count in (("up == 1", 7), ("llamacpp:requests_processing", 2), ("DCGM_FI_DEV_FB_USED", 2),
                             ("node_memory_MemTotal_bytes", 2), ("ollama_deck_gpu_memory_used_bytes", 1)):
            asyncio.run(wait_for_series(prometheus_url, query, count))
        yield FleetStack(urls, balancer_url, prometheus_url, files_url)


def module_fleet_stack(*, with_nginx: bool) -> Callable[..., Iterator[FleetStack]]:
    """A module-scoped fixture of the whole fleet (nginx in front where asked): `stack = module_fleet_stack(…)`."""

    @pytest.fixture(scope="module")
    def stack(llama_server_binary: Path, bundled_model: Path, prometheus_binary: Path,
              request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetStack]:
        nginx_binary = request.getfixturevalue("nginx_binary") if with_nginx else None
        with fleet_stack(llama_server_binary, bundled_model, nginx_binary, prometheus_binary,
                         tmp_path_factory.mktemp("fleet")) as running:
            yield running

    return stack


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


__all__ = ["DATA", "HOSTS", "SERVER_FLAGS", "FleetStack", "exposition_files", "fleet_stack", "fleet_toml",
           "module_fleet_stack", "prometheus", "scrape_config", "wait_for_series", "wait_until"]
