"""llama-server's load planner: the launch is the settings as given (tuning.arguments), with
llama.cpp's own defaults where a setting is left to the server."""

from __future__ import annotations

import json
from pathlib import Path

from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.backends.llama_server.tuning import arguments, llama_server_settings
from app.core.memory.estimator import GpuMemory
from app.core.memory.pricing import price, price_load
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import MIB

ROOT = Path(__file__).resolve().parents[3]
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
H200 = GpuMemory(total_bytes=143771 * MIB)


def test_the_batches_priced_are_the_ones_on_the_command_line():
    settings = ServerSettings(backend="llama_server", context_length=8192, batch_size=1024, micro_batch_size=256)
    args = arguments(settings)
    assert args[args.index("-b") + 1] == "1024" and args[args.index("-ub") + 1] == "256"
    load = LLAMA_SERVER_PLANNER.plan(settings, QWEN, None, H200).load_settings()
    assert (load.num_batch, load.ubatch) == (1024, 256)
    # a micro-batch of 256 needs a smaller compute buffer than llama.cpp's default of 512
    default = price(settings.replace(batch_size=None, micro_batch_size=None), QWEN, H200, None,
                    planner=LLAMA_SERVER_PLANNER)
    assert price(settings, QWEN, H200, None, planner=LLAMA_SERVER_PLANNER).compute_bytes < default.compute_bytes


def test_without_a_context_each_slot_gets_the_models_training_context():
    # common/fit.cpp: with -c unset and a cache per slot (an explicit -np), --fit sizes it for n_ctx_train x slots
    plan = LLAMA_SERVER_PLANNER.plan(ServerSettings(backend="llama_server", num_parallel=4), QWEN, None, H200)
    assert (plan.num_ctx, plan.ctx_total) == (40960, 163840)
    assert plan.context_source == "llama-server's default, the model's training context in each slot"
    assert plan.rules.server_name == "llama-server" and plan.launch_lines == ()


def test_where_the_card_cannot_hold_it_fit_cuts_the_default_context_not_the_layers():
    card = GpuMemory(total_bytes=24564 * MIB)
    priced = price_load(LLAMA_SERVER_PLANNER, ServerSettings(backend="llama_server", num_parallel=4), QWEN, card, None)
    plan, est = priced.plan, priced.estimate
    assert 4096 <= plan.num_ctx < 40960 and plan.num_ctx % 256 == 0
    assert "cut from 40960 by --fit" in plan.context_source and plan.notes
    # -ngl all (the GPU-layers option's -1): every layer stays on the GPU, within the free memory less --fit's GiB
    assert est.layers_on_gpu == est.layers_total == 41
    assert est.total_gpu_bytes + 1024 * MIB <= card.free_bytes
    # 256 tokens a slot more would not have fitted
    wider = price_load(LLAMA_SERVER_PLANNER, ServerSettings(backend="llama_server", num_parallel=4,
                                                            context_length=plan.num_ctx + 512), QWEN, card, None)
    assert wider.estimate.total_gpu_bytes + 1024 * MIB > card.free_bytes


def test_a_context_given_is_never_cut_and_a_layer_count_given_is_priced():
    card = GpuMemory(total_bytes=24564 * MIB)
    settings = llama_server_settings(ServerSettings(backend="llama_server", num_parallel=4, context_length=32768),
                                     n_gpu_layers=20)
    priced = price_load(LLAMA_SERVER_PLANNER, settings, QWEN, card, None)
    assert priced.plan.num_ctx == 32768 and priced.plan.num_gpu == 20
    assert priced.estimate.layers_on_gpu == 20 and priced.estimate.forced_layers


def test_with_a_unified_cache_or_fit_off_the_slots_share_the_training_context():
    unified = ServerSettings(backend="llama_server", num_parallel=4, extra_settings="--kv-unified")
    plan = LLAMA_SERVER_PLANNER.plan(unified, QWEN, None, H200)
    assert (plan.num_ctx, plan.ctx_total) == (10240, 40960) and "--kv-unified" in plan.context_source
    fit_off = ServerSettings(backend="llama_server", num_parallel=3, extra_settings="--fit off")
    plan = LLAMA_SERVER_PLANNER.plan(fit_off, QWEN, None, H200)
    assert plan.num_ctx == 13824 and "--fit off" in plan.context_source  # 40960 / 3, rounded up to 256
    # a context given is the context, whatever the flags
    given = LLAMA_SERVER_PLANNER.plan(unified.replace(context_length=2048), QWEN, None, H200)
    assert given.num_ctx == 2048
