"""Judging an applied setting: keep it, or roll back on a crash, an OOM or an unexpected CPU spill."""

import json
from pathlib import Path

import pytest

from app.core.server.apply_check import ApplyObservation, judge
from app.core.memory.estimator import GpuMemory
from app.backends.ollama.show import shape_from_show
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.pricing import price
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def fits():
    shape = shape_from_show(json.loads((DATA / "show_qwen3_14b.json").read_text()), 9_276_198_565)
    est = price(ServerSettings(context_length=8192, flash_attention="on"), shape, GpuMemory(24 * GIB), "0.30.0", planner=OLLAMA_PLANNER)
    assert est.verdict == "fits"
    return est


def test_crash_rolls_back(fits):
    j = judge(fits, ApplyObservation(server_running=False, server_message="exit code 2: panic"))
    assert j.rollback and "exit code 2: panic" in j.reason


def test_oom_load_rolls_back_and_names_the_prediction(fits):
    j = judge(fits, ApplyObservation(True, model="qwen3:14b", load_error="cudaMalloc failed: out of memory",
                                     load_error_is_oom=True))
    assert j.rollback and "ran out of memory" in j.reason and "predicted" in j.reason


def test_other_load_error_keeps_the_settings(fits):
    j = judge(fits, ApplyObservation(True, model="nope:1b", load_error="model 'nope:1b' not found"))
    assert j.keep and "not found" in j.reason


def test_a_runner_that_exits_on_load_rolls_back_with_the_servers_words(fits):
    # Recorded from Ollama 0.32.15 (tests/data/ollama/real/exchanges.json, "q8_fa_off_chat").
    text = ("llama-server process has terminated: exit status 1: llama_init_from_model: quantized V cache "
            "requires flash_attn to be enabled")
    j = judge(fits, ApplyObservation(True, model="smollm2", load_error=text))
    assert j.rollback and "every request would fail" in j.reason and text in j.reason


def test_cpu_spill_against_a_fits_verdict_rolls_back(fits):
    j = judge(fits, ApplyObservation(True, model="qwen3:14b", ps_size_bytes=12 * GIB, ps_size_vram_bytes=9 * GIB))
    assert j.rollback and "25% of qwen3:14b" in j.reason and "CPU" in j.reason
    assert j.reason.startswith("The server put ")
    spill = ApplyObservation(True, model="m", ps_size_bytes=4 * GIB, ps_size_vram_bytes=3 * GIB)
    assert judge(fits, spill, "Ollama").reason.startswith("Ollama put 25% of m")  # the backend's name


def test_expected_spill_is_kept(fits):
    from dataclasses import replace

    spills = replace(fits, verdict="spills")
    j = judge(spills, ApplyObservation(True, model="qwen3:14b", ps_size_bytes=12 * GIB, ps_size_vram_bytes=9 * GIB))
    assert j.keep and "as predicted" in j.reason


def test_good_apply_reports_predicted_against_measured(fits):
    measured_mib = fits.total_gpu_bytes / MIB * 1.02
    j = judge(fits, ApplyObservation(True, model="qwen3:14b", ps_size_bytes=10 * GIB, ps_size_vram_bytes=10 * GIB,
                                     ps_context_length=8192, server_gpu_mib=measured_mib))
    assert j.keep and "+2%" in j.reason and "context 8192" in j.reason
    assert j.measured_vram_bytes == int(measured_mib * MIB)
    assert j.predicted_vram_bytes == fits.total_gpu_bytes


def test_all_on_the_cpu_is_kept_when_it_was_priced_for_a_machine_without_a_gpu():
    shape = shape_from_show(json.loads((DATA / "show_smollm2_135m.json").read_text()), 98_362_745)
    cpu = price(ServerSettings(num_parallel=2), shape, None, "0.32.15", planner=OLLAMA_PLANNER)
    assert cpu.cpu_only and cpu.verdict == "fits"
    j = judge(cpu, ApplyObservation(True, model="smollm2", ps_size_bytes=310 * MIB, ps_size_vram_bytes=0))
    assert j.keep and "on the CPU as predicted" in j.reason


def test_a_loaded_model_that_the_server_does_not_list_is_still_loaded(fits):
    # llama-server answers for the model it serves but lists no memory split: the model is loaded all the same.
    nothing = judge(fits, ApplyObservation(True))
    assert nothing.keep and "no model was loaded" in nothing.reason
    unlisted = judge(fits, ApplyObservation(True, model="smollm2", model_loaded=True))
    assert unlisted.keep and "no model was loaded" not in unlisted.reason
    assert unlisted.reason.startswith("smollm2 is loaded with the new settings") and "no GPU reading" in unlisted.reason
    measured_mib = fits.total_gpu_bytes / MIB * 0.95
    with_gpu = judge(fits, ApplyObservation(True, model="smollm2", model_loaded=True, server_gpu_mib=measured_mib))
    assert with_gpu.keep and with_gpu.reason.startswith("smollm2 loaded: the server's processes use")
    assert "-5%" in with_gpu.reason and with_gpu.measured_vram_bytes == int(measured_mib * MIB)
