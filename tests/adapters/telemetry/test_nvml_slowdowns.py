"""The GPU's clock-event reasons and SM clock through NvmlBackend, and recorded NVIDIA H200 readings replayed
through a scripted pynvml into the real Watchdog.

The recordings (tests/data/gpu/, README.md there says how they were made) hold the raw answers of the NVML
calls the backend makes, sample by sample; the scripted pynvml (test_nvml.FakeNvml: pynvml's real structs,
process objects and error classes) hands them back in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pynvml
import pytest

from app.adapters.telemetry.nvml import NvmlBackend, slowdowns_of
from app.core.telemetry import GpuSample, GpuSlowdown
from app.core.watch.events import EventKind, Severity, Source, WatchEvent
from app.services.watchdog import Watchdog
from tests.adapters.telemetry.test_nvml import FakeNvml, fake_nvml, nvml_error, proc  # noqa: F401 - the fixture

DATA = Path(__file__).resolve().parents[2] / "data" / "gpu"


def recording(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def idle_reserve(name: str = "nvml_load.json") -> int:
    """The driver's reserve on the recorded H200, in bytes: memory info v1's "used" on the idle card before any
    process started (v1 counts the reserve as used; nvidia-smi's used, v2's, read 0 there). Recordings made
    since memory info v2 was recorded carry the reserve itself ("memory_v2")."""
    return int(recording(name)["samples"][0]["memory"]["used"])


def play(fake: FakeNvml, sample: dict[str, Any], reserved: int | None = None) -> None:
    """Set the scripted driver to one recorded reading; `reserved` (bytes) answers memory info v2 where the
    reading has no v2 answer of its own (None: a driver without v2)."""
    fake.total, fake.used = sample["memory"]["total"], sample["memory"]["used"]
    fake.reserved = sample["memory_v2"]["reserved"] if "reserved" in sample.get("memory_v2", {}) else reserved
    fake.util = sample["utilization"]["gpu"]
    fake.power_mw, fake.temp = sample["power_mw"], sample["temperature_c"]
    fake.reasons, fake.sm_clock = sample["clocks_event_reasons"], sample["sm_clock_mhz"]
    fake.compute = [proc(p["pid"], p["usedGpuMemory"]) for p in sample["compute_processes"]]
    fake.graphics = [proc(p["pid"], p["usedGpuMemory"]) for p in sample["graphics_processes"]]


def replay(fake: FakeNvml, name: str, server_pid: int | None = None,
           reserved: int | None = None) -> tuple[list[GpuSample], Watchdog]:
    """Every reading of a recording through the backend and into a watchdog on the recording's clock
    (`reserved`: the reserve memory info v2 answers with, None: v1 only)."""
    rec = recording(name)
    now = [rec["samples"][0]["wall"]]
    dog = Watchdog(subject="h200", clock=lambda: now[0])
    backend = NvmlBackend()
    samples = []
    for i, raw in enumerate(rec["samples"]):
        play(fake, raw, reserved)
        now[0] = raw["wall"]
        pid = server_pid if server_pid is not None else raw["roles"].get("server")
        sample = backend.sample(float(i), [pid] if pid else [])
        assert sample is not None
        samples.append(sample)
        dog.feed_gpu(sample)
    return samples, dog


@pytest.mark.parametrize(("mask", "expected"), [
    (0x0, set()),
    (0x1, set()),  # idle
    (0x2 | 0x10 | 0x100, set()),  # application clocks, sync boost, display clocks: as told
    (0x4, {GpuSlowdown.POWER_CAP}),
    (0x8, {GpuSlowdown.HW_SLOWDOWN}),
    (0x20, {GpuSlowdown.THERMAL}),
    (0x40, {GpuSlowdown.THERMAL}),
    (0x80, {GpuSlowdown.POWER_BRAKE}),
    (0x1 | 0x4 | 0x40 | 0x8, {GpuSlowdown.POWER_CAP, GpuSlowdown.THERMAL, GpuSlowdown.HW_SLOWDOWN}),
])
def test_clock_event_reasons_name_only_slowdowns(mask: int, expected: set[GpuSlowdown]) -> None:
    assert slowdowns_of(mask) == expected


def test_the_bits_are_nvmls_own() -> None:
    assert slowdowns_of(pynvml.nvmlClocksEventReasonSwPowerCap) == {GpuSlowdown.POWER_CAP}
    assert slowdowns_of(pynvml.nvmlClocksEventReasonHwThermalSlowdown) == {GpuSlowdown.THERMAL}
    assert slowdowns_of(pynvml.nvmlClocksThrottleReasonHwPowerBrakeSlowdown) == {GpuSlowdown.POWER_BRAKE}
    assert slowdowns_of(pynvml.nvmlClocksEventReasonGpuIdle | pynvml.nvmlClocksEventReasonSyncBoost) == set()


def test_sample_carries_reasons_and_sm_clock(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.reasons, fake_nvml.sm_clock = 0x4, 1440
    s = NvmlBackend().sample(1.0, [])
    assert s is not None and s.slowdowns == {GpuSlowdown.POWER_CAP} and s.sm_clock_mhz == 1440.0
    assert "nvmlDeviceGetCurrentClocksEventReasons" in fake_nvml.calls
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in fake_nvml.calls


def test_an_older_driver_answers_through_the_throttle_name(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.errors["nvmlDeviceGetCurrentClocksEventReasons"] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    fake_nvml.reasons = 0x20
    backend = NvmlBackend()
    assert backend.sample(1.0, []).slowdowns == {GpuSlowdown.THERMAL}
    assert backend.sample(2.0, []).slowdowns == {GpuSlowdown.THERMAL}
    assert fake_nvml.calls.count("nvmlDeviceGetCurrentClocksEventReasons") == 1  # not asked again
    assert fake_nvml.calls.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 2


def test_an_older_binding_without_the_event_name(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.delattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
    fake_nvml.reasons = 0x8
    assert NvmlBackend().sample(1.0, []).slowdowns == {GpuSlowdown.HW_SLOWDOWN}


def test_a_card_that_does_not_report_reasons_or_clocks(fake_nvml: FakeNvml) -> None:  # noqa: F811
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        fake_nvml.errors[name] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    fake_nvml.errors["nvmlDeviceGetClockInfo"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    backend = NvmlBackend()
    s = backend.sample(1.0, [])
    assert s is not None and s.slowdowns == frozenset() and s.sm_clock_mhz != s.sm_clock_mhz  # NaN
    assert backend.available and s.memory_used_mib == 620.0  # the rest still reads


def test_reasons_not_supported_leave_the_rest(fake_nvml: FakeNvml) -> None:  # noqa: F811
    fake_nvml.errors["nvmlDeviceGetCurrentClocksEventReasons"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    backend = NvmlBackend()
    assert backend.sample(1.0, []).slowdowns == frozenset()
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" not in fake_nvml.calls  # not a missing function


def test_recorded_h200_under_a_heavy_load_shows_the_power_cap(fake_nvml: FakeNvml) -> None:  # noqa: F811
    samples, dog = replay(fake_nvml, "nvml_load.json")
    capped = [s for s in samples if s.slowdowns]
    assert capped and all(s.slowdowns == {GpuSlowdown.POWER_CAP} for s in capped)
    assert max(s.sm_clock_mhz for s in capped) < 1980  # held under its 1980 MHz top clock at ~690 of 700 W
    assert sorted(s.power_w for s in capped)[len(capped) // 2] > 600  # the median reading: at its 700 W cap
    assert all(not s.slowdowns for s in samples[:10])  # idle (bit 0x1) is no slowdown
    events = [e for e in dog.events() if e.kind is EventKind.GPU_SLOWDOWN]
    assert len(events) == 1  # one lasting condition, not one per reading
    event = events[0]
    assert event.severity is Severity.WARNING  # a power cap under full load is the card at its limit
    assert event.evidence[0].source is Source.GPU and event.evidence[0].text == "clock-event reasons: power cap"
    assert 1400 <= event.evidence[0].figures["sm_clock_mhz"] < 1980
    print(event.line())


def test_recorded_h200_vram_taken_by_another_process(fake_nvml: FakeNvml) -> None:  # noqa: F811
    _, dog = replay(fake_nvml, "nvml_others_llama.json")
    events = [e for e in dog.events() if e.kind is EventKind.VRAM_FROM_OTHERS]
    assert len(events) == 1
    event: WatchEvent = events[0]
    figures = event.evidence[0].figures
    assert figures["others_rise_mib"] > 100_000 and figures["free_mib"] < 0.05 * figures["total_mib"]
    assert event.severity is Severity.WARNING  # about 3 % free: short, not under the 2 % severe line
    assert not [e for e in dog.events() if e.kind is EventKind.GPU_SLOWDOWN]  # the card never slowed
    print(event.line())


def test_recorded_h200_with_no_other_process_says_nothing(fake_nvml: FakeNvml) -> None:  # noqa: F811
    _, dog = replay(fake_nvml, "nvml_llama.json")
    assert dog.events() == ()
