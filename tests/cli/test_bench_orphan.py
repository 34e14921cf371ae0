"""`ollama-deck bench --managed` on a port where a server left behind by a killed ollama-deck runs:
a real app-like parent started it and was SIGKILLed; the CLI is a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from app.adapters.process.runtime_record import RecordBook
from tests.cli.test_bench_cli import PROJECT_ROOT, bench
from tests.fakes.ollama.app_like_parent import is_gone, start_app_like_parent, wait_gone
from tests.fakes.ollama.server_fixtures import free_port


def test_managed_bench_names_the_orphan_and_stops_it_only_when_asked(tmp_path, standin_ollama):
    port = free_port()
    runtime_dir = tmp_path / "cfg" / "run"  # where --config-dir puts the records
    parent = start_app_like_parent(port, runtime_dir, die_with_app=False)
    parent.kill()
    args = ("--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{port}", "--managed", "--requests", "2",
            "--num-predict", "4", "--no-think", "--no-history")

    refused = bench(tmp_path, *args)

    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert f"pid {parent.server_pid}" in line and "earlier ollama-deck" in line and "--stop-orphan" in line
    assert "Traceback" not in refused.stderr
    assert all(not is_gone(pid) for pid in parent.tree)  # untouched without the flag

    result = bench(tmp_path, *args, "--stop-orphan")

    assert result.returncode == 0, result.stderr
    assert f"an earlier ollama-deck started (pid {parent.server_pid})" in result.stderr
    assert "Parallel" in result.stdout
    assert wait_gone(parent.tree) == []
    assert RecordBook(runtime_dir).load_all() == []  # the sweep's own server was stopped cleanly too


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_kill_9_of_a_managed_bench_takes_its_server_along(tmp_path, standin_ollama):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), FAKE_OLLAMA_TOKENS_PER_S="20")  # a long measurement
    bench = subprocess.Popen(
        [sys.executable, "-m", "app", "bench", "--config-dir", str(tmp_path / "cfg"), "--no-history",
         "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--managed", "--requests", "50",
         "--num-predict", "64", "--no-think"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert bench.stderr is not None
    seen = []
    for line in bench.stderr:  # progress lines; the server runs once it measures
        seen.append(line)
        if "measuring" in line:
            break
    tree = [p.pid for p in psutil.Process(bench.pid).children(recursive=True)]
    assert len(tree) == 2, seen  # `ollama serve` and its runner

    bench.kill()
    bench.wait(10)

    assert wait_gone(tree) == []
