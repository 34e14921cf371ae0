"""The GUI's `--fleet FILE` option: a fleet file (TOML: [[server]] tables, an optional [balancer] and
[prometheus]; app/core/fleet.py) checked when the command line is read, so a file that cannot be used is
refused in one line naming its line, field and what to write instead, before any window opens."""

from __future__ import annotations

import argparse
from pathlib import Path

FLEET_HELP = ("watch the servers of this fleet file on the Fleet page (TOML: one [[server]] table per endpoint "
              "with name, url, backend and optionally host; an optional [balancer] and [prometheus])")


def fleet_file(text: str) -> str:
    """argparse type: the path of a readable fleet file the registry's backends can serve."""
    from app.backends import registry
    from app.core.fleet import FleetError, parse_fleet

    path = Path(text).expanduser()
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise argparse.ArgumentTypeError(f"cannot read the fleet file {text}: {exc}") from None
    try:
        parse_fleet(content, registry.names())
    except FleetError as exc:
        raise argparse.ArgumentTypeError(f"the fleet file {text}: {exc.user_text()}") from None
    return str(path)


def add_fleet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fleet", type=fleet_file, metavar="FILE", default=None, help=FLEET_HELP)


__all__ = ["FLEET_HELP", "add_fleet_argument", "fleet_file"]
