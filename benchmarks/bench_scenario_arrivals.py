"""Requested against delivered arrival rates of a scenario on the embedded engine.

Runs `ollama-deck bench --demo --scenario NAME` (the bundled llama-server on the bundled model, started
and stopped by the command) into a history file of its own, reads the run's request records back and
prints, per class: the rate the scenario asks for, the rate requests were due at (the seeded schedule),
the rate they went out at, and the rate replies completed at, with how long requests waited on the client
(sent minus due). A conversation class's later turns go out when the previous reply arrived, so its
delivered turn rate falls below the requested one when replies are slower than the spacing: that is the
point of the comparison. The tests count requests and check order only; rates are measured here.

    python benchmarks/bench_scenario_arrivals.py [--scenario mixed] [--scale-lengths 0.02] [--requests 24]
                                                  [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.adapters.storage.history import BenchHistory  # noqa: E402
from app.core.bench.stats import RequestRecord  # noqa: E402


def rate(times: list[float]) -> float | None:
    """Events per second over the span of `times` (None below two events)."""
    if len(times) < 2 or max(times) == min(times):
        return None
    return (len(times) - 1) / (max(times) - min(times))


def figure(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def run_scenario(args: argparse.Namespace, folder: Path) -> list[RequestRecord]:
    history = folder / "history.sqlite3"
    command = [sys.executable, "-m", "app", "bench", "--demo", "--scenario", args.scenario, "--requests",
               str(args.requests), "--history", str(history), "--config-dir", str(folder / "cfg"), "--quiet"]
    if args.scale_lengths:
        command += ["--scale-lengths", str(args.scale_lengths)]
    print("$ " + " ".join(command[1:]), file=sys.stderr)
    done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                          timeout=args.timeout)
    print(done.stdout, file=sys.stderr)
    if done.returncode != 0:
        raise SystemExit(f"bench failed ({done.returncode}): {done.stderr[-2000:]}")
    store = BenchHistory(history)
    (summary,) = store.list_runs()
    run = store.load(summary.run_id)
    return [r for result in run.results for r in result.records if not r.warmup]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="mixed")
    parser.add_argument("--scale-lengths", type=float, default=0.02)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", help="write the figures as JSON")
    args = parser.parse_args()
    from app.core.bench.scenario import BUILTIN_SCENARIOS, parse_scenario

    scenario = (BUILTIN_SCENARIOS[args.scenario] if args.scenario in BUILTIN_SCENARIOS
                else parse_scenario(Path(args.scenario).read_text(encoding="utf-8"), args.scenario))
    with tempfile.TemporaryDirectory() as folder:
        records = run_scenario(args, Path(folder))
    rows: list[dict[str, Any]] = []
    print(f"{'class':<20} {'n':>3} {'asked/s':>8} {'due/s':>8} {'sent/s':>8} {'done/s':>8} {'client wait ms':>15}")
    for cls in scenario.classes:
        mine = [r for r in records if r.request_class == cls.name]
        waits = [1e3 * r.queue_s for r in mine]
        row = {"class": cls.name, "requests": len(mine),
               "requested_rps": cls.arrival.rate_rps if cls.arrival.open else None,
               "due_rps": rate([r.scheduled_s for r in mine]), "sent_rps": rate([r.sent_s for r in mine]),
               "done_rps": rate([r.end_s for r in mine if r.ok]),
               "conversation_start_rps": rate([r.scheduled_s for r in mine if r.turn == 1]),
               "client_wait_ms_median": statistics.median(waits) if waits else None}
        rows.append(row)
        print(f"{cls.name:<20} {len(mine):>3} {figure(row['requested_rps']):>8} {figure(row['due_rps']):>8} "
              f"{figure(row['sent_rps']):>8} {figure(row['done_rps']):>8} "
              f"{figure(row['client_wait_ms_median'], 1):>15}")
    if args.json:
        Path(args.json).write_text(json.dumps({"scenario": scenario.to_json(), "classes": rows}, indent=1) + "\n",
                                   encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
