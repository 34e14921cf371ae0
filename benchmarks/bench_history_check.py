"""How long the check a history gets when first opened takes: integrity_check against quick_check.

Builds a benchmark history of --runs sweeps (8 points of 200 requests each), doubles its rows
--doublings times, then times both pragmas a few times each (warm cache).

    python benchmarks/bench_history_check.py [--runs 400] [--doublings 4] [--path /tmp/big.sqlite3]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.adapters.storage.history import BenchHistory  # noqa: E402
from app.core.bench.run import SweepRun  # noqa: E402
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize  # noqa: E402
from app.core.bench.outcome import PointStatus
from app.core.bench.sweep import Fingerprint, PointResult, SweepAxes, SweepSpec  # noqa: E402
from app.core.bench.workload import LoadPlan  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402

TARGETS = LatencyTargets(1000, 100)
RUN_COLUMNS = ("started_at, finished_at, status, title, model, gpu_name, ollama_version, points_planned, "
               "best_tokens_per_s, recommended, owner_pid, owner_started, doc, backend_kind, server_version")


def a_run(points: int = 8, records: int = 200) -> SweepRun:
    """A finished sweep with `records` requests per point."""
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=tuple(range(1, points + 1))),
                     LoadPlan("qwen3:14b", requests=records), TARGETS)
    plan = spec.plan()
    results = []
    for p in plan.points:
        recs = tuple(RequestRecord(i, 0.0, 0.0, 1.0 + i * 0.01, first_token_s=0.1, output_tokens=20,
                                   output_chunks=20, itl_s=(0.05,) * 19) for i in range(records))
        results.append(PointResult(p, PointStatus.OK, stats=summarize(recs, TARGETS), records=recs))
    run = SweepRun(spec, Fingerprint(gpu_name="NVIDIA GeForce RTX 4090", server_version="0.12.6", model="qwen3:14b",
                                 backend_kind="ollama"),
                   plan.points, plan.varying, tuple(results), started_at="2026-08-01T12:00:00+02:00")
    return run.finished("finished", "2026-08-01T12:05:00+02:00")


def build(path: Path, runs: int, doublings: int) -> None:
    """Fill path with runs sweeps, then double every table doublings times."""
    history = BenchHistory(path)
    run = a_run()
    for _ in range(runs):
        history.save(run)
    conn = sqlite3.connect(path)
    for _ in range(doublings):
        top = conn.execute("SELECT MAX(id) FROM runs").fetchone()[0]
        conn.execute(f"INSERT INTO runs ({RUN_COLUMNS}) SELECT {RUN_COLUMNS} FROM runs")
        conn.execute("INSERT INTO points SELECT run_id + ?, idx, status, output_tokens_per_s, doc FROM points", (top,))
        conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def main() -> int:
    """Print the file size and each pragma's times in seconds."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--doublings", type=int, default=4)
    parser.add_argument("--path", type=Path, default=None)
    args = parser.parse_args()
    path = args.path or Path(tempfile.mkdtemp()) / "benchmarks.sqlite3"
    if not path.exists():
        build(path, args.runs, args.doublings)
    print(f"{path}: {path.stat().st_size / 2 ** 20:.1f} MiB")
    for pragma in ("quick_check", "integrity_check") * 3:
        conn = sqlite3.connect(path)
        start = time.perf_counter()
        conn.execute(f"PRAGMA {pragma}").fetchall()
        print(f"{pragma:16s} {time.perf_counter() - start:.3f} s")
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
