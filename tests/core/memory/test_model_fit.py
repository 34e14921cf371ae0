"""A local model's fit under the server settings, with the num_ctx the server would really use (Ollama's
planner here; its rules are tested in tests/backends/ollama/test_launch_plan.py)."""

from __future__ import annotations

import json
from pathlib import Path

from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.show import facts_from_show
from app.core.memory.estimator import GpuMemory
from app.core.memory.model_fit import fit_verdict
from app.core.server.settings import ServerSettings
from app.core.units import MIB

RTX_4090 = GpuMemory(total_bytes=24564 * MIB)
QWEN_SHOW = json.loads((Path(__file__).resolve().parents[2] / "data/show_qwen3_14b.json").read_text())
QWEN = facts_from_show(QWEN_SHOW)
QWEN_SIZE = 9_276_198_565


def test_qwen3_14b_fits_a_4090_with_one_slot_and_spills_with_four_long_ones() -> None:
    one = fit_verdict(QWEN, QWEN_SIZE, ServerSettings(context_length=32768), "0.12.6", RTX_4090,
                      planner=OLLAMA_PLANNER)
    assert one.verdict == "fits" and one.num_ctx == 32768 and one.estimate is not None
    four = fit_verdict(QWEN, QWEN_SIZE, ServerSettings(context_length=32768, num_parallel=4), "0.12.6",
                       RTX_4090, planner=OLLAMA_PLANNER)
    assert four.verdict in ("spills", "wont_load") and four.label in ("Spills to the CPU", "Won't load")


def test_the_models_own_num_ctx_is_priced() -> None:
    show = dict(QWEN_SHOW, parameters="num_ctx                        40960\nnum_batch 512")
    verdict = fit_verdict(facts_from_show(show), QWEN_SIZE, ServerSettings(num_parallel=4), "0.12.6", RTX_4090,
                          planner=OLLAMA_PLANNER)
    assert verdict.num_ctx == 40960 and verdict.context_source == "the model's num_ctx"


def test_unknown_gpu_gives_no_verdict_and_says_why() -> None:
    verdict = fit_verdict(QWEN, QWEN_SIZE, ServerSettings(), "0.12.6", None, "No NVIDIA driver found",
                          planner=OLLAMA_PLANNER)
    assert verdict.verdict == "unknown" and verdict.estimate is None
    assert "GPU unknown (No NVIDIA driver found)" in verdict.explanation


def test_a_model_the_estimator_cannot_read_is_unknown_not_an_error() -> None:
    verdict = fit_verdict(facts_from_show({"model_info": {"general.architecture": "mamba"}}), 1000, ServerSettings(),
                          None, RTX_4090, planner=OLLAMA_PLANNER)
    assert verdict.verdict == "unknown" and "unsupported architecture" in verdict.explanation


def test_from_ollama_0_30_the_verdict_prices_the_batch_ollama_picks() -> None:
    h200 = GpuMemory(total_bytes=143771 * MIB)
    new = fit_verdict(QWEN, QWEN_SIZE, ServerSettings(), "0.32.15", h200, planner=OLLAMA_PLANNER)
    old = fit_verdict(QWEN, QWEN_SIZE, ServerSettings(), "0.20.0", h200, planner=OLLAMA_PLANNER)
    assert new.num_ctx == old.num_ctx == 40960  # the VRAM default, clamped to the training context
    assert new.estimate is not None and old.estimate is not None
    # -b/-ub 2048 (Ollama's automatic batch on a big card) against the fixed 512 of older versions
    assert new.estimate.compute_bytes > old.estimate.compute_bytes + 300 * MIB
