"""llama-server's default context, as the real server gives it: started with -np 4 and no -c, each slot gets
the model's training context (llama.cpp's --fit sizes the cache for n_ctx_train x the slots), and that is
the context the planner prices."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.adapters.gguf_file import read_gguf
from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.core.server.state import ServerState
from tests.backends.llama_server.test_supervisor import get_json, make_llama  # noqa: F401 - the fixture


@pytest.mark.engine
def test_without_a_context_each_slot_gets_the_training_context_as_planned(make_llama, bundled_model: Path) -> None:  # noqa: F811
    h = make_llama(num_parallel=4, context_length=None)
    status = h.run(h.supervisor.start())
    assert status.state is ServerState.RUNNING_MANAGED, status.message
    settings = h.supervisor.settings
    shape = read_gguf(bundled_model).facts().shape()
    plan = LLAMA_SERVER_PLANNER.plan(settings, shape, None, None)
    log = "\n".join(h.supervisor.log_lines)
    # "load_model: initializing, n_slots = 4, n_ctx_slot = 8192, kv_unified = 'false'"
    slot = re.search(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = 'false'", log)
    assert slot is not None, log[-3000:]
    assert (plan.parallel, plan.num_ctx) == (int(slot.group(1)), int(slot.group(2))) == (4, shape.context_length)
    assert plan.ctx_total == 4 * 8192  # a cache for every slot, not one the slots share
    code, slots = get_json(settings.port, "/slots")
    assert code == 200 and [s["n_ctx"] for s in slots] == [plan.num_ctx] * 4


@pytest.mark.engine
@pytest.mark.parametrize(("extra", "parallel", "unified"), [("--fit off", 3, "false"), ("--kv-unified", 4, "true")])
def test_with_fit_off_or_a_unified_cache_the_slots_share_the_training_context_as_planned(
        make_llama, bundled_model: Path, extra: str, parallel: int, unified: str) -> None:  # noqa: F811
    h = make_llama(num_parallel=parallel, context_length=None, extra_settings=extra)
    status = h.run(h.supervisor.start())
    assert status.state is ServerState.RUNNING_MANAGED, status.message
    shape = read_gguf(bundled_model).facts().shape()
    plan = LLAMA_SERVER_PLANNER.plan(h.supervisor.settings, shape, None, None)
    log = "\n".join(h.supervisor.log_lines)
    slot = re.search(r"n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'", log)
    assert slot is not None, log[-3000:]
    assert (int(slot.group(1)), slot.group(3)) == (parallel, unified)
    if unified == "true":
        # one cache of the training context, which any slot may fill: priced as that cache shared
        assert plan.ctx_total == int(slot.group(2)) == shape.context_length
    else:
        assert plan.num_ctx == int(slot.group(2)) == 2816  # 8192 / 3, rounded up to 256
