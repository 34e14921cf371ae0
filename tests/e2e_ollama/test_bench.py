"""`ollama-deck bench --managed` on the real Ollama 0.32.15: a sweep over parallel 1, 2 and 4 restarts
its own `ollama serve` per point with OLLAMA_NUM_PARALLEL, measures every point, and leaves no process
behind. Only what the server guarantees is asserted (every request answered, the slots it was given),
not its speed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.fakes.ollama.server_fixtures import free_port

pytestmark = pytest.mark.ollama_real
ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 4  # per point: enough for every slot to be busy at parallel 4, few enough for 2 cores


def test_managed_sweep_over_parallel_1_2_4_measures_every_point(real_ollama_on_path, tmp_path):
    out = tmp_path / "sweep.json"
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Name a colour.\nSay hello.\n")  # short prompts: little prefill on 2 cores
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "bench", "--managed", "--url", f"http://127.0.0.1:{free_port()}",
         "--model", "smollm2", "--parallel", "1,2,4", "--context", "512", "--requests", str(REQUESTS),
         "--num-predict", "8", "--no-think", "--warmup", "1", "--prompt-file", str(prompts), "--json", str(out), "--config-dir", str(tmp_path / "cfg"),
         "--history", str(tmp_path / "history.sqlite3")],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=280)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stdout + stderr
    assert "restarting" in stderr and "measuring" in stderr

    data = json.loads(out.read_text())
    points = data["points"]
    assert [p["parallel"] for p in points] == [1, 2, 4]
    for point in points:
        # every point measured; one taken while other programs used the CPU is (rightly) said to be unstable
        contended = point["status"] == "unstable" and "contended" in (point.get("reason") or "")
        assert point["status"] == "ok" or contended, (point["parallel"], point.get("reason"), point.get("detail"))
        assert point["requests_ok"] == REQUESTS and point["requests_failed"] == 0
        assert point["output_tokens_per_s"] and point["output_tokens_per_s"] > 0
        assert point["ttft_ms_p50"] is not None and point["vram_peak_mib"] is None  # no NVML here: null
        assert point["loaded_context_length"] == 512  # per slot, as the restarted server's /api/ps says
    assert data["fingerprint"]["ollama_version"] == "0.32.15"
    assert "recommendation" in data  # which point meets the latency targets depends on the machine's speed
    # The CLI has exited; every server it started had this test's HOME.
    leftovers = [p.pid for p in psutil.process_iter(["name", "environ"])
                 if p.info["name"] in ("ollama", "llama-server")
                 and (p.info.get("environ") or {}).get("HOME") == os.environ["HOME"]]
    assert not leftovers, f"servers left behind by the sweep: {leftovers}"
