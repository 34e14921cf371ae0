"""The llama-server command Ollama will run, predicted from the launch plan, against the commands the
real Ollama 0.32.15 logged on this machine (benchmarks/vram/cpu_estimate_vs_ollama.json)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from app.backends.ollama.launch import llama_server_args, llama_server_command, predicted_lines
from app.backends.ollama.launch_plan import OllamaGpus, OllamaLaunch, plan_launch
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.estimator import GpuMemory
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import MIB

ROOT = Path(__file__).resolve().parents[3]
SMOL = shape_from_show(json.loads((ROOT / "tests/data/show_smollm2_135m.json").read_text()), 98_362_745)
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
REAL = json.loads((ROOT / "benchmarks/vram/cpu_estimate_vs_ollama.json").read_text())["raw"]
H200 = GpuMemory(total_bytes=143771 * MIB)


def launch_plan_for(settings: ServerSettings, shape, gpu: GpuMemory, version: str | None) -> OllamaLaunch:
    """What Ollama will pass to llama-server for this model with these settings on this GPU."""
    return plan_launch(settings, shape, OllamaGpus(gpu.total_bytes, gpu.free_bytes), version)


@pytest.mark.parametrize("run", REAL, ids=lambda r: f"parallel{r['parallel']}")
def test_the_predicted_command_is_the_one_the_real_ollama_ran_on_the_cpu(run):
    real = shlex.split(run["command"])
    model, port = real[real.index("--model") + 1], real[real.index("--port") + 1]
    plan = plan_launch(ServerSettings(num_parallel=run["parallel"]), SMOL, OllamaGpus.none(), run["version"])
    assert llama_server_args(plan, model, port) == real[1:]
    assert real[0].endswith("/llama-server")


def test_on_the_h200_ollama_passes_the_training_context_and_its_large_batch():
    args = llama_server_args(launch_plan_for(ServerSettings(), QWEN, H200, "0.32.15"))
    joined = " ".join(args)
    assert "-c 40960 -np 1" in joined and "--flash-attn auto -b 2048 -ub 2048" in joined
    assert "--load-mode" not in args and "-ngl" not in args and "--cache-type-k" not in args


def test_settings_that_change_flags():
    q8 = llama_server_args(launch_plan_for(ServerSettings(kv_cache_type="q8_0", flash_attention="on",
                                                          num_parallel=4, context_length=8192), QWEN, H200, None))
    assert " ".join(q8).count("q8_0") == 2 and "--flash-attn on" in " ".join(q8) and "-c 32768 -np 4" in " ".join(q8)
    forced = plan_launch(ServerSettings(), QWEN, OllamaGpus(H200.total_bytes, H200.free_bytes), model_num_gpu=20)
    assert llama_server_args(forced)[-5:] == ["-ngl", "20", "--context-shift", "--keep", "4"]


def test_the_server_page_lines_say_where_the_numbers_come_from():
    plan = launch_plan_for(ServerSettings(num_parallel=2), QWEN, H200, "0.32.15")
    lines = list(OLLAMA_PLANNER.plan(ServerSettings(num_parallel=2), QWEN, None, H200,
                                     server_version="0.32.15").launch_lines)
    assert lines == predicted_lines(plan)
    assert lines[1] == llama_server_command(plan) and lines[1].startswith("llama-server --model '<model blob>'")
    assert "-c 81920 = 40960 per slot (Ollama's default, clamped to the model's 40960) × 2 slots" in lines[2]
    assert "-b/-ub 2048: Ollama's automatic batch (by context and free VRAM)" in lines[2]
