"""PsutilContentionProbe on this machine's real process table: real child processes burn CPU while a
window is open, as a competitor, as a server's process tree, and as the measuring process itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import psutil
import pytest

from app.adapters.telemetry.contention import PsutilContentionProbe
from app.core.bench.contention import ContentionKind
from app.core.telemetry import GpuProcessUse
from tests.fakes.scripted_gpu import ScriptedGpuBackend

BOUND_S = 60.0  # every child ends by itself after this, whatever happens to the test
BURN = ("import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n")
# A stand-in server: its root waits on stdin while a child of it burns a core.
SERVER = ("import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])\n"
          "sys.stdin.read()\nchild.kill()\n")


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", *args], stdin=subprocess.PIPE)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        for child in psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []:
            child.kill()
        proc.kill()
        proc.wait(10)


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def burn_until(condition: Callable[[], bool]) -> None:
    """Spin in this process until condition holds: the test runner's own CPU use, on purpose."""
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, "the children never got the CPU"


def test_competitors_are_measured_and_named_but_the_server_tree_and_this_process_are_not(spawn):
    server = spawn(SERVER, BURN, str(BOUND_S))
    burn_until(lambda: len(psutil.Process(server.pid).children()) == 1)
    server_child = psutil.Process(server.pid).children()[0].pid
    # One competitor per core, so the machine has no core to spare whatever its size.
    competitors = [spawn(BURN, str(BOUND_S)) for _ in range(min(psutil.cpu_count() or 1, 32))]
    probe = PsutilContentionProbe()
    probe.begin([server.pid])
    start = {p.pid: cpu_s(p.pid) for p in competitors}
    own = cpu_s(os.getpid())
    burn_until(lambda: all(cpu_s(p.pid) - start[p.pid] >= 0.3 for p in competitors)
               and cpu_s(os.getpid()) - own >= 0.3)
    burnt = sum(cpu_s(p.pid) - start[p.pid] for p in competitors)  # what they used inside the window, at least
    verdict = probe.end([server.pid])
    cpu = probe.cpu
    assert cpu is not None
    named = {c.pid for c in cpu.competitors}
    assert not named & {server.pid, server_child, os.getpid()}, cpu.competitors
    # Everything the competitors burnt is in the others' share (to the counters' 10 ms ticks), though
    # other programs on a shared machine may add to it and be named before them.
    assert cpu.others_share * cpu.capacity_s >= burnt - 0.05 * len(competitors), (cpu, burnt)
    assert verdict.kind is ContentionKind.CPU, verdict
    assert verdict.top_pid in named and verdict.top_name
    assert cpu.own_s >= 0.3 and cpu.server_s > 0  # both measured, neither counted as others
    assert verdict.cpu_idle_pct is not None and verdict.cpu_idle_pct < 25


def test_this_processes_own_use_is_not_competition(spawn):
    server = spawn("import sys\nsys.stdin.read()\n")  # an idle server
    probe = PsutilContentionProbe()
    probe.begin([server.pid])
    own = cpu_s(os.getpid())
    burn_until(lambda: cpu_s(os.getpid()) - own >= 0.5)
    probe.end([server.pid])
    cpu = probe.cpu
    assert cpu is not None and cpu.own_s >= 0.5
    assert os.getpid() not in {c.pid for c in cpu.competitors} and server.pid not in {c.pid for c in cpu.competitors}
    # What the runner itself burnt is not in the others' share (others = busy - server - own).
    assert cpu.others_share * cpu.capacity_s <= cpu.busy_s - cpu.own_s + 1e-9


def test_without_the_servers_processes_nothing_is_judged(spawn):
    probe = PsutilContentionProbe()
    probe.begin([])
    verdict = probe.end([])
    assert verdict.kind is ContentionKind.UNMEASURED and "not known" in verdict.why_unmeasured


def test_other_processes_computing_on_the_gpu_are_gpu_contention(spawn):
    server, game = spawn("import sys\nsys.stdin.read()\n"), spawn("import sys\nsys.stdin.read()\n")
    windows: list[float] = []

    def nvml(since_s: float) -> list[GpuProcessUse]:
        windows.append(since_s)
        return [GpuProcessUse(server.pid, 55.0, 9_000.0), GpuProcessUse(game.pid, 35.0, 2_000.0),
                GpuProcessUse(os.getpid(), 5.0, 300.0)]

    probe = PsutilContentionProbe(ScriptedGpuBackend(processes=nvml), wall=lambda: 1234.5)
    probe.begin([server.pid])
    verdict = probe.end([server.pid], on_gpu=True)
    assert windows == [1234.5]  # asked for the window's own samples
    assert verdict.kind is ContentionKind.GPU and verdict.gpu_others_pct == 35.0
    assert verdict.top_pid == game.pid and verdict.top_pct == 35.0
