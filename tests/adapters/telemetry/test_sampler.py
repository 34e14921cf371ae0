"""Sampler, TickSchedule and TelemetryBuffers with the scripted 4090 and the real host probe."""

from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest

from app.adapters.telemetry.host import HostProbe
from app.core.telemetry_buffers import Channel, TelemetryBuffers
from app.adapters.telemetry.sampler import Sampler, TickSchedule, clamp_interval
from app.core.throughput import TokenMeter
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_sampler(gpu, clock=None, **kw) -> Sampler:
    return Sampler(
        gpu,
        HostProbe(),
        server_pids=kw.pop("server_pids", lambda: []),
        token_meter=kw.pop("token_meter", TokenMeter()),
        clock=clock or FakeClock(),
        **kw,
    )


# --- schedule ------------------------------------------------------------------------------
def test_schedule_stays_on_grid_when_ticks_take_time():
    sched = TickSchedule(0.5, start=10.0)
    starts = [10.0]
    for cost in (0.01, 0.2, 0.07, 0.3):
        now = starts[-1] + cost
        starts.append(now + sched.wait_after_tick(now))
    assert starts == pytest.approx([10.0, 10.5, 11.0, 11.5, 12.0])
    assert sched.skipped == 0


def test_schedule_skips_missed_ticks_instead_of_bunching():
    sched = TickSchedule(0.25, start=0.0)
    wait = sched.wait_after_tick(0.9)  # deadlines 0.25, 0.5 and 0.75 passed during this tick
    assert wait == pytest.approx(0.1)
    assert sched.deadline == pytest.approx(1.0)
    assert sched.skipped == 3


def test_schedule_runs_at_once_when_exactly_on_the_deadline():
    sched = TickSchedule(0.5, start=0.0)
    assert sched.wait_after_tick(0.5) == 0.0
    assert sched.skipped == 0


def test_no_drift_over_many_ticks():
    sched = TickSchedule(0.25, start=0.0)
    now = 0.0
    for _ in range(4000):
        now += 0.003  # each tick costs 3 ms
        now += sched.wait_after_tick(now)
    assert now == pytest.approx(1000.0, abs=1e-6)


@pytest.mark.parametrize(("asked", "used"), [(0.1, 0.25), (0.25, 0.25), (0.5, 0.5), (2.0, 1.0)])
def test_interval_is_clamped(asked, used):
    assert clamp_interval(asked) == used
    assert make_sampler(ScriptedGpuBackend(), interval_s=asked).interval_s == used


# --- buffers -------------------------------------------------------------------------------
def test_buffers_are_sized_for_the_history():
    buffers = TelemetryBuffers(history_s=900, interval_s=0.25)
    assert buffers.capacity == 3601
    assert len(Channel.NAMES) == Channel.COUNT == 13
    assert Channel.NAMES[Channel.TOKENS_PER_S] == "tokens_per_s"


# --- ticks with a fake clock ---------------------------------------------------------------
def test_tick_records_every_channel():
    clock = FakeClock(50.0)
    meter = TokenMeter()
    meter.begin()
    meter.begin()
    meter.add(130, 49.5)
    gpu = ScriptedGpuBackend(script=[GpuReading(15_000.0, 97.0, 351.0, 66.0, 14_350.0, memory_reserved_mib=412.0)])
    seen = []
    sampler = make_sampler(gpu, clock, token_meter=meter, server_pids=lambda: [os.getpid()], on_sample=seen.append)
    sample = sampler.tick()
    assert seen == [sample] and sampler.latest is sample and sampler.ticks == 1
    assert sample.t == 50.0 and sample.tokens_per_s == pytest.approx(65.0)
    assert os.getpid() in gpu.calls[0][1]  # the GPU sees the expanded tree
    t, row = sampler.buffers.last()
    assert t == 50.0
    assert row[Channel.GPU_MEM_USED_MIB] == 15_000.0
    assert row[Channel.GPU_MEM_TOTAL_MIB] == 24564.0
    assert row[Channel.GPU_MEM_SERVER_MIB] == 14_350.0
    assert row[Channel.GPU_MEM_RESERVED_MIB] == 412.0
    assert (row[Channel.GPU_UTIL_PCT], row[Channel.GPU_POWER_W], row[Channel.GPU_TEMP_C]) == (97.0, 351.0, 66.0)
    assert row[Channel.RAM_TOTAL_MIB] > row[Channel.RAM_USED_MIB] > 0
    assert row[Channel.SERVER_RSS_MIB] > 0
    assert row[Channel.TOKENS_PER_S] == pytest.approx(65.0)
    assert row[Channel.IN_FLIGHT] == 2.0


