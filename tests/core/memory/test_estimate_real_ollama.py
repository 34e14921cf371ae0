"""The estimate against the real Ollama 0.32.15 on this machine (no GPU): the llama-server command it
logs is the predicted one, and the buffers llama-server logs are the ones priced in host memory.

It runs benchmarks/bench_estimate_vs_ollama.py's measurement (a real `ollama serve` on a free port with
its own HOME and models folder, offline, stopped afterwards). Without the real Ollama it is skipped
with the reason, or fails with DECK_REQUIRE_OLLAMA=1 (tests/ollama_real_fixtures.py)."""

from __future__ import annotations

import importlib.util
import os
import shlex
from pathlib import Path
from types import ModuleType

import pytest


pytestmark = pytest.mark.ollama_real
ROOT = Path(__file__).resolve().parents[3]


def _bench() -> ModuleType:
    path = ROOT / "benchmarks" / "bench_estimate_vs_ollama.py"
    spec = importlib.util.spec_from_file_location("bench_estimate_vs_ollama", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def real_ollama(request: pytest.FixtureRequest) -> str:
    """The real `ollama` program: $DECK_REAL_OLLAMA, else the one the real-Ollama fixtures find (an
    `ollama` 0.32.15 on PATH with its runners, or the kit laid out; tests/ollama_real_fixtures.py)."""
    given = os.environ.get("DECK_REAL_OLLAMA", "")
    if given and Path(given).is_file():
        return given
    return str(request.getfixturevalue("ollama_kit").ollama)


@pytest.mark.parametrize("parallel", [2])
def test_the_estimate_is_what_the_real_cpu_server_runs_and_allocates(real_ollama, parallel):
    bench = _bench()
    raw = bench.measure(real_ollama, bench.bundled_gguf(), parallel)
    row = bench.compare(raw)
    assert raw["ps"]["size_vram"] == 0 and raw["version"] == "0.32.15"
    assert row["command_matches"], (row["command_real"], row["command_predicted"])
    assert "-b 1024 -ub 1024" in row["command_real"] and f"-np {parallel}" in row["command_real"]
    for key in ("model_mib", "kv_mib", "output_mib"):
        real, predicted = row[key]
        assert predicted == pytest.approx(real, abs=0.01), key
    real, predicted = row["compute_mib"]
    assert predicted == pytest.approx(real, rel=0.08)
    real, predicted = row["ps_size_mib"]
    assert predicted == pytest.approx(real, rel=0.01)
    assert row["verdict"] == "fits" and row["processor"] == "100% CPU"
    assert shlex.split(row["command_real"])[0].endswith("llama-server")
