"""HostProbe against real child processes standing in for the server and its runner."""

from __future__ import annotations

import math
import queue
import subprocess
import sys
import threading

import psutil
import pytest

from app.adapters.telemetry.host import HostProbe
from app.core.units import MIB

pytestmark = pytest.mark.slow

# A stand-in server process: reports ready, then obeys one command per line on stdin.
CHILD = r"""
import subprocess, sys, time
print("ready", flush=True)
kids = []
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "burn":  # use this much CPU time, then report
        start = time.process_time()
        while time.process_time() - start < float(cmd[1]):
            pass
        print("burned", flush=True)
    elif cmd[0] == "spawn":  # start a runner child and report its pid once it is up
        kid = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[1]],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        kid.stdout.readline()
        kids.append(kid)
        print("child", kid.pid, flush=True)
    elif cmd[0] == "exit":
        break
for kid in kids:
    kid.stdin.close()
    kid.wait()
"""


class Child:
    """A running stand-in with a line queue, so every wait has a timeout."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.expect() == "ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def expect(self, timeout: float = 20.0) -> str:
        return self.lines.get(timeout=timeout)

    def send(self, line: str) -> str:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.expect()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("exit\n")
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def child():
    c = Child()
    yield c
    c.close()


def test_without_server_only_ram_is_read():
    s = HostProbe().sample(3.0, [])
    vm = psutil.virtual_memory()
    assert s.t == 3.0
    assert s.ram_total_mib == pytest.approx(vm.total / MIB)
    assert 0 < s.ram_used_mib < s.ram_total_mib
    assert math.isnan(s.server_cpu_pct) and math.isnan(s.server_rss_mib)


def test_first_reading_primes_cpu_then_measures_it(child: Child):
    probe = HostProbe()
    first = probe.sample(0.0, [child.pid])
    assert math.isnan(first.server_cpu_pct)  # psutil's first cpu_percent() is no measurement
    assert first.server_rss_mib == pytest.approx(psutil.Process(child.pid).memory_info().rss / MIB, rel=0.2)
    assert child.send("burn 0.2") == "burned"
    second = probe.sample(1.0, [child.pid])
    assert second.server_cpu_pct > 0.0


def test_whole_tree_is_counted(child: Child):
    reply = child.send("spawn")
    assert reply.startswith("child ")
    grandchild = int(reply.split()[1])
    probe = HostProbe(tree_refresh_s=0.0)
    assert probe.tree_pids([child.pid]) == tuple(sorted((child.pid, grandchild)))
    s = probe.sample(0.0, [child.pid])
    both = sum(psutil.Process(p).memory_info().rss for p in (child.pid, grandchild)) / MIB
    assert s.server_rss_mib == pytest.approx(both, rel=0.2)


def test_tree_is_cached_between_refreshes(child: Child):
    now = [0.0]
    probe = HostProbe(tree_refresh_s=2.0, clock=lambda: now[0])
    assert probe.tree_pids([child.pid]) == (child.pid,)
    grandchild = int(child.send("spawn").split()[1])
    now[0] = 1.0
    assert probe.tree_pids([child.pid]) == (child.pid,)  # not re-read yet
    now[0] = 2.5
    assert grandchild in probe.tree_pids([child.pid])
    assert probe.tree_pids([]) == ()  # new roots are read at once


def test_vanished_server_reads_nan_without_error(child: Child):
    probe = HostProbe(tree_refresh_s=0.0)
    probe.sample(0.0, [child.pid])
    child.close()
    s = probe.sample(1.0, [child.pid])
    assert math.isnan(s.server_cpu_pct) and math.isnan(s.server_rss_mib)
    assert s.ram_total_mib > 0


def test_process_leaving_between_tree_read_and_sample(child: Child):
    now = [0.0]
    probe = HostProbe(tree_refresh_s=60.0, clock=lambda: now[0])
    grandchild = Child()
    pids = [child.pid, grandchild.pid]
    probe.sample(0.0, pids)
    grandchild.close()  # gone, but the cached tree still lists it
    s = probe.sample(1.0, pids)
    assert s.server_rss_mib == pytest.approx(psutil.Process(child.pid).memory_info().rss / MIB, rel=0.2)
    assert s.server_cpu_pct >= 0.0
