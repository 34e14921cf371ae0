"""Ollama's show reply read into neutral model facts: what the estimator and the pages price."""

from __future__ import annotations

import json
from pathlib import Path

from app.backends.ollama.show import facts_from_show, shape_from_show
from app.backends.ollama.wire import parse_show
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.estimator import GpuMemory
from app.core.memory.model_fit import fit_verdict
from app.core.model_facts import ModelCapability
from app.core.server.settings import ServerSettings
from app.core.units import MIB

DATA = Path(__file__).resolve().parents[2] / "data"
QWEN3_14B_Q4_K_M_BYTES = 9_000_210_784
RTX_4090 = GpuMemory(total_bytes=24564 * MIB)


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_a_parsed_verbose_reply_prices_like_the_reply_itself() -> None:
    raw = load("show_qwen3_14b.json")
    facts = parse_show(raw).facts
    assert list(facts.tensors or ()) == raw["tensors"] and facts.metadata == raw["model_info"]
    assert facts.shape(QWEN3_14B_Q4_K_M_BYTES) == shape_from_show(raw, QWEN3_14B_Q4_K_M_BYTES)
    assert facts.quantization == raw["details"]["quantization_level"] == "Q4_K_M"
    assert facts.architecture == "qwen3" and facts.training_context == 40960
    assert facts.size_bytes is None  # the show reply does not say it: the model list does


def test_a_plain_reply_has_no_tensors_and_brings_the_models_own_num_ctx() -> None:
    raw = load("ollama/qwen3_14b_show.json")  # recorded with verbose: true
    del raw["tensors"]  # as without verbose
    raw["parameters"] += "\nnum_ctx                        16384"
    facts = parse_show(raw).facts
    assert facts.tensors is None and facts.own_context == 16384 and facts.own_batch is None
    assert ModelCapability.COMPLETION in facts.capabilities
    assert facts.can(ModelCapability.THINKING) == ("thinking" in raw.get("capabilities", []))
    verdict = fit_verdict(facts, QWEN3_14B_Q4_K_M_BYTES, ServerSettings(), "0.12.6", RTX_4090, planner=OLLAMA_PLANNER)
    assert verdict.num_ctx == 16384 and verdict.context_source == "the model's num_ctx"
    assert verdict.estimate is not None and not facts.shape(QWEN3_14B_Q4_K_M_BYTES).weights.from_tensors


def test_capabilities_the_app_does_not_know_are_left_out() -> None:
    facts = facts_from_show({"model_info": {}, "capabilities": ["completion", "tools", "teleport", 7]})
    assert facts.capabilities == {ModelCapability.COMPLETION, ModelCapability.TOOLS}
