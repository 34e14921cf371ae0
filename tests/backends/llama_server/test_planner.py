"""llama-server's load planner: the launch is the settings as given (tuning.arguments), with
llama.cpp's own defaults where a setting is left to the server."""

from __future__ import annotations

import json
from pathlib import Path

from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.backends.llama_server.tuning import arguments
from app.core.memory.estimator import GpuMemory
from app.core.memory.pricing import price
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


def test_without_a_context_the_slots_share_the_models_training_context():
    plan = LLAMA_SERVER_PLANNER.plan(ServerSettings(backend="llama_server", num_parallel=4), QWEN, None, H200)
    assert (plan.num_ctx, plan.ctx_total) == (10240, 40960)
    assert plan.context_source == "llama-server's default, the model's 40960 shared by 4 slots"
    assert plan.rules.server_name == "llama-server" and plan.launch_lines == ()
