"""Ollama's own launch rules (v0.32.15): the automatic batch by context and free VRAM, the default
context by VRAM capped at the training context, one slot where Ollama forces it, and the flags."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from app.backends.ollama.launch_plan import (
    OllamaGpus,
    context_for,
    ollama_default_context_length,
    automatic_batch,
    batch_for_context,
    flash_attention_flag,
    plan_launch,
    predicted_vram_bytes,
)
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB

DATA = Path(__file__).resolve().parents[2] / "data"
QWEN = shape_from_show(json.loads((DATA / "show_qwen3_14b.json").read_text()), 9_000_210_784)
SMOL = shape_from_show(json.loads((DATA / "show_smollm2_135m.json").read_text()), 98_362_745)
H200 = OllamaGpus(total_bytes=143771 * MIB, free_bytes=143200 * MIB)
RTX_4090 = OllamaGpus(total_bytes=24564 * MIB, free_bytes=24000 * MIB)


@pytest.mark.parametrize("ctx_total, batch", [
    (2048, 512), (4096, 512), (4097, 1024), (8192, 1024), (32768, 1024), (32769, 2048), (1638400, 2048),
])
def test_batch_grows_with_the_context_over_all_slots(ctx_total, batch):
    assert batch_for_context(ctx_total) == batch
    assert automatic_batch(ctx_total, 0, OllamaGpus.none(), "auto") == batch  # no GPU: nothing to step down for


def test_what_the_real_server_picked_on_the_cpu_and_the_h200():
    # The real 0.32.15: -b 512 on the CPU, -b 1024 with parallel 2 and 4, -b 2048 -ub 2048 on the H200.
    cpu = OllamaGpus.none()
    assert [plan_launch(ServerSettings(num_parallel=p), SMOL, cpu, "0.32.15").num_batch for p in (1, 2, 4)] == \
        [512, 1024, 1024]
    h200 = plan_launch(ServerSettings(), QWEN, H200, "0.32.15")
    assert (h200.num_ctx, h200.ctx_total, h200.num_batch) == (40960, 40960, 2048)
    assert "clamped to the model's 40960" in h200.context_source


def test_the_batch_steps_down_when_the_prediction_leaves_too_little_vram():
    ctx = 40960
    predicted = predicted_vram_bytes(9_000_210_784, QWEN, ctx)
    assert predicted == 9_000_210_784 + 2 * 40 * 8 * 128 * ctx * 2  # the file plus an f16 KV cache
    # 2048 wants the prediction under 60 % of the free memory, 1024 under 75 %, and room for the surcharge.
    assert automatic_batch(ctx, predicted, OllamaGpus(int(predicted / 0.59), int(predicted / 0.59)), "auto") == 2048
    assert automatic_batch(ctx, predicted, OllamaGpus(int(predicted / 0.70), int(predicted / 0.70)), "auto") == 1024
    assert automatic_batch(ctx, predicted, OllamaGpus(int(predicted / 0.78), int(predicted / 0.78)), "auto") == 512
    # parallel 40 on the H200: the prediction is far above 80 % of the card, so the smallest automatic batch
    assert plan_launch(ServerSettings(num_parallel=40), QWEN, H200, "0.32.15").num_batch == 512


def test_without_flash_attention_on_cuda_the_batch_stays_small():
    small_card = OllamaGpus(8 * GIB, 7 * GIB)
    assert automatic_batch(40960, GIB, small_card, "off") == 256
    assert automatic_batch(4096, GIB, small_card, "off") == 512
    assert automatic_batch(40960, GIB, RTX_4090, "off") == 512
    assert automatic_batch(40960, GIB, replace(small_card, cuda=False), "off") == 2048


def test_default_context_is_by_vram_and_a_setting_or_the_models_own_wins():
    assert plan_launch(ServerSettings(), QWEN, OllamaGpus.none(), "0.32.15").num_ctx == 4096
    assert plan_launch(ServerSettings(), QWEN, RTX_4090, "0.32.15").num_ctx == 32768
    assert plan_launch(ServerSettings(context_length=2048), QWEN, H200, "0.32.15").num_ctx == 2048
    own = plan_launch(ServerSettings(context_length=2048), QWEN, H200, "0.32.15", model_num_ctx=16384,
                      model_num_batch=128)
    assert (own.num_ctx, own.num_batch, own.batch_source) == (16384, 128, "the model's num_batch")


def test_one_slot_for_embedding_models_and_the_architectures_ollama_forces():
    assert plan_launch(ServerSettings(num_parallel=4), SMOL, OllamaGpus.none(), embedding=True).parallel == 1
    qwen3vl = replace(QWEN, architecture="qwen3vl")
    plan = plan_launch(ServerSettings(num_parallel=4), qwen3vl, H200, "0.32.15")
    assert plan.parallel == 1 and plan.ctx_total == plan.num_ctx and "one slot" in plan.notes[0]


def test_flags_follow_the_environment():
    assert [flash_attention_flag(v) for v in ("on", "off", "auto")] == ["on", "off", "auto"]
    q8 = plan_launch(ServerSettings(kv_cache_type="q8_0"), SMOL, RTX_4090)
    assert q8.kv_cache_type == "q8_0" and not q8.load_mode_none
    f16 = plan_launch(ServerSettings(), SMOL, OllamaGpus.none())
    assert f16.kv_cache_type == "" and f16.load_mode_none  # no GPU: Ollama turns mmap off
    assert plan_launch(ServerSettings(), SMOL, RTX_4090, model_num_gpu=0).load_mode_none


def launch_batch_is_one_of_ollamas_and_never_grows_with_less_vram(ctx: int, free_gib: float, parallel: int) -> None:
    """Property: the automatic batch is 512, 1024 or 2048, and a card with less free memory never gets a larger one."""
    settings = ServerSettings(num_parallel=parallel, context_length=ctx)
    big = plan_launch(settings, QWEN, OllamaGpus(int(free_gib * 2 * GIB), int(free_gib * 2 * GIB)), "0.32.15")
    small = plan_launch(settings, QWEN, OllamaGpus(int(free_gib * GIB), int(free_gib * GIB)), "0.32.15")
    assert {big.num_batch, small.num_batch} <= {512, 1024, 2048}
    assert small.num_batch <= big.num_batch
    assert big.ctx_total == min(ctx, QWEN.context_length) * parallel


@hsettings(max_examples=100, deadline=None)
@given(st.integers(256, 131072), st.floats(1.0, 200.0), st.integers(1, 16))
def test_property_batch_never_grows_with_less_vram(ctx, free_gib, parallel):
    launch_batch_is_one_of_ollamas_and_never_grows_with_less_vram(ctx, free_gib, parallel)


def test_only_an_ollama_of_0_30_or_later_plans_the_launch_itself():
    from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
    from app.backends.ollama.planner import OLLAMA_PLANNER
    from app.core.memory.estimator import GpuMemory

    h200 = GpuMemory(total_bytes=H200.total_bytes)
    new, current = OLLAMA_PLANNER.plan(ServerSettings(), QWEN, None, h200, server_version="0.32.15"), \
        OLLAMA_PLANNER.plan(ServerSettings(), QWEN, None, h200)
    assert new.num_batch == current.num_batch == 2048 and new.launch_lines and new.launch_lines == current.launch_lines
    old = OLLAMA_PLANNER.plan(ServerSettings(), QWEN, None, h200, server_version="0.20.0")
    assert old.num_batch == 512 and old.launch_lines == ()  # its own runner: no llama-server command
    llama = LLAMA_SERVER_PLANNER.plan(ServerSettings(backend="llama_server"), QWEN, None, h200,
                                      server_version="b6123-abc1234")
    # llama-server run directly gets the settings' flags: llama.cpp's own batches, no planned command
    assert (llama.num_batch, llama.num_ubatch, llama.launch_lines) == (2048, 512, ())
    assert llama.load_settings().ubatch == 512


RTX_4090_BYTES = 24564 * MIB


@pytest.mark.parametrize("version, gpu, overhead, ctx", [
    ("0.6.6", RTX_4090_BYTES, 0, 2048), ("0.12.6", RTX_4090_BYTES, 0, 4096), ("0.15.5", RTX_4090_BYTES, 0, 32768),
    ("0.15.5", RTX_4090_BYTES, 2 * GIB, 4096),  # OLLAMA_GPU_OVERHEAD drops a 4090 below the 23 GiB tier
    ("0.30.1", 80 * GIB, 0, 262144), ("0.30.1", 8 * GIB, 0, 4096), ("0.30.1", None, 0, 4096),
])
def test_default_context_by_version_and_vram(version: str, gpu: int | None, overhead: int, ctx: int) -> None:
    assert ollama_default_context_length(version, gpu, overhead) == ctx


def test_context_precedence_and_clamp() -> None:
    tuned = ServerSettings(context_length=8192)
    assert context_for(tuned, 16384, "0.12.6", RTX_4090_BYTES) == (16384, "the model's num_ctx")
    assert context_for(tuned, None, "0.12.6", RTX_4090_BYTES) == (8192, "the context setting")
    assert context_for(tuned, None, "0.12.6", RTX_4090_BYTES, context_setting="OLLAMA_CONTEXT_LENGTH") == (
        8192, "OLLAMA_CONTEXT_LENGTH")
    assert context_for(ServerSettings(), None, "0.20.0", RTX_4090_BYTES) == (32768, "Ollama's default")
    ctx, source = context_for(ServerSettings(context_length=131072), None, "0.20.0", RTX_4090_BYTES, 40960)
    assert ctx == 40960 and "clamped" in source
