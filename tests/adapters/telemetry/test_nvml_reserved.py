"""The driver's reserved memory: NVML's memory info v2 through NvmlBackend (pynvml's real structs and error
classes, the driver side scripted), the fallback to v1 where the driver or the bindings lack v2, recorded
NVIDIA H200 readings replayed with the reserve, and the arithmetic that leaves the reserve out of "used by
others" and out of free memory exactly once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pynvml
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.adapters.telemetry import nvml as nvml_mod
from app.adapters.telemetry.nvml import NvmlBackend
from app.core.fit_feed import FEED_STEP_BYTES, gpu_budget
from app.core.memory.estimator import GpuMemory
from app.core.memory.pricing import others_bytes
from app.core.telemetry import GpuSample
from app.core.units import MIB
from app.core.watch.events import EventKind
from tests.adapters.telemetry.test_nvml import FakeNvml, fake_nvml, nvml_error  # noqa: F401 - the fixture
from tests.adapters.telemetry.test_nvml_slowdowns import idle_reserve, recording, replay

H200_RESERVE = idle_reserve()  # bytes: the recorded idle H200's v1 "used", nothing running on it


def memory_calls(fake: FakeNvml) -> int:
    return fake.calls.count("nvmlDeviceGetMemoryInfo")


def test_the_idle_h200_recording_gives_the_reserve_memory_info_v2_reports() -> None:
    # v2 read on the same card and driver before each Ollama load of the H200 spill measurements
    loads = json.loads((Path(__file__).resolve().parents[3] / "benchmarks/vram/h200_spill_ollama.json").read_text())
    assert {r["before"]["reserved_mib"] for r in loads} == {H200_RESERVE / MIB} == {615.0625}


def test_memory_info_v2_gives_used_as_nvidia_smi_shows_it_and_the_reserve_apart(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.used, fake_nvml.reserved = 15_000 * MIB, 412 * MIB  # v1 "used" = total - free holds the reserve
    s = NvmlBackend().sample(1.0, [])
    assert s is not None
    assert (s.memory_used_mib, s.memory_reserved_mib) == (15_000.0 - 412.0, 412.0)
    assert s.memory_free_mib == 24_564.0 - 15_000.0  # what NVML calls free, either way
    assert s.reserved_known_mib == 412.0


def test_a_driver_without_v2_falls_back_to_v1_once(fake_nvml: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    fake_nvml.used, fake_nvml.reserved = 15_000 * MIB, None  # the driver lacks nvmlDeviceGetMemoryInfo_v2
    backend = NvmlBackend()
    with caplog.at_level("INFO", logger="app.adapters.telemetry.nvml"):
        first = backend.sample(1.0, [])
    opened = memory_calls(fake_nvml) - 2  # v2 refused, then v1
    second = backend.sample(2.0, [])
    assert first is not None and second is not None
    for s in (first, second):
        assert s.memory_used_mib == 15_000.0 and math.isnan(s.memory_reserved_mib)
        assert s.reserved_known_mib == 0.0 and s.memory_free_mib == 24_564.0 - 15_000.0
    assert memory_calls(fake_nvml) - opened == 3  # v2 is not asked again
    assert sum("memory info v2 unavailable" in r.getMessage() for r in caplog.records) == 1
    assert backend.available


def test_v2_refused_by_the_driver_falls_back_to_v1(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.reserved, fake_nvml.v2_error = 412 * MIB, pynvml.NVML_ERROR_NOT_SUPPORTED
    s = NvmlBackend().sample(1.0, [])
    assert s is not None and s.memory_used_mib == 620.0 and math.isnan(s.memory_reserved_mib)


def test_bindings_without_the_version_argument_read_v1(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    fake_nvml.reserved = 412 * MIB

    def old_binding(handle):  # nvidia-ml-py before memory info v2: no version argument, no nvmlMemory_v2
        return pynvml.c_nvmlMemory_t(total=fake_nvml.total, free=fake_nvml.total - fake_nvml.used, used=fake_nvml.used)

    monkeypatch.setattr(pynvml, "nvmlDeviceGetMemoryInfo", old_binding)
    s = NvmlBackend().sample(1.0, [])  # knows the v2 constant, but its call takes no version
    assert s is not None and s.memory_used_mib == 620.0 and math.isnan(s.memory_reserved_mib)
    monkeypatch.delattr(pynvml, "nvmlMemory_v2")
    assert nvml_mod._memory_v2_version() is None
    s = NvmlBackend().sample(1.0, [])
    assert s is not None and s.memory_used_mib == 620.0 and math.isnan(s.memory_reserved_mib)


def test_the_installed_bindings_ask_for_v2() -> None:
    assert nvml_mod._memory_v2_version() == pynvml.nvmlMemory_v2


def test_a_gpu_lost_on_the_v2_call_stops_sampling(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.reserved = 412 * MIB
    backend = NvmlBackend()
    assert backend.sample(1.0, []) is not None
    fake_nvml.errors["nvmlDeviceGetMemoryInfo"] = pynvml.NVML_ERROR_GPU_IS_LOST
    assert backend.sample(2.0, []) is None and not backend.available


@pytest.mark.parametrize("name", ["nvml_llama.json", "nvml_others_llama.json", "nvml_others.json"])
def test_recorded_h200_readings_with_the_reserve_keep_free_memory_as_recorded(fake_nvml: FakeNvml, name: str) -> None:  # noqa: F811
    with_reserve, _ = replay(fake_nvml, name, reserved=H200_RESERVE)
    without, _ = replay(fake_nvml, name, reserved=None)
    raw = recording(name)["samples"]
    assert len(with_reserve) == len(without) == len(raw)
    for v2, v1, rec in zip(with_reserve, without, raw):
        assert v2.memory_reserved_mib == H200_RESERVE / MIB and math.isnan(v1.memory_reserved_mib)
        assert v2.memory_used_mib == pytest.approx(v1.memory_used_mib - H200_RESERVE / MIB)
        assert v2.memory_free_mib == pytest.approx(v1.memory_free_mib)
        assert v2.memory_free_mib == pytest.approx(rec["memory"]["free"] / MIB)  # NVML's own free, exactly
        for running in (True, False):
            # the fit panel's budget: the reserve is its own part with v2, inside "others" with v1; a load gets
            # the same memory either way (up to the 64 MiB steps "others" is rounded down to)
            t2, o2, r2 = gpu_budget(v2, running, 0)
            t1, o1, r1 = gpu_budget(v1, running, 0)
            assert r2 == H200_RESERVE and r1 == 0
            assert abs((t2 - o2 - r2) - (t1 - o1 - r1)) < FEED_STEP_BYTES


def test_recorded_h200_vram_taken_by_others_reads_the_same_free_memory_with_the_reserve(fake_nvml: FakeNvml) -> None:  # noqa: F811
    _, dog = replay(fake_nvml, "nvml_others_llama.json", reserved=H200_RESERVE)
    events = [e for e in dog.events() if e.kind is EventKind.VRAM_FROM_OTHERS]
    assert len(events) == 1
    figures = events[0].evidence[0].figures
    assert figures["reserved_mib"] == H200_RESERVE / MIB
    assert figures["free_mib"] < 0.05 * figures["total_mib"]  # the driver's reserve is not free
    _, dog_v1 = replay(fake_nvml, "nvml_others_llama.json", reserved=None)
    v1_figures = [e for e in dog_v1.events() if e.kind is EventKind.VRAM_FROM_OTHERS][0].evidence[0].figures
    assert figures["free_mib"] == pytest.approx(v1_figures["free_mib"])
    assert figures["others_rise_mib"] == pytest.approx(v1_figures["others_rise_mib"])  # the reserve never moves
    assert "reserved_mib" not in v1_figures.keys() or math.isnan(v1_figures["reserved_mib"])


# --- the arithmetic, over any card ----------------------------------------------------------------------------
MIB_F = st.integers(min_value=0, max_value=200_000)


def _views(total: int, reserve: int, server: int, others: int) -> tuple[GpuSample, GpuSample]:
    """One card state as memory info v2 reports it and as v1 does (MiB)."""
    v2 = GpuSample(0.0, float(server + others), float(total), float(server), 0.0, 0.0, 0.0,
                   memory_reserved_mib=float(reserve))
    v1 = GpuSample(0.0, float(server + others + reserve), float(total), float(server), 0.0, 0.0, 0.0)
    return v2, v1


@given(reserve=st.integers(0, 4_096), server=MIB_F, others=MIB_F, free=MIB_F)
def test_the_reserve_is_left_out_exactly_once(reserve: int, server: int, others: int, free: int) -> None:
    total = reserve + server + others + free
    v2, v1 = _views(total, reserve, server, others)
    for sample in (v2, v1):
        assert sample.memory_free_mib == free
        # a running server's own memory comes back to the load being priced; nothing else does
        gpu = GpuMemory(int(total * MIB), others_bytes(sample.memory_used_mib, sample.server_memory_mib, True, 0),
                        reserved_bytes=int(sample.reserved_known_mib * MIB))
        assert gpu.free_bytes == (free + server) * MIB
        stopped = GpuMemory(int(total * MIB), others_bytes(sample.memory_used_mib, math.nan, False, 0),
                            reserved_bytes=int(sample.reserved_known_mib * MIB))
        assert stopped.free_bytes == free * MIB  # a stopped server holds nothing: what NVML says is free
    assert others_bytes(v2.memory_used_mib, v2.server_memory_mib, True, 0) == others * MIB  # the reserve is no one's
    assert others_bytes(v1.memory_used_mib, v1.server_memory_mib, True, 0) == (others + reserve) * MIB


@given(reserve=st.integers(1, 4_096), others=MIB_F, free=MIB_F)
def test_the_budget_never_prices_more_free_memory_than_there_is(reserve: int, others: int, free: int) -> None:
    total = reserve + others + free
    for sample in _views(total, reserve, 0, others):
        t, o, r = gpu_budget(sample, False, 0)
        assert free * MIB <= t - o - r < free * MIB + FEED_STEP_BYTES
