"""End-to-end: the openai backend against the real llama-server's /v1 (the bundled SmolLM2), started with an API
key, directly and behind Debian's nginx terminating TLS with a certificate made for the test by `openssl req`.
What is asserted is what the server guarantees (counts, the key checked, the certificate checked), never speed."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.backends.openai.client import TLS, OpenAiClient, load_client
from app.backends.openai.endpoint import SESSION
from app.core.errors import AuthRefused, ServerUnreachable
from app.core.replies import ChatRequest, StreamChunk
from tests.backends.llama_server.engine_server import RunningServer, free_port, llama_server
from tests.bounded import run_within

pytestmark = [pytest.mark.engine, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
KEY = "deck-test-key-31c9"
HI = [{"role": "user", "content": "Name three colours."}]
run = functools.partial(run_within, timeout=120.0)


@pytest.fixture(scope="module")
def keyed_server(llama_server_binary: Path, bundled_model: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One real llama-server for the module, started with --api-key."""
    with llama_server(llama_server_binary, bundled_model, tmp_path_factory.mktemp("llama"),
                      ["--api-key", KEY, "-c", "2048", "-np", "2", "--metrics"]) as server:
        yield server


@dataclass(frozen=True)
class TlsProxy:
    """nginx terminating TLS in front of a server: its https URL and the certificate to trust."""

    url: str
    cert: Path


