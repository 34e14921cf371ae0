"""What the contention probe (app.adapters.telemetry.contention) reads over windows of a few seconds,
quiet and contended, to place its thresholds (app.core.bench.contention) between the two.

A stand-in server spins one process per core (as llama-server's threads spin on every core while it
decodes) and this process spins too (the load generator, or a test runner, lives in it); then 0, 1 or
one-per-core competing processes burn CPU beside them. Per scenario it prints the others' share of the
machine, the idle share and the server's share (min / median / max over the windows), the verdict, and
what one window's readings cost.

    PYTHONPATH=$PWD python benchmarks/bench_contention.py [--windows 5] [--seconds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from app.adapters.telemetry.contention import PsutilContentionProbe  # noqa: E402

BURN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
SERVER = ("import subprocess, sys\nkids = [subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2]])"
          " for _ in range(int(sys.argv[3]))]\nfor kid in kids:\n    kid.wait()\n")


def burners(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BURN, str(seconds)]) for _ in range(n)]


def window(seconds: float, server_pid: int) -> tuple[PsutilContentionProbe, object, float]:
    """One window with this process spinning; returns the probe, its verdict and the readings' cost (ms)."""
    probe = PsutilContentionProbe()
    cost = time.perf_counter()
    probe.begin([server_pid])
    cost = time.perf_counter() - cost
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    started = time.perf_counter()
    verdict = probe.end([server_pid])
    return probe, verdict, (cost + time.perf_counter() - started) * 1e3


def spread(values: list[float]) -> str:
    return f"{min(values):5.1f} / {statistics.median(values):5.1f} / {max(values):5.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    args = parser.parse_args()
    cores = psutil.cpu_count() or 1
    span = args.windows * (args.seconds + 1) + 5
    print(f"{cores} cores, {args.windows} windows of {args.seconds:g} s per scenario, pid {os.getpid()} spinning")
    print(f"{'server':>6} {'competitors':>12}  {'others % min/med/max':>22}  {'idle %':>22}  {'server %':>22}  verdicts  readings ms (wall)")
    few = min(4, cores)
    for threads, competitors in ((few, 0), (cores, 0), (few, 1), (cores, 1), (cores, cores)):
        server = subprocess.Popen([sys.executable, "-c", SERVER, BURN, str(span), str(threads)])
        others = burners(competitors, span)
        try:
            while len(psutil.Process(server.pid).children()) < threads:
                pass
            rows = [window(args.seconds, server.pid) for _ in range(args.windows)]
        finally:
            for proc in others + [server]:
                for kid in psutil.Process(proc.pid).children() if proc.poll() is None else []:
                    kid.kill()
                proc.kill()
                proc.wait()
        uses = [probe.cpu for probe, _, _ in rows if probe.cpu is not None]
        kinds = ",".join(sorted({verdict.kind.value for _, verdict, _ in rows}))  # type: ignore[attr-defined]
        print(f"{threads:>6} {competitors:>12}  {spread([u.others_share * 100 for u in uses]):>22}  "
              f"{spread([u.idle_share * 100 for u in uses]):>22}  {spread([u.server_share * 100 for u in uses]):>22}  "
              f"{kinds:8}  {statistics.median(c for _, _, c in rows):6.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
