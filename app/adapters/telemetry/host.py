"""Host readings through psutil: RAM, and the CPU and resident memory of the server's tree."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence

import psutil

from app.core.memory.host import HostMemory, host_memory_from
from app.core.telemetry import HostSample
from app.core.units import MIB

log = logging.getLogger(__name__)

NAN = math.nan

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


class HostProbe:
    """Samples host RAM and the server process tree. Meant for one sampling thread.

    The tree under the given root pids is re-read at most every `tree_refresh_s` seconds (or
    when the roots change), because walking every process on the machine costs far more than
    reading a few known ones; a runner child started in between joins at the next refresh.
    """

    def __init__(self, tree_refresh_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.tree_refresh_s = tree_refresh_s
        self._clock = clock
        self._roots: tuple[int, ...] = ()
        self._tree: tuple[int, ...] = ()
        self._tree_read_at = -math.inf
        self.tree_walks = 0  # full process-table scans so far (each costs ~1 ms with 100 processes)
        # One psutil.Process per pid, kept between samples: cpu_percent() measures since the
        # previous call on the same object, so a fresh object would always read 0.0.
        self._procs: dict[int, psutil.Process] = {}
        self._primed: set[int] = set()

    def tree_pids(self, server_pids: Sequence[int]) -> tuple[int, ...]:
        """The live roots and all their descendants, sorted (cached for tree_refresh_s seconds)."""
        roots = tuple(sorted(set(server_pids)))
        now = self._clock()
        if roots == self._roots and now - self._tree_read_at < self.tree_refresh_s:
            return self._tree
        found: set[int] = set()
        self.tree_walks += 1
        for pid in roots:
            try:
                root = psutil.Process(pid)
                kids = root.children(recursive=True)
            except _GONE:
                continue
            found.add(pid)
            found.update(k.pid for k in kids)
        self._roots, self._tree, self._tree_read_at = roots, tuple(sorted(found)), now
        return self._tree

    def sample(self, t: float, server_pids: Sequence[int]) -> HostSample:
        """RAM used/total (MiB), and the tree's CPU (% of one core, summed) and RSS (MiB)."""
        vm = psutil.virtual_memory()
        # "used" as total - available: what other programs can no longer get, cache excluded.
        ram_total = vm.total / MIB
        ram_used = (vm.total - vm.available) / MIB
        cpu, rss = self._tree_usage(self.tree_pids(server_pids))
        return HostSample(t=t, ram_used_mib=ram_used, ram_total_mib=ram_total, server_cpu_pct=cpu, server_rss_mib=rss)

    def _tree_usage(self, pids: Sequence[int]) -> tuple[float, float]:
        """(CPU % of one core, RSS MiB) summed over pids; NaN where nothing could be measured."""
        self._forget_all_but(pids)
        cpu_total = 0.0
        cpu_measured = False
        rss_total = 0.0
        rss_measured = False
        for pid in pids:
            proc = self._process(pid)
            if proc is None:
                continue
            try:
                with proc.oneshot():
                    pct = proc.cpu_percent(interval=None)
                    rss = proc.memory_info().rss
            except _GONE:
                self._forget(pid)
                continue
            rss_total += rss / MIB
            rss_measured = True
            if pid in self._primed:
                cpu_total += pct
                cpu_measured = True
            else:
                # The first call only starts psutil's measurement: its 0.0 means "unknown".
                self._primed.add(pid)
        return (cpu_total if cpu_measured else NAN), (rss_total if rss_measured else NAN)

    def _process(self, pid: int) -> psutil.Process | None:
        """The cached process object, replaced when the pid now names another process."""
        proc = self._procs.get(pid)
        if proc is not None and proc.is_running():
            return proc
        self._forget(pid)
        try:
            proc = psutil.Process(pid)
        except _GONE:
            return None
        self._procs[pid] = proc
        return proc

    def _forget(self, pid: int) -> None:
        self._procs.pop(pid, None)
        self._primed.discard(pid)

    def _forget_all_but(self, pids: Sequence[int]) -> None:
        keep = set(pids)
        for pid in [p for p in self._procs if p not in keep]:
            self._forget(pid)


def host_memory_reader(server_pids: Callable[[], Sequence[int]]) -> Callable[[], HostMemory | None]:
    """The RAM a sweep point's load can have, read when it is priced (blocks on psutil: call it in a
    worker thread). What the running server holds counts as free, since a restart gives it back."""
    probe = HostProbe()

    def read() -> HostMemory | None:
        sample = probe.sample(time.monotonic(), list(server_pids()))
        return host_memory_from(sample.ram_total_mib, sample.ram_used_mib, sample.server_rss_mib)

    return read
