"""The estimator with Ollama's own choices and the host's RAM: no GPU at all, the automatic batch on
the H200, and a partial offload whose CPU side outgrows the computer's memory.

The CPU rows are the real Ollama 0.32.15 on this machine (benchmarks/vram/cpu_estimate_vs_ollama.json,
written by benchmarks/bench_estimate_vs_ollama.py); the H200 figure is the real process at parallel 1
with the batch Ollama picked (-b 2048 -ub 2048)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate
from app.core.memory.host import HOST_FIT_MARGIN_BYTES, HostMemory, host_memory_from
from app.core.memory.pricing import fit_grid, plan_for, price
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB

ROOT = Path(__file__).resolve().parents[3]
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
SMOL = shape_from_show(json.loads((ROOT / "tests/data/show_smollm2_135m.json").read_text()), 98_362_745)
H200 = GpuMemory(total_bytes=143771 * MIB, runtime_overhead_bytes=588 * MIB)
CPU_RUNS = json.loads((ROOT / "benchmarks/vram/cpu_estimate_vs_ollama.json").read_text())["raw"]
# nvidia-smi's figure for the llama-server process Ollama 0.32.15 started on the H200 at parallel 1
# (-c 40960 -b 2048 -ub 2048); at micro-batch 512 the estimate had been 667 MiB under it.
H200_AUTO_BATCH_PROCESS_MIB = 15882


def test_the_automatic_batch_closes_the_gap_to_the_real_h200_process():
    est = price(ServerSettings(), QWEN, H200, "0.32.15", planner=OLLAMA_PLANNER)
    assert est.n_ctx_total == 40960 and est.verdict == "fits"
    assert est.total_gpu_bytes / MIB == pytest.approx(H200_AUTO_BATCH_PROCESS_MIB, rel=0.005)
    at_512 = estimate(QWEN, LoadSettings(num_ctx=40960, num_batch=512), H200)
    assert H200_AUTO_BATCH_PROCESS_MIB - at_512.total_gpu_bytes / MIB > 500  # what pricing 512 missed


@pytest.mark.parametrize("run", CPU_RUNS, ids=lambda r: f"parallel{r['parallel']}")
def test_no_gpu_prices_every_buffer_in_host_memory_like_the_real_cpu_server(run):
    host = HostMemory(run["host_available"], run["host_total"])
    est = price(ServerSettings(num_parallel=run["parallel"]), SMOL, None, run["version"], host, planner=OLLAMA_PLANNER)
    b = run["buffers"]
    assert est.cpu_only and est.processor == "100% CPU" and est.total_gpu_bytes == 0
    assert est.weights_cpu_bytes / MIB == pytest.approx(b["CPU model"], abs=0.01)
    assert est.kv_bytes / MIB == pytest.approx(b["CPU KV"], abs=0.01)
    assert est.host_compute_bytes / MIB == pytest.approx(b["CPU compute"], rel=0.08)
    # /api/ps size is the sum of the buffers; the host need adds the process's own memory on top
    assert est.host_bytes == pytest.approx(run["ps"]["size"] + 20 * MIB, rel=0.03)
    assert est.host_bytes == pytest.approx(run["rss"], rel=0.06)
    assert est.verdict == "fits" and est.explanation.startswith("Fits: runs on the CPU (no GPU)")


def test_no_gpu_and_too_little_ram_says_the_computer_runs_out_of_memory():
    need = price(ServerSettings(num_parallel=4), SMOL, None, "0.32.15", planner=OLLAMA_PLANNER).host_bytes
    short = price(ServerSettings(num_parallel=4), SMOL, None, "0.32.15", HostMemory(need - MIB), planner=OLLAMA_PLANNER)
    assert short.verdict == "wont_load" and short.host_verdict == "wont_load"
    assert "The computer runs out of memory" in short.explanation and "signal: killed" in short.explanation
    # Said of whichever server loads the model (Ollama's runner is no llama-server).
    assert "the kernel kills the server while it loads" in short.explanation
    tight = price(ServerSettings(num_parallel=4), SMOL, None, "0.32.15", HostMemory(need + HOST_FIT_MARGIN_BYTES // 2), planner=OLLAMA_PLANNER)
    assert tight.verdict == "tight" and tight.host_headroom_bytes == HOST_FIT_MARGIN_BYTES // 2
    unknown = price(ServerSettings(num_parallel=4), SMOL, None, "0.32.15", planner=OLLAMA_PLANNER)
    assert unknown.verdict == "fits" and unknown.host_available_bytes is None and "not checked" in unknown.explanation


def test_parallel_40_on_the_h200_puts_layers_on_the_cpu_whose_kv_outgrows_the_hosts_ram():
    # The real run: -c 1638400, llama.cpp's fit put 20 of 41 layers on the GPU, the kernel killed llama-server.
    settings = ServerSettings(num_parallel=40)
    assert plan_for(OLLAMA_PLANNER, settings, QWEN, H200, "0.32.15").ctx_total == 1638400
    est = price(settings, QWEN, H200, "0.32.15", HostMemory(64 * GIB, 64 * GIB), planner=OLLAMA_PLANNER)
    assert 18 <= est.layers_on_gpu <= 24 and est.layers_total == 41
    assert est.host_bytes > 64 * GIB and est.host_verdict == "wont_load" and est.verdict == "wont_load"
    assert est.explanation.startswith("The computer runs out of memory:")
    assert f"{est.layers_on_gpu} of 41 layers go on the GPU" in est.explanation
    roomy = price(settings, QWEN, H200, "0.32.15", HostMemory(512 * GIB, 512 * GIB), planner=OLLAMA_PLANNER)
    assert roomy.verdict == "spills" and roomy.host_verdict == "fits"


def test_a_full_offload_needs_little_host_ram():
    est = price(ServerSettings(), QWEN, H200, "0.32.15", HostMemory(8 * GIB, 16 * GIB), planner=OLLAMA_PLANNER)
    assert est.verdict == "fits" and est.host_verdict == "fits"
    assert est.host_bytes < GIB  # the input table (CPU_Mapped 417 MiB), the host compute and output buffers


def test_the_heat_map_without_a_gpu_is_priced_in_ram():
    grid = fit_grid(ServerSettings(), SMOL, None, "0.32.15", host=HostMemory(2 * GIB, 4 * GIB), planner=OLLAMA_PLANNER)
    verdicts = {cell.verdict for row in grid for cell in row}
    assert "wont_load" in verdicts and "fits" in verdicts and "spills" not in verdicts
    first = grid[0][0]
    assert first.verdict == "fits" and first.total_gpu_bytes == price(
        ServerSettings(num_parallel=first.parallel, context_length=first.context), SMOL, None, "0.32.15", planner=OLLAMA_PLANNER).host_bytes


def test_host_memory_from_a_reading_gives_back_what_the_running_server_holds():
    assert host_memory_from(16384.0, 12288.0) == HostMemory(4096 * MIB, 16384 * MIB)
    assert host_memory_from(16384.0, 12288.0, 1024.0).available_bytes == 5120 * MIB
    assert host_memory_from(16384.0, 12288.0, float("nan")).available_bytes == 4096 * MIB