def test_one_tree_walk_serves_gpu_and_host_until_refresh():
    clock = FakeClock(0.0)
    host = HostProbe(tree_refresh_s=2.0, clock=clock)
    gpu = ScriptedGpuBackend()
    sampler = Sampler(gpu, host, server_pids=lambda: [os.getpid()], token_meter=TokenMeter(), clock=clock)
    for i in range(8):  # 1.75 s of ticks at 4 Hz
        clock.t = i * 0.25
        sampler.tick()
    assert host.tree_walks == 1
    assert all(os.getpid() in pids for _, pids in gpu.calls)
    clock.t = 2.0
    sampler.tick()
    assert host.tree_walks == 2


def test_no_server_and_lost_gpu_are_nan_rows():
    clock = FakeClock(0.0)
    gpu = ScriptedGpuBackend()
    sampler = make_sampler(gpu, clock)
    sampler.tick()
    gpu.go_lost()
    clock.t = 0.5
    sample = sampler.tick()
    assert sample.gpu is None
    _, rows = sampler.buffers.view()
    assert not np.isnan(rows[0, Channel.GPU_MEM_USED_MIB])
    gpu_cols = [Channel.GPU_MEM_USED_MIB, Channel.GPU_MEM_SERVER_MIB, Channel.GPU_UTIL_PCT,
                Channel.GPU_POWER_W, Channel.GPU_TEMP_C]
    assert np.isnan(rows[1, gpu_cols]).all()
    assert np.isnan(rows[:, [Channel.SERVER_CPU_PCT, Channel.SERVER_RSS_MIB]]).all()  # no server
    assert not np.isnan(rows[1, Channel.RAM_USED_MIB])
    assert "GPU lost" in gpu.unavailable_reason


def test_history_keeps_only_the_window():
    clock = FakeClock(0.0)
    sampler = make_sampler(ScriptedGpuBackend(), clock, interval_s=1.0, history_s=10)
    for i in range(30):
        clock.t = float(i)
        sampler.tick()
    t, _ = sampler.buffers.view()
    assert len(t) == sampler.buffers.capacity == 11
    assert t[0] == 19.0 and t[-1] == 29.0


# --- the real thread -----------------------------------------------------------------------
class Counter:
    """on_sample callback that lets a test wait for the n-th sample."""

    def __init__(self) -> None:
        self.n = 0
        self.cond = threading.Condition()

    def __call__(self, sample) -> None:
        with self.cond:
            self.n += 1
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 10.0) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.n >= n, timeout)


def test_thread_samples_until_stopped():
    counter = Counter()
    sampler = Sampler(ScriptedGpuBackend(), HostProbe(), server_pids=lambda: [], token_meter=TokenMeter(),
                      interval_s=0.25, on_sample=counter)
    sampler.start()
    try:
        assert counter.wait_for(3)
        assert sampler.running
    finally:
        assert sampler.stop()
    n = sampler.ticks
    assert not sampler.running
    assert len(sampler.buffers) == n >= 3
    t, _ = sampler.buffers.view()
    assert np.all(np.diff(t) > 0)


def test_stop_returns_promptly_mid_wait():
    counter = Counter()
    sampler = Sampler(ScriptedGpuBackend(), HostProbe(), server_pids=lambda: [], token_meter=TokenMeter(),
                      interval_s=1.0, on_sample=counter)
    sampler.start()
    assert counter.wait_for(1)
    # The thread now waits ~1 s for its next deadline; an Event wakes it at once.
    assert sampler.stop(timeout=0.5)


def test_failing_ticks_are_counted_and_sampling_goes_on(caplog: pytest.LogCaptureFixture):
    calls = {"n": 0}

    def flaky(t, pids):
        calls["n"] += 1
        if calls["n"] in (2, 3):
            raise RuntimeError("driver hiccup")
        return GpuReading(700.0, 1.0, 25.0, 40.0)

    counter = Counter()
    sampler = Sampler(ScriptedGpuBackend(script=flaky), HostProbe(), server_pids=lambda: [],
                      token_meter=TokenMeter(), interval_s=0.25, on_sample=counter)
    sampler.start()
    try:
        assert counter.wait_for(3)
    finally:
        assert sampler.stop()
    assert sampler.tick_errors == 2
    assert str(sampler.last_error) == "driver hiccup"
    assert sum("Telemetry sample failed" in r.getMessage() for r in caplog.records) == 1


def test_restart_after_stop():
    counter = Counter()
    sampler = Sampler(ScriptedGpuBackend(), HostProbe(), server_pids=lambda: [], token_meter=TokenMeter(),
                      interval_s=0.25, on_sample=counter)
    sampler.start()
    assert counter.wait_for(1)
    assert sampler.stop()
    sampler.start()
    assert counter.wait_for(counter.n + 1)
    assert sampler.stop()
    assert math.isfinite(sampler.latest.t)
