"""Pricing server settings: Ollama's default context tiers, clamping, and the what-fits grid."""

import json
import math
from pathlib import Path

import pytest

from app.backends.ollama.launch_plan import ollama_default_context_length
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.estimator import GpuMemory, LoadSettings
from app.core.model_shape import ModelShape
from app.backends.ollama.show import shape_from_show
from app.core.memory.pricing import (
    fit_grid,
    others_bytes,
    plan_for,
    price,
)
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB

DATA = Path(__file__).resolve().parents[2] / "data"
QWEN3_14B_Q4_K_M_BYTES = 9_276_198_565


def load_settings_for(settings: ServerSettings, shape: ModelShape, gpu_total_bytes: int,
                      version: str | None) -> LoadSettings:
    """The load Ollama at `version` makes for this model on a GPU of gpu_total_bytes."""
    return plan_for(OLLAMA_PLANNER, settings, shape, GpuMemory(total_bytes=gpu_total_bytes), version).load_settings()


@pytest.fixture(scope="module")
def qwen3():
    return shape_from_show(json.loads((DATA / "show_qwen3_14b.json").read_text()), QWEN3_14B_Q4_K_M_BYTES)


@pytest.mark.parametrize("total_gib, overhead_gib, version, expected", [
    (24, 0, "0.6.6", 2048),
    (24, 0, "0.12.6", 4096),
    (24, 0, "0.15.5", 32768),
    (24, 0, None, 32768),
    (24, 1.5, "0.20.0", 4096),  # an overhead above ~1 GiB drops a 4090 below the 23 GiB tier
    (16, 0, "0.20.0", 4096),
    (48, 0, "0.30.1", 262144),
])
def test_default_context_follows_ollamas_tiers(total_gib, overhead_gib, version, expected):
    assert ollama_default_context_length(version, int(total_gib * GIB), int(overhead_gib * GIB)) == expected


def test_load_settings_clamp_to_training_context_and_map_flash_attention(qwen3):
    s = ServerSettings(context_length=131072, num_parallel=3, kv_cache_type="q8_0",
                       flash_attention="auto").with_options(gpu_overhead_mib=256)
    load = load_settings_for(s, qwen3, 24 * GIB, "0.20.0")
    assert load.num_ctx == 40960 and load.parallel == 3 and load.kv_cache_type == "q8_0"
    assert load.flash_attention is True and load.gpu_overhead_bytes == 256 * MIB
    assert load_settings_for(s.replace(flash_attention="off"), qwen3, 24 * GIB, None).flash_attention is False
    assert load_settings_for(ServerSettings(), qwen3, 24 * GIB, "0.20.0").num_ctx == 32768


def test_articles_trap_four_slots_of_32k_f16_does_not_fit_a_4090_but_q8_does(qwen3):
    gpu = GpuMemory(total_bytes=24564 * MIB)
    f16 = price(ServerSettings(num_parallel=4, context_length=32768, flash_attention="on"), qwen3, gpu, "0.30.0", planner=OLLAMA_PLANNER)
    q8 = price(ServerSettings(num_parallel=4, context_length=32768, flash_attention="on", kv_cache_type="q8_0"),
               qwen3, gpu, "0.30.0", planner=OLLAMA_PLANNER)
    assert f16.verdict in ("spills", "wont_load")
    assert q8.verdict in ("fits", "tight")
    assert f16.kv_bytes == 20 * GIB  # 160 KiB per token x 131072 cells


def test_grid_is_monotone_and_marks_contexts_beyond_the_model(qwen3):
    grid = fit_grid(ServerSettings(flash_attention="on"), qwen3, GpuMemory(total_bytes=24 * GIB), "0.30.0", planner=OLLAMA_PLANNER)
    order = {"fits": 0, "tight": 1, "spills": 2, "wont_load": 3}
    for row in grid:
        valid = [c for c in row if c.verdict != "invalid"]
        assert all(c.context <= 40960 for c in valid)
        assert all(c.verdict == "invalid" and "training context (40,960 tokens)" in c.reason for c in row if c.context > 40960)
        assert [order[c.verdict] for c in valid] == sorted(order[c.verdict] for c in valid)
    for col in range(len(grid[0])):
        cells = [row[col] for row in grid if row[col].verdict != "invalid"]
        assert [order[c.verdict] for c in cells] == sorted(order[c.verdict] for c in cells)
    assert grid[0][0].verdict == "fits"


def test_others_bytes_excludes_the_server_itself():
    assert others_bytes(math.nan, math.nan, True, 0) == 0
    assert others_bytes(1000.0, math.nan, False, 0) == 1000 * MIB
    assert others_bytes(11000.0, 9800.0, True, 0) == 1200 * MIB
    assert others_bytes(11000.0, math.nan, True, 9800 * MIB) == 1200 * MIB
    assert others_bytes(500.0, 9800.0, True, 0) == 0
