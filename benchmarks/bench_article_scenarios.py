"""The second article's scenario table (A: customer questions, B: long-document summaries, C: multi-turn code
review), default settings against the recommended ones, measured on the embedded engine.

For each scenario it runs the real command a user runs —

    ollama-deck bench --demo --scenario NAME --scale-lengths F --parallel P --compare --rate-sweep ...

— (the bundled llama-server on SmolLM2-135M, started and restarted per point by ollama-deck), reads the run's
JSON and prints one Markdown table in the article's shape: per scenario the average and P95 end-to-end
latency on the server's default setting and on the recommended one with the change, and the requests a day
each sustains (the rate sweep at both settings). A side that could not be compared (failures, prompts cut,
measured while other programs used the CPU) says so instead of a change.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_article_scenarios.py \\
        [--runs customer-qa:0.1:12,long-document:0.03:6,code-review:0.1:9] [--parallel 1,2] [--out DIR] \\
        [-- extra bench arguments, e.g. --ttft-p95-ms 5000]

Each entry of --runs is NAME:SCALE:REQUESTS (SCALE multiplies the scenario's token lengths, so a CPU can run
the article's shapes; REQUESTS is the request count per point and per rate-sweep step). The commands, their
JSON and Markdown reports and the before/after PNGs are kept in --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_RUNS = "customer-qa:0.1:12,long-document:0.03:6,code-review:0.1:9"


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f} ms"


def _day(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _change(changes: list[dict[str, Any]], figure: str) -> str:
    found = next((c for c in changes if c.get("class") == "all requests" and c.get("figure") == figure), None)
    if found is None:
        return "—"
    pct = found.get("pct")
    if found.get("change") in ("better", "worse", "same") and pct is not None:
        return f"{pct:+.1f} % ({found['change']})"
    return str(found.get("change", "—")).replace("_", " ")


def table_row(name: str, data: dict[str, Any]) -> list[str]:
    """One scenario's row from its run's JSON."""
    comparison = data.get("comparison") or {}
    overall = comparison.get("overall") or {}
    default, recommended = overall.get("default") or {}, overall.get("recommended") or {}
    sides = comparison.get("default") or {}, comparison.get("recommended") or {}
    labels = [s.get("label", "—") for s in sides]
    changes = comparison.get("changes") or []
    outcome = str(comparison.get("outcome", ""))
    if outcome == "default_recommended":  # one setting: the default's figures stand on both sides
        recommended, labels[1] = default, "the default itself"
        sides = sides[0], sides[0]
    elif not comparison.get("recommended"):
        labels[1] = "nothing recommended"
    return [name, labels[0], labels[1],
            _ms(default.get("e2e_mean_ms")), _ms(recommended.get("e2e_mean_ms")), _change(changes, "e2e_mean_ms"),
            _ms(default.get("e2e_p95_ms")), _ms(recommended.get("e2e_p95_ms")), _change(changes, "e2e_p95_ms"),
            _day(sides[0].get("requests_per_day")), _day(sides[1].get("requests_per_day")),
            str(comparison.get("outcome", "—")).replace("_", " ")]


HEADER = ["Scenario", "Default", "Recommended", "Default avg", "Rec. avg", "Change", "Default P95", "Rec. P95", "Change",
          "Default req/day", "Rec. req/day", "Outcome"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=DEFAULT_RUNS, help=f"NAME:SCALE:REQUESTS,... (default {DEFAULT_RUNS})")
    parser.add_argument("--parallel", default="1,2", help="the swept parallel values (the default is added)")
    parser.add_argument("--refine", default="1", help="rate-sweep refinement steps")
    parser.add_argument("--out", help="folder for the reports (default: a new temporary one)")
    parser.add_argument("extra", nargs="*", help="more `bench` arguments, after --")
    args = parser.parse_args()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="article-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for entry in args.runs.split(","):
        name, scale, requests = entry.split(":")
        stem = out / name
        command = [sys.executable, "-m", "app", "bench", "--demo", "--scenario", name, "--scale-lengths", scale,
                   "--parallel", args.parallel, "--compare", "--rate-sweep", "--refine", args.refine,
                   "--requests", requests, "--no-history", "--quiet", "--json", f"{stem}.json",
                   "--markdown", f"{stem}.md", "--compare-report", f"{stem}.png", *args.extra]
        print("$ " + " ".join(command[1:]), file=sys.stderr, flush=True)
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True)
        (out / f"{name}.txt").write_text(done.stdout + done.stderr, encoding="utf-8")
        print(f"  exit {done.returncode} after {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        if done.returncode != 0 or not Path(f"{stem}.json").exists():
            rows.append([name] + ["failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]] + [""] * 10)
            continue
        rows.append(table_row(f"{name} (× {scale})", json.loads(Path(f"{stem}.json").read_text(encoding="utf-8"))))
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nReports: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
