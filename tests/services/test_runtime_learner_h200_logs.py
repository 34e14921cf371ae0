"""The runtime learner on the real logs of the loads measured on the NVIDIA H200 with 118 GiB held by another
process (a 24 GiB card simulated; benchmarks/vram/h200_spill_ollama.json and h200_spill_logs/): the real Ollama
0.32.15, whose llama-server child's buffer lines pass through its log, and llama-server itself, each log read
whole by its backend's reader, NVML's process memory after the load fed after it. Several loads spilled layers to
the CPU: that changes nothing, only the GPU buffers count."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from app.backends.llama_server.log_signals import LlamaServerLogSignals
from app.backends.ollama.log_signals import OllamaLogSignals
from app.core.memory.allowance import AllowanceSource
from app.core.telemetry import GpuInfo, GpuSample
from app.core.units import MIB
from app.core.watch.signals import BufferLogged
from app.services.runtime_learner import RuntimeLearner

HERE = Path(__file__).resolve().parents[2] / "benchmarks/vram"
ROWS = json.loads((HERE / "h200_spill_ollama.json").read_text())
H200 = GpuInfo("NVIDIA H200", "580.159.04", 143771.0)


def log_of(row: dict) -> Path:
    return HERE / "h200_spill_logs" / f"{row['mode'].replace('llama-server', 'server')}_{row['shape']}_" \
                                      f"{row['parallel']}_{row['ctx']}_{row['kv']}.log"


def reader_of(row: dict) -> OllamaLogSignals | LlamaServerLogSignals:
    return OllamaLogSignals() if row["mode"] == "ollama" else LlamaServerLogSignals()


def gpu_mib(row: dict) -> float:
    return sum(v for k, v in row["buffers"].items() if k.startswith("CUDA0"))


def logged_gpu_mib(row: dict) -> float:
    reader = reader_of(row)
    return sum(s.size_bytes for line in log_of(row).read_text(errors="replace").splitlines() for s in reader.read(line)
               if isinstance(s, BufferLogged) and s.device is not None) / MIB


# The loads whose log is their own (a later whole-card run of the same setting wrote over three of them) and that
# loaded (three did not: their process memory is 0).
LOADED = [r for r in ROWS if r.get("process_mib") and log_of(r).exists()
          and logged_gpu_mib(r) == pytest.approx(gpu_mib(r), abs=0.05)]


def sample(mib: float) -> GpuSample:
    return GpuSample(t=0.0, memory_used_mib=mib, memory_total_mib=H200.memory_total_mib, server_memory_mib=mib,
                     utilization_pct=0.0, power_w=0.0, temperature_c=0.0)


def feed(learner: RuntimeLearner, row: dict) -> None:
    learner.follow(reader_of(row))
    for line in log_of(row).read_text(errors="replace").splitlines():
        learner.feed_log(line)
    learner.feed_gpu(sample(row["process_mib"]))


def test_the_rows_are_real_loads_of_both_servers_some_spilled() -> None:
    assert len(LOADED) == 27
    assert {r["mode"] for r in LOADED} == {"ollama", "llama-server"}
    assert sum(r["offloaded"] < r["layers"] for r in LOADED) >= 8  # layers on the CPU


@pytest.mark.parametrize("row", LOADED, ids=lambda r: f"{r['mode']}-{r['shape']}-{r['config']}")
def test_each_load_teaches_nvml_less_its_logged_gpu_buffers(row: dict) -> None:
    learner = RuntimeLearner(None, H200)
    feed(learner, row)
    learnt = learner.allowance()
    assert learnt.source is AllowanceSource.LEARNED
    assert learnt.size_bytes / MIB == pytest.approx(row["process_mib"] - gpu_mib(row), abs=0.01)
    assert 586 <= learnt.size_bytes / MIB <= 594  # the H200's runtime, spilled or not, whichever server


def test_one_learner_over_every_load_prices_the_median_of_the_last_five() -> None:
    learner = RuntimeLearner(None, H200)
    for row in LOADED:
        feed(learner, row)
    learnt = learner.allowance()
    assert learnt.loads == len(LOADED)
    assert learnt.size_bytes / MIB == pytest.approx(
        statistics.median(r["process_mib"] - gpu_mib(r) for r in LOADED[-5:]), abs=0.01)


def test_a_load_that_failed_teaches_nothing() -> None:
    failed = [r for r in ROWS if not r.get("process_mib") and log_of(r).exists()]
    assert failed
    for row in failed:
        learner = RuntimeLearner(None, H200)
        feed(learner, row)
        assert learner.allowance().source is AllowanceSource.DEFAULT
