"""ModelDetails.show_dict: the one place a show reply is rebuilt for the estimator."""

from __future__ import annotations

import json
from pathlib import Path

from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.model_fit import fit_verdict
from app.core.model_shape import shape_from_show
from app.backends.ollama.wire import parse_show
from app.core.server.settings import ServerSettings
from app.core.units import MIB

DATA = Path(__file__).resolve().parents[1] / "data"
QWEN3_14B_Q4_K_M_BYTES = 9_000_210_784
RTX_4090 = 24564 * MIB


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_a_parsed_verbose_reply_prices_like_the_reply_itself() -> None:
    raw = load("show_qwen3_14b.json")
    show = parse_show(raw).show_dict()
    assert show["tensors"] == raw["tensors"] and show["model_info"] == raw["model_info"]
    assert shape_from_show(show, QWEN3_14B_Q4_K_M_BYTES) == shape_from_show(raw, QWEN3_14B_Q4_K_M_BYTES)


def test_a_plain_reply_has_no_tensors_and_brings_the_models_own_num_ctx() -> None:
    raw = load("ollama/qwen3_14b_show.json")  # recorded with verbose: true
    del raw["tensors"]  # as without verbose
    raw["parameters"] += "\nnum_ctx                        16384"
    show = parse_show(raw).show_dict()
    assert set(show) == {"model_info", "details", "parameters", "tensors"} and show["tensors"] is None
    verdict = fit_verdict(show, QWEN3_14B_Q4_K_M_BYTES, ServerSettings(), "0.12.6", RTX_4090, planner=OLLAMA_PLANNER)
    assert verdict.num_ctx == 16384 and verdict.context_source == "the model's num_ctx"
