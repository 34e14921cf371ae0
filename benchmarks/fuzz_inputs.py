"""A long fuzz run over every state file the app reads and every command-line value of the three
headless commands, through the same properties the test suite checks with few examples.

Each target's property runs under hypothesis with --examples cases (hypothesis may stop earlier
when it has tried everything its strategy can make). A failure is the property raising: hypothesis
then shrinks it and the smallest failing input is printed. Reported per target: cases tried,
failures, seconds, and how often each outcome came up (for the commands: their exit codes). Exit status 1 when any target failed.

    QT_QPA_PLATFORM=offscreen python benchmarks/fuzz_inputs.py                 # 2000 cases each
    QT_QPA_PLATFORM=offscreen python benchmarks/fuzz_inputs.py --examples 200 --only settings presets
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@dataclass
class Target:
    """One property over one kind of input."""

    name: str
    what: str
    strategy: Callable[[], st.SearchStrategy[Any]]  # built lazily: some read a real file first
    check: Callable[[Any], object]


def _in_scratch(check: Callable[[Path, Any], object]) -> Callable[[Any], object]:
    def run(value: Any) -> object:
        with tempfile.TemporaryDirectory(prefix="deck-fuzz-") as scratch:
            return check(Path(scratch), value)
    return run


def targets(arena: Path, closed_url: str) -> list[Target]:
    """Every input the app reads from disk or the command line, with its property (the commands'
    file arguments are made under arena; closed_url refuses connections)."""
    from tests.adapters.storage import state_file_properties as json_files
    from tests.adapters.storage import test_history_fuzz as histories
    from tests.adapters.process import runtime_record_properties as records
    from app.cli import SUBCOMMANDS
    from tests.cli import cli_property as cli

    found = [
        Target("settings", "settings.json: bytes, JSON, valid files with one hostile part",
               lambda: json_files.file_bytes(json_files.settings_documents),
               _in_scratch(json_files.check_settings_bytes)),
        Target("presets", "presets.json, likewise", lambda: json_files.file_bytes(json_files.presets_documents),
               _in_scratch(json_files.check_presets_bytes)),
        Target("window", "window.json, likewise", lambda: json_files.file_bytes(json_files.window_documents),
               _in_scratch(json_files.check_window_bytes)),
        Target("history", "benchmarks.sqlite3: bytes, truncated and bit-flipped real files",
               lambda: histories.damaged(histories.real_history()), _in_scratch(histories.check_history_bytes)),
        Target("apply-checks", "apply-checks.sqlite3, likewise",
               lambda: histories.damaged(histories.real_apply_log()), _in_scratch(histories.check_apply_bytes)),
        Target("server-records", "the runtime records of started servers: bytes and hostile JSON",
               lambda: records.record_bytes(), _in_scratch(records.check_record_bytes)),
    ]
    paths = cli.playground(arena / "files")
    for command in sorted(SUBCOMMANDS):
        found.append(Target(f"cli-{command}", f"`ollama-deck {command}`: every option of its parser, hostile values",
                            lambda command=command: cli.argv_for(command, paths, closed_url), cli.check_cli_argv))
    return found


def fuzz(target: Target, examples: int) -> tuple[int, int, str, float, collections.Counter[str]]:
    """Run one target; (cases tried, failures, the smallest failing input and error, seconds, and how
    often each outcome the property returned came up, e.g. the commands' exit codes)."""
    tried = 0
    outcomes: collections.Counter[str] = collections.Counter()

    def counted(value: Any) -> None:
        nonlocal tried
        tried += 1
        outcome = target.check(value)
        if outcome is not None:
            outcomes[str(outcome)] += 1

    test = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck))(given(value=target.strategy())(counted))
    started = time.monotonic()
    try:
        test()
    except Exception:  # noqa: BLE001 - a falsified property: hypothesis re-raises the shrunk failure
        return tried, 1, traceback.format_exc(limit=6), time.monotonic() - started, outcomes
    return tried, 0, "", time.monotonic() - started, outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000, help="cases per target (default 2000)")
    parser.add_argument("--only", nargs="*", help="target names to run (default: all)")
    args = parser.parse_args()
    # The stores log what they set aside; thousands of cases would drown the table. A handler that
    # drops them keeps the records flowing to the properties' own handlers (they check the words).
    logging.getLogger().addHandler(logging.NullHandler())
    from tests.cli.cli_property import isolated

    with tempfile.TemporaryDirectory(prefix="deck-fuzz-") as scratch:
        # The commands run with their config and data folders in scratch and no `ollama` on PATH.
        with isolated(Path(scratch) / "home") as closed_url:
            chosen = [t for t in targets(Path(scratch), closed_url) if not args.only or t.name in args.only]
            failed = run_all(chosen, args.examples)
    return 1 if failed else 0


def run_all(chosen: list[Target], examples: int) -> int:
    """Fuzz each target, printing a line per target; the number that failed."""
    print(f"{'target':<16} {'cases':>7} {'failures':>8} {'seconds':>8}  input")
    failed = 0
    total = 0
    for target in chosen:
        tried, failures, detail, seconds, outcomes = fuzz(target, examples)
        total += tried
        failed += failures
        seen = "; outcomes " + ", ".join(f"{k}: {n}" for k, n in sorted(outcomes.items())) if outcomes else ""
        print(f"{target.name:<16} {tried:>7} {failures:>8} {seconds:>8.1f}  {target.what}{seen}", flush=True)
        if detail:
            print("    " + detail.replace("\n", "\n    "))
    print(f"{'all':<16} {total:>7} {failed:>8}")
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
