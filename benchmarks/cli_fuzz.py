"""A long fuzz run of the headless commands' command lines: the suite's property, thousands of examples.

Every argv is generated from the commands' real parsers (tests/cli/cli_property.py) and run in this
process against a port that refuses connections; the run stops at the first argv that escapes with
an exception, a traceback, an exit code outside {0, 1, 2, 130} or an exit 2 without its one line.
Prints how many runs ended with each exit code.

    python benchmarks/cli_fuzz.py --examples 5000 [estimate prompt bench]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.cli.cli_property import argv_for, check_cli_argv, isolated, playground  # noqa: E402


def fuzz(command: str, paths: dict[str, str], closed: str, examples: int) -> collections.Counter[int]:
    """Run `examples` generated argv of `command`; how many ended with each exit code."""
    codes: collections.Counter[int] = collections.Counter()

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=argv_for(command, paths, closed))
    def check(argv: list[str]) -> None:
        codes[check_cli_argv(argv)] += 1

    check()
    return codes


def main() -> int:
    """Run the fuzz; 0 when every example held the property."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="examples per command (default 2000)")
    parser.add_argument("commands", nargs="*", default=["estimate", "prompt", "bench"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = playground(Path(tmp) / "files")
        with isolated(Path(tmp) / "home") as closed:
            for command in args.commands:
                started = time.monotonic()
                codes = fuzz(command, paths, closed, args.examples)
                took = time.monotonic() - started
                print(f"{command:9} {sum(codes.values()):6} runs in {took:6.1f} s, exit codes "
                      + ", ".join(f"{code}: {n}" for code, n in sorted(codes.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
