"""Measures what else used the server's device over a window: CPU through psutil, GPU through the
GPU backend's per-process utilisation (NVML). The verdict is app.core.bench.contention.judge's.

CPU: the system-wide busy time (every core, the kernel and time stolen by a hypervisor included)
minus the server tree's and this process's own CPU time over the window is what others took. This
process is left out because the load generator runs in it (and, under test, the test runner): it is
part of the measurement, not a competitor. The biggest other processes are named from their own
counters. Both ends read the process table (a few milliseconds per hundred processes): call
begin() and end() in a worker thread.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil

from app.core.bench.contention import Competitor, Contention, CpuUse, GpuUse, judge, unmeasured
from app.core.telemetry import GpuBackend

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)
TOP_COMPETITORS = 3
# The idle columns of /proc/stat; guest time is already inside user time on Linux, so it is left out
# of the sum too rather than counted twice.
_NOT_BUSY = ("idle", "iowait", "guest", "guest_nice")


@dataclass(frozen=True)
class _Proc:
    name: str
    created: float
    cpu_s: float


def _busy_s() -> float:
    """Core-seconds every CPU spent not idle since boot."""
    times = psutil.cpu_times()
    busy: float = sum(getattr(times, f) for f in times._fields if f not in _NOT_BUSY)
    return busy


def _process_table() -> dict[int, _Proc]:
    """Every process's own user+system CPU seconds, by pid (one that vanishes midway is left out)."""
    table: dict[int, _Proc] = {}
    for proc in psutil.process_iter(["name", "create_time", "cpu_times"]):
        info = proc.info
        times = info.get("cpu_times")
        if times is None or info.get("create_time") is None:
            continue
        table[proc.pid] = _Proc(info.get("name") or "", float(info["create_time"]), times.user + times.system)
    return table


def _tree(roots: Sequence[int]) -> set[int]:
    """The live roots and all their descendants."""
    found: set[int] = set()
    for pid in roots:
        try:
            kids = psutil.Process(pid).children(recursive=True)
        except _GONE:
            continue
        found.add(pid)
        found.update(k.pid for k in kids)
    return found


class PsutilContentionProbe:
    """One window's contention: begin() at its start, end() at its end (see the module docstring)."""

    def __init__(self, gpu: GpuBackend | None = None, *, own_pid: int | None = None, cores: int | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._gpu = gpu
        self._own_pid = own_pid if own_pid is not None else os.getpid()
        self._cores = cores or psutil.cpu_count() or 1
        self._clock = clock
        self._wall = wall
        self._began: tuple[float, float, float, dict[int, _Proc], set[int]] | None = None
        self.cpu: CpuUse | None = None  # the last window's CPU figures, for a report or a benchmark

    def begin(self, server_pids: Sequence[int]) -> None:
        """Read the counters at the window's start."""
        table = _process_table()
        self._began = (self._clock(), self._wall(), _busy_s(), table, _tree(server_pids))

    def end(self, server_pids: Sequence[int], on_gpu: bool = False) -> Contention:
        """Read the counters at the window's end and judge it for the server's device (the GPU when on_gpu)."""
        if self._began is None:
            return unmeasured("the window was not begun")
        if not server_pids:
            return unmeasured("the server's processes are not known (a server ollama-deck did not start)")
        started, wall_started, busy0, table0, tree0 = self._began
        table = _process_table()
        busy1 = _busy_s()
        window_s = self._clock() - started
        if window_s <= 0:
            return unmeasured("the window was empty")
        server = _tree(server_pids) | tree0
        used = {pid: self._used(pid, proc, table0) for pid, proc in table.items()}
        server_s = sum(used[pid] for pid in server if pid in used)
        own_s = used.get(self._own_pid, 0.0)
        capacity = window_s * self._cores
        others = sorted(((s, pid) for pid, s in used.items() if pid not in server and pid != self._own_pid and s > 0),
                        reverse=True)[:TOP_COMPETITORS]
        cpu = CpuUse(window_s, self._cores, busy1 - busy0, server_s, own_s,
                     tuple(Competitor(table[pid].name, pid, s / capacity) for s, pid in others))
        self.cpu = cpu
        return judge(cpu, self._gpu_use(wall_started, server), on_gpu)

    @staticmethod
    def _used(pid: int, proc: _Proc, before: dict[int, _Proc]) -> float:
        """CPU seconds a process used since the window began (all of them if it started since)."""
        old = before.get(pid)
        if old is not None and abs(old.created - proc.created) < 0.01:
            return max(0.0, proc.cpu_s - old.cpu_s)
        return proc.cpu_s

    def _gpu_use(self, since_s: float, server: set[int]) -> GpuUse | None:
        """Other processes' SM utilisation over the window, where the driver attributes it."""
        gpu = self._gpu
        if gpu is None or not gpu.available:
            return None
        try:
            uses = gpu.process_use(since_s)
        except Exception:  # noqa: BLE001 - a failed reading is a gap, never a failed benchmark
            return None
        if uses is None:
            return None
        server_seen = any(u.pid in server for u in uses)
        others = [u for u in uses if u.pid not in server and u.pid != self._own_pid
                  and math.isfinite(u.sm_util_pct) and u.sm_util_pct > 0]
        others.sort(key=lambda u: u.sm_util_pct, reverse=True)
        return GpuUse(server_seen, sum(u.sm_util_pct for u in others),
                      tuple(Competitor(_name(u.pid), u.pid, u.sm_util_pct / 100.0) for u in others[:TOP_COMPETITORS]))


def _name(pid: int) -> str:
    try:
        return str(psutil.Process(pid).name())
    except _GONE:
        return ""


def contention_probes(gpu: GpuBackend | None) -> Callable[[], PsutilContentionProbe]:
    """A factory of probes reading this machine (and `gpu`, where it attributes use to processes)."""
    return lambda: PsutilContentionProbe(gpu)


__all__ = ["PsutilContentionProbe", "TOP_COMPETITORS", "contention_probes"]
