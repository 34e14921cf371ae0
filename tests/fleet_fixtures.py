"""Debian's real nginx as a balancer in front of two real embedded llama-servers, for the fleet tests and the
demo in benchmarks/fleet: every process on its own free 127.0.0.1 port, every nginx file (config, pid, logs,
temp folders) inside the test's folder, everything stopped when the test ends.

The nginx config streams: `proxy_http_version 1.1` and `proxy_buffering off`, so an SSE reply reaches the client
token by token (time to first token through the balancer is the server's, not the end of the reply). Each request
takes a fresh connection to its upstream: with nginx's upstream `keepalive` pool, a POST now and then went out on
a connection llama-server had just closed ("upstream prematurely closed connection while reading response
header"), which nginx does not retry for a POST: a 502 to the client and that upstream marked down for 10 s.
Its access log holds `$upstream_addr` per request, for the tests' cross-checks only: the app reads each backend's
share from that backend's own counters."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest

from tests.backends.llama_server.engine_server import RunningServer, free_port, llama_server, stop
from tests.prometheus_server import wait_for

START_TIMEOUT_S = 30.0
# Two slots each, one thread each (the machine may have two cores for both), counters on.
LLAMA_FLAGS = ("-np", "2", "-c", "2048", "-t", "1", "--metrics")
CHAT_PATH = "/v1/chat/completions"


class Method(StrEnum):
    """nginx's upstream balancing methods the tests use."""

    ROUND_ROBIN = "round_robin"  # nginx's default (with weights: weighted round-robin)
    LEAST_CONN = "least_conn"


@dataclass(frozen=True)
class LogLine:
    """One access-log line: the request and the upstream nginx passed it to."""

    method: str
    path: str
    status: int
    upstream: str  # "127.0.0.1:8081", or several "a, b" when nginx tried the next one; "-" when none


@dataclass(frozen=True)
class NginxBalancer:
    """A running nginx in front of `upstreams` (host:port each)."""

    base_url: str
    upstreams: tuple[str, ...]
    access_log: Path
    error_log: Path
    conf: Path
    process: subprocess.Popen[bytes]

    def log_lines(self) -> list[LogLine]:
        """The access log as written so far."""
        if not self.access_log.exists():
            return []
        lines = []
        for text in self.access_log.read_text().splitlines():
            parts = text.split("\t")
            if len(parts) == 4:
                lines.append(LogLine(parts[0], parts[1], int(parts[2]), parts[3]))
        return lines

    def chat_counts(self) -> Counter[str]:
        """Chat requests per upstream that served them (the last one nginx tried), from the access log."""
        return Counter(line.upstream.split(",")[-1].strip() for line in self.log_lines()
                       if line.method == "POST" and line.path == CHAT_PATH)


def nginx_conf(prefix: Path, port: int, upstreams: Sequence[str], method: Method = Method.ROUND_ROBIN,
               weights: Sequence[int] | None = None) -> str:
    """The balancer's nginx.conf: `daemon off`, everything under `prefix`, listening on 127.0.0.1:port only."""
    if weights is not None and len(weights) != len(upstreams):
        raise ValueError("one weight per upstream")
    servers = "\n".join(f"        server {u}{f' weight={weights[i]}' if weights else ''};"
                        for i, u in enumerate(upstreams))
    temp = "\n".join(f"    {kind}_temp_path {prefix / 'tmp' / kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""daemon off;
worker_processes 1;
pid {prefix / 'nginx.pid'};
error_log {prefix / 'error.log'} info;
events {{ worker_connections 256; }}
http {{
{temp}
    log_format balancer "$request_method\\t$uri\\t$status\\t$upstream_addr";
    access_log {prefix / 'access.log'} balancer;
    upstream backends {{
{'        least_conn;' + chr(10) if method is Method.LEAST_CONN else ''}{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_cache off;
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout;
        }}
    }}
}}
"""


def _wait_listening(port: int, process: subprocess.Popen[bytes], error_log: Path) -> None:
    def listening() -> bool:
        if process.poll() is not None:
            said = error_log.read_text() if error_log.exists() else ""
            raise RuntimeError(f"nginx exited with {process.returncode}: {said}")
        with socket.socket() as sock:
            sock.settimeout(1.0)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, START_TIMEOUT_S, f"nginx to listen on 127.0.0.1:{port} (see {error_log})", poll_s=0.05)


@contextlib.contextmanager
def nginx_balancer(binary: Path, upstream_urls: Sequence[str], prefix: Path, method: Method = Method.ROUND_ROBIN,
                   weights: Sequence[int] | None = None) -> Iterator[NginxBalancer]:
    """nginx balancing `upstream_urls` (http://host:port each) until the block ends, then stopped (SIGQUIT:
    it finishes what is in flight)."""
    prefix.mkdir(parents=True, exist_ok=True)
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (prefix / "tmp" / kind).mkdir(parents=True, exist_ok=True)
    upstreams = tuple(u.split("://", 1)[-1].rstrip("/") for u in upstream_urls)
    port = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, port, upstreams, method, weights))
    error_log = prefix / "error.log"
    # -e: the error log before the config is read (else nginx tries /var/log/nginx/error.log first)
    process = subprocess.Popen([str(binary), "-p", str(prefix), "-c", str(conf), "-e", str(error_log)],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_listening(port, process, error_log)
        yield NginxBalancer(f"http://127.0.0.1:{port}", upstreams, prefix / "access.log", error_log, conf, process)
    finally:
        stop(process, first=signal.SIGQUIT)


@contextlib.contextmanager
def llama_pair(binary: Path, model: Path, log_dir: Path,
               extra: Sequence[str] = ()) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two embedded llama-servers on their own free ports (LLAMA_FLAGS, then `extra`), stopped when the block ends."""
    flags = (*LLAMA_FLAGS, *extra)
    with llama_server(binary, model, log_dir, flags) as a, llama_server(binary, model, log_dir, flags) as b:
        yield a, b


@pytest.fixture(scope="module")
def backend_pair(llama_server_binary: Path, bundled_model: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two real llama-servers for a module's tests (each test puts its own nginx in front)."""
    with llama_pair(llama_server_binary, bundled_model, tmp_path_factory.mktemp("backends")) as pair:
        yield pair


@pytest.fixture
def balancer_over(nginx_binary: Path, tmp_path: Path) -> Iterator[Callable[..., NginxBalancer]]:
    """Starts nginx over the given backends: `balancer_over(urls, method, weights)`; all stopped at the end."""
    with contextlib.ExitStack() as stack:
        made = [0]

        def start(urls: Sequence[str], method: Method = Method.ROUND_ROBIN,
                  weights: Sequence[int] | None = None) -> NginxBalancer:
            made[0] += 1
            return stack.enter_context(nginx_balancer(nginx_binary, urls, tmp_path / f"nginx-{made[0]}", method,
                                                      weights))

        yield start


__all__ = ["CHAT_PATH", "LLAMA_FLAGS", "LogLine", "Method", "NginxBalancer", "backend_pair", "balancer_over",
           "llama_pair", "nginx_balancer", "nginx_conf"]
