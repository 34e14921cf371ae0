"""`ollama-deck bench --demo` as a user runs it: a real process measuring the embedded engine (the
bundled llama-server on the bundled SmolLM2 model) over parallel 1 and 2, with the server's own view
of each point beside the client's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.fakes.ollama.server_fixtures import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.engine
def test_demo_bench_measures_the_embedded_engine_and_the_server_agrees(tmp_path, llama_server_binary,
                                                                       bundled_model) -> None:
    out = tmp_path / "out.json"
    port = free_port()
    result = subprocess.run([sys.executable, "-m", "app", "bench", "--demo", "--url", f"http://127.0.0.1:{port}",
                             "--parallel", "1,2", "--concurrency",
                             "3", "--requests", "6", "--num-predict", "48", "--no-think", "--config-dir",
                             str(tmp_path / "cfg"), "--no-history", "--quiet", "--json", str(out)],
                            env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "Parallel" in line)
    assert "Slots busy" in header and "Waiting" in header and "Server tok/s" in header
    data = json.loads(out.read_text())
    assert data["fingerprint"]["backend_kind"] == "llama_server" and data["fingerprint"]["managed"]
    assert data["fingerprint"]["model"] == bundled_model.name[: -len(".gguf")]  # served under its file's name
    for point in data["points"]:
        # Stable, unless other programs took the CPU meanwhile (a shared machine): then it says so.
        contended = point["contention"] in ("cpu", "gpu")
        assert point["status"] == ("unstable" if contended else "ok") and point["requests_ok"] == 6, point
        assert point["contention"] != "unmeasured", point  # the embedded engine's CPU is measured
        # The server saw every slot of the point at work, and never more clients waiting than were beyond them.
        assert point["server_slots_busy_max"] == point["parallel"] == point["server_slots_total"]
        assert 0 <= point["server_requests_deferred_max"] <= 3 - point["parallel"]
        assert point["server_generated_tokens"] == point["output_tokens"]  # its counter agrees with the replies
    # At parallel 1 two of the three clients wait through whole replies: the readings (4 a second) see them.
    assert data["points"][0]["server_requests_deferred_max"] >= 1
    assert not (tmp_path / "cfg" / "settings.json").exists()  # the saved settings are not the demo's
    left = [p.pid for p in psutil.process_iter(["name", "cmdline"])
            if (p.info["name"] or "").startswith("llama-server") and str(port) in (p.info["cmdline"] or [])]
    assert not left, f"llama-server left running on port {port}: {left}"
