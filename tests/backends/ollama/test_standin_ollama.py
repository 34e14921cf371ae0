"""The stand-in `ollama` executable behaves like the real program where the supervisor looks."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.core.errors import is_oom_message
from tests.fakes.ollama.server_fixtures import WAIT_S, free_port, is_gone
from tests.fakes.ollama.standin_ollama import go_duration, parse_host
from tests.fakes.ollama.recorded import real_version

pytestmark = pytest.mark.slow


def post(port: int, path: str, body: dict) -> tuple[int, dict]:
    """POST JSON to the stand-in; (status, decoded body)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT_S) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def run_ollama(launcher: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(launcher), *args], env=dict(os.environ, **env), capture_output=True, text=True,
        timeout=WAIT_S, stdin=subprocess.DEVNULL,
    )


def test_version_without_a_server_warns_like_the_real_client(standin_ollama: Path) -> None:
    done = run_ollama(standin_ollama, "--version", OLLAMA_HOST=f"127.0.0.1:{free_port()}")

    assert done.returncode == 0
    assert done.stdout.splitlines() == [
        "Warning: could not connect to a running Ollama instance",
        f"Warning: client version is {real_version()}",
    ]


def test_version_with_a_server_asks_it(standin_ollama: Path, external_standin) -> None:
    ext = external_standin()

    done = run_ollama(standin_ollama, "-v", OLLAMA_HOST=f"127.0.0.1:{ext.port}")

    assert done.stdout.splitlines() == [f"ollama version is {real_version()}"]


def test_serve_logs_its_config_and_gpu_like_ollama(external_standin) -> None:
    # Ollama 0.12's configuration line (0.32's: test_serve_logs_the_config_line_recorded_from_0_32).
    ext = external_standin(OLLAMA_NUM_PARALLEL="3", OLLAMA_KEEP_ALIVE="-1", OLLAMA_FLASH_ATTENTION="1",
                           FAKE_OLLAMA_VERSION="0.12.6")

    config = next(line for line in ext.lines if 'msg="server config"' in line)
    assert config.startswith("time=") and " level=INFO source=routes.go:" in config
    assert 'env="map[CUDA_VISIBLE_DEVICES: ' in config
    for part in ("OLLAMA_NUM_PARALLEL:3 ", "OLLAMA_FLASH_ATTENTION:true ", "OLLAMA_CONTEXT_LENGTH:4096 ",
                 "OLLAMA_KEEP_ALIVE:2562047h47m16.854775807s ", f"OLLAMA_HOST:http://127.0.0.1:{ext.port} "):
        assert part in config
    assert any(f'msg="Listening on 127.0.0.1:{ext.port} (version 0.12.6)"' in line for line in ext.lines)
    gpu = ext.logs.wait_for('msg="inference compute"')
    assert 'description="NVIDIA GeForce RTX 4090"' in gpu and "compute=8.9" in gpu
    assert 'total="23.5 GiB"' in gpu and "type=discrete" in gpu
    assert len(ext.runner_pids()) == 1


def test_model_load_logs_offload_lines(external_standin) -> None:
    # The lines of Ollama 0.12's own engine (0.32's llama-server: test_model_load_logs_the_llama_server_command).
    ext = external_standin(OLLAMA_NUM_PARALLEL="2", FAKE_OLLAMA_VERSION="0.12.6")

    status, body = post(ext.port, "/api/generate", {"model": "qwen3:14b"})

    assert status == 200 and body["done_reason"] == "load"
    assert "parallel=2" in ext.logs.wait_for('msg="starting runner"')
    ext.logs.wait_for('msg="offloaded 41/41 layers to GPU"')
    ext.logs.wait_for('msg="model weights" device=CUDA0')


def test_out_of_memory_on_first_load(external_standin) -> None:
    ext = external_standin(FAKE_OLLAMA_OOM_ON_LOAD="1")

    status, body = post(ext.port, "/api/chat", {
        "model": "qwen3:14b", "stream": False, "messages": [{"role": "user", "content": "hi"}],
    })

    assert status == 500
    assert body == {"error": "llama runner process has terminated: cudaMalloc failed: out of memory"}
    assert is_oom_message(body["error"])
    alloc = ext.logs.wait_for("ggml_backend_cuda_buffer_type_alloc_buffer: allocating ")
    assert alloc.endswith("on device 0: cudaMalloc failed: out of memory")
    assert "level=ERROR source=sched.go:" in ext.logs.wait_for('msg="error loading llama server"')
    again, _ = post(ext.port, "/api/generate", {"model": "qwen3:14b"})
    assert again == 200  # only the first load fails, as after freeing VRAM


def test_bind_conflict_exits_like_ollama(standin_ollama: Path, plain_http_server) -> None:
    port = plain_http_server.server_address[1]

    done = run_ollama(standin_ollama, "serve", OLLAMA_HOST=f"127.0.0.1:{port}")

    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"Error: listen tcp 127.0.0.1:{port}: bind: address already in use"


def test_sigterm_stops_the_server_and_its_runner(external_standin) -> None:
    ext = external_standin()
    runners = ext.runner_pids()

    ext.terminate()

    assert ext.process.returncode == 0
    assert runners and all(is_gone(pid) for pid in runners)


def test_unknown_command_fails(standin_ollama: Path) -> None:
    done = run_ollama(standin_ollama, "frobnicate")

    assert done.returncode == 1 and 'unknown command "frobnicate"' in done.stderr


@pytest.mark.parametrize(("text", "expected"), [
    ("5m", "5m0s"), ("1h30m", "1h30m0s"), ("300", "5m0s"), ("45s", "45s"), ("-1", "2562047h47m16.854775807s"),
])
def test_keep_alive_printed_as_go_duration(text: str, expected: str) -> None:
    assert go_duration(text) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, ("127.0.0.1", 11434)), ("0.0.0.0", ("0.0.0.0", 11434)), ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("http://localhost:9000/", ("localhost", 9000)), ("[::1]:11500", ("::1", 11500)),
])
def test_ollama_host_parsed_like_ollama(value: str | None, expected: tuple[str, int]) -> None:
    assert parse_host(value) == expected
