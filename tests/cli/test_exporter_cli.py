"""`ollama-deck exporter` through the real entry point (`python -m app exporter`, a subprocess): it serves and says
where, refuses a port in use and a non-loopback address without permission in one line, and stops cleanly on
SIGTERM and SIGINT, freeing its port."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.fakes.raw_http import closed_port
from tests.prometheus_server import ROOT, exporter, start_exporter

pytestmark = pytest.mark.slow
NO_SERVER = f"http://127.0.0.1:{closed_port()}"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "exporter", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_it_serves_says_where_and_stops_cleanly_on_a_signal(stop: signal.Signals) -> None:
    with exporter("--listen", "127.0.0.1:0", "--url", NO_SERVER, "--backend", "llama_server") as app:
        printed = "".join(app.stdout)
        assert f"targets: ['{app.address}']" in printed and "scrape_configs:" in printed  # ready to paste
        with urllib.request.urlopen(app.url, timeout=10) as reply:
            assert b"ollama_deck_host_memory_total_bytes" in reply.read()
        app.process.send_signal(stop)
        assert app.finish() == 0
    assert app.stderr[-1].strip() == "ollama-deck exporter: stopped"
    host, port = app.address.rsplit(":", 1)
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as any server does: TIME_WAIT is no obstacle
        again.bind((host, int(port)))  # the port is free again: nothing listens on it
        again.listen()


def test_a_port_in_use_is_one_line_naming_it_and_a_non_zero_exit() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run_cli("--listen", f"127.0.0.1:{port}", "--url", NO_SERVER, "--backend", "llama_server")
    lines = [line for line in result.stderr.splitlines() if not line.startswith("ollama-deck exporter: no GPU")]
    assert result.returncode == 1 and result.stdout == ""
    assert len(lines) == 1 and lines[0].startswith(f"ollama-deck exporter: Port {port} on 127.0.0.1 is already in use")
    assert "choose another port" in lines[0]


def test_a_network_address_without_permission_is_refused_before_anything_listens() -> None:
    result = run_cli("--listen", "0.0.0.0:0", "--url", NO_SERVER)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "Did not listen on 0.0.0.0:0" in result.stderr and "Add --allow-network to allow it for 0.0.0.0" in result.stderr


def test_with_permission_it_listens_beyond_loopback_and_warns() -> None:
    with exporter("--listen", "0.0.0.0:0", "--allow-network", "--url", NO_SERVER, "--backend", "llama_server") as app:
        port = int(app.address.rsplit(":", 1)[1])
        assert f"targets: ['{socket.gethostname()}:{port}']" in "".join(app.stdout)  # for another machine
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            assert reply.status == 200
        assert app.stop() == 0
    warning = [line for line in app.stderr if "warning:" in line]
    assert len(warning) == 1 and "any machine that can reach it can read this computer's GPU, host and server" \
        in warning[0]


@pytest.mark.parametrize(("args", "said"), [
    (("--listen", "9464"), "--listen '9464' has no host and port"),
    (("--interval", "5"), "--interval must be at most 1, got 5"),
    (("--url", "ftp://x"), "--url"),
    (("--backend", "nope"), "'nope' is not a backend"),
])
def test_unusable_input_is_one_line_and_exit_2(args: tuple[str, ...], said: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and said in result.stderr


def test_without_an_nvidia_driver_it_says_why_once_and_exports_no_gpu_metrics() -> None:
    app = start_exporter("--listen", "127.0.0.1:0", "--url", NO_SERVER, "--backend", "llama_server",
                         "--interval", "0.25")
    try:
        app.read(60)
        with urllib.request.urlopen(app.url, timeout=10) as reply:
            text = reply.read().decode()
    finally:
        app.stop()
    gpu_lines = [line for line in app.stderr if "GPU" in line]
    if "ollama_deck_gpu_memory_total_bytes" in text:
        pytest.skip("this machine has an NVIDIA driver and GPU: the GPU metrics are exported")
    assert len(gpu_lines) == 1 and gpu_lines[0].startswith("ollama-deck exporter: no GPU metrics: ")
    assert "ollama_deck_gpu_" not in text and "ollama_deck_server_gpu_memory_bytes" not in text