def make_certificate(openssl: Path, folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, made by openssl."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([str(openssl), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="module")
def tls_proxy(keyed_server: RunningServer, nginx_binary: Path, openssl_binary: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsProxy]:
    """Debian's nginx on a free 127.0.0.1 port, TLS with the test's certificate, proxying to the llama-server."""
    prefix = tmp_path_factory.mktemp("nginx")
    cert, key = make_certificate(openssl_binary, prefix)
    port = free_port()
    upstream = keyed_server.base_url.removeprefix("http://")
    temp = "\n".join(f"  {kind}_temp_path {prefix / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                          "scgi"))
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the test's private folders
    (prefix / "nginx.conf").write_text(f"""{user}daemon off;
worker_processes 1;
pid {prefix / 'nginx.pid'};
error_log {prefix / 'error.log'} info;
events {{ worker_connections 64; }}
http {{
  access_log off;
{temp}
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {cert};
    ssl_certificate_key {key};
    location / {{
      proxy_pass http://{upstream};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
""")
    process = subprocess.Popen([str(nginx_binary), "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_listening(port, process, prefix / "error.log")
        yield TlsProxy(f"https://127.0.0.1:{port}/v1", cert)
    finally:
        process.terminate()
        process.wait(timeout=15)


def _wait_listening(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    import socket
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nginx exited with {process.returncode}: {log.read_text() if log.exists() else ''}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)  # a start-up poll, not a test's wait
    raise RuntimeError(f"nginx did not listen on {port} within 30 s")


def stream(url: str, **chat: object) -> list[StreamChunk]:
    async def go() -> list[StreamChunk]:
        async with OpenAiClient(url) as client:
            return [c async for c in client.chat("any", HI, options={"num_predict": 16, "seed": 1}, **chat)]
    return run(go)


def test_a_reply_from_llama_servers_v1_has_usages_counts_and_transport_stamps(keyed_server):
    SESSION.remember(keyed_server.base_url, KEY)
    chunks = stream(keyed_server.base_url + "/v1")
    final = chunks[-1].final
    assert chunks[-1].done and final is not None
    assert final.output_tokens is not None and 0 < final.output_tokens <= 16
    assert final.prompt_tokens is not None and final.prompt_tokens > 0
    assert final.done_reason in ("stop", "length")
    assert final.prompt_ms is None and final.decode_ms is None  # usage only: llama-server's timings are not read
    answer = "".join(c.content for c in chunks)
    assert answer.strip()
    sent = chunks[0].request_sent_s
    assert sent is not None and all(sent <= c.t_monotonic for c in chunks)


def test_a_wrong_key_is_refused_by_the_real_server_with_how_to_give_one(keyed_server):
    SESSION.remember(keyed_server.base_url, "not-the-key")
    with pytest.raises(AuthRefused) as caught:
        stream(keyed_server.base_url)
    assert "refused the API key" in caught.value.message and "--api-key-env" in caught.value.hint
    assert "not-the-key" not in caught.value.user_text()
    SESSION.forget()
    with pytest.raises(AuthRefused):  # no key at all
        stream(keyed_server.base_url)


def test_the_load_generators_way_on_the_real_server(keyed_server):
    SESSION.remember(keyed_server.base_url, KEY)
    got: list[StreamChunk] = []

    async def go() -> None:
        client = load_client(keyed_server.base_url + "/v1")
        try:
            await client.stream_chat(ChatRequest("any", tuple(HI), seed=2, max_tokens=8), got.append)
        finally:
            await client.aclose()

    run(go)
    assert got[-1].done and got[-1].final is not None and 0 < (got[-1].final.output_tokens or 0) <= 8


def test_https_through_nginx_with_the_tests_ca_and_the_key(tls_proxy):
    SESSION.remember(tls_proxy.url, KEY)
    with pytest.raises(ServerUnreachable, match="over TLS: .*self-signed certificate") as caught:
        stream(tls_proxy.url)  # a self-signed certificate is not trusted by default
    assert "--ca-bundle" in caught.value.hint
    TLS.trust(str(tls_proxy.cert))
    chunks = stream(tls_proxy.url)
    final = chunks[-1].final
    assert final is not None and 0 < (final.output_tokens or 0) <= 16
    sent = chunks[0].request_sent_s
    assert sent is not None and all(sent <= c.t_monotonic for c in chunks)  # stamped through TLS too


def served_id(url: str) -> str:
    async def go() -> str:
        async with OpenAiClient(url) as client:
            return str((await client.models())[0]["id"])
    return run(go)


def test_prompt_and_bench_commands_over_https(tls_proxy, tmp_path):
    SESSION.remember(tls_proxy.url, KEY)
    TLS.trust(str(tls_proxy.cert))
    model = served_id(tls_proxy.url)
    env = {**os.environ, "DECK_TEST_KEY": KEY, "PYTHONPATH": str(ROOT)}
    common = ["--backend", "openai", "--url", tls_proxy.url, "--ca-bundle", str(tls_proxy.cert),
              "--api-key-env", "DECK_TEST_KEY"]
    done = subprocess.run([sys.executable, "-m", "app", "prompt", *common, "--model", model, "--no-think",
                           "--num-predict", "8", "--json", "--config-dir", str(tmp_path / "cfg"), "Say hi."],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert 0 < report["eval_count"] <= 8 and report["url"] == tls_proxy.url.removesuffix("/v1")
    assert KEY not in done.stdout + done.stderr
    bench = subprocess.run([sys.executable, "-m", "app", "bench", *common, "--model", model, "--concurrency", "1,2",
                            "--requests", "2", "--warmup", "0", "--num-predict", "8", "--no-history",
                            "--json", str(tmp_path / "run.json"), "--config-dir", str(tmp_path / "cfg")],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert bench.returncode == 0, bench.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    assert KEY not in bench.stdout + bench.stderr + (tmp_path / "run.json").read_text()
    points = data.get("results") or data.get("points") or []
    assert len(points) == 2, list(data)  # --concurrency 1 and 2, both measured through TLS


def test_the_specs_metrics_reader_scrapes_through_tls_with_the_key(tls_proxy):
    pytest.importorskip("app.backends.openai.metrics", reason="the /metrics reader comes with metrics.py")
    from app.backends import registry

    SESSION.remember(tls_proxy.url, KEY)
    TLS.trust(str(tls_proxy.cert))
    factory = registry.get("openai").server_telemetry
    assert factory is not None
    telemetry = factory(tls_proxy.url)

    async def go():
        try:
            return await telemetry.sample()
        finally:
            await telemetry.aclose()

    sample = run(go)
    assert telemetry.dialect.name == "LLAMA_CPP" and sample is not None
