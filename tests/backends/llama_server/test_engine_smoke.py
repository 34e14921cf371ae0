"""The installed engine end to end: the bundled llama-server on the bundled model, started as a plain
subprocess from what engine.py finds, answers /health, completes a few tokens, and stops leaving no
process behind."""

from __future__ import annotations

import subprocess
import time

import httpx
import psutil
import pytest

from app.backends.llama_server.engine import embedded_settings, find_bundled_model, find_llama_server


def wait_for_health(proc: subprocess.Popen, url: str, timeout_s: float) -> int:
    """Poll GET /health until 200; between polls wait on the process itself, so an early exit ends it."""
    deadline = time.monotonic() + timeout_s
    status = 0
    while time.monotonic() < deadline:
        try:
            status = httpx.get(url + "/health", timeout=2.0).status_code
        except httpx.TransportError:
            status = 0
        if status == 200:
            return status
        try:
            proc.wait(timeout=0.1)
        except subprocess.TimeoutExpired:
            continue
        raise AssertionError(f"llama-server exited with {proc.returncode} before it was healthy")
    return status


@pytest.mark.engine
def test_bundled_server_serves_the_bundled_model_and_stops_cleanly(llama_server_binary, bundled_model):
    assert find_llama_server() == llama_server_binary and find_bundled_model() == bundled_model
    port = embedded_settings().port
    proc = subprocess.Popen(
        [str(llama_server_binary), "-m", str(bundled_model), "--host", "127.0.0.1", "--port", str(port),
         "-t", "2", "-c", "512", "-np", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for_health(proc, url, timeout_s=120) == 200
        reply = httpx.post(url + "/completion", json={"prompt": "The capital of France is", "n_predict": 4,
                                                     "temperature": 0, "cache_prompt": False}, timeout=60)
        assert reply.status_code == 200
        body = reply.json()
        assert isinstance(body["content"], str)
        assert 1 <= body["tokens_predicted"] <= 4
        assert body["timings"]["predicted_n"] == body["tokens_predicted"]
        assert body["tokens_evaluated"] >= 2
        children = psutil.Process(proc.pid).children(recursive=True)
    finally:
        proc.terminate()
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr[-2000:]
    assert not psutil.pid_exists(proc.pid)
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/health", timeout=2.0)
