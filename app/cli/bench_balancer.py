"""`bench` at a balancer's URL: the backends behind it (--behind, or --fleet FILE's [balancer] section), each
read through its own backend's telemetry for its share of every point's work.

    ollama-deck bench --url http://127.0.0.1:8080 --behind a=http://127.0.0.1:8081 --behind http://127.0.0.1:8082@openai
    ollama-deck bench --fleet fleet.toml --model …

A --behind is [NAME=]URL[@KIND]: NAME defaults to the URL's host:port, KIND to --backend's."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.cli.backend_arg import chosen_backend
from app.cli.checks import ArgProblem, read_text_file, server_url
from app.core.fleet import FleetError, parse_fleet

if TYPE_CHECKING:
    from app.services.bench.sweep_balance import Behind


@dataclass(frozen=True)
class BehindArg:
    """One backend behind the balancer, as the command line or the fleet file names it."""

    name: str
    url: str
    backend: str


def add_balancer_arguments(parser: argparse.ArgumentParser) -> None:
    """Fill the `bench` parser's balancer group."""
    b = parser.add_argument_group("behind a balancer (--url is the balancer's; client-side points only)")
    b.add_argument("--behind", action="append", metavar="[NAME=]URL[@KIND]",
                   help="a backend behind the balancer at --url, read through its own counters for its share of "
                        "each point's requests and tokens; repeat per backend. KIND: its backend (default "
                        "--backend's)")
    b.add_argument("--fleet", metavar="FILE",
                   help="a fleet file (TOML): its [balancer] is measured (its url unless --url) with the [[server]] "
                        "entries it names behind it")


def _behind(text: str, default_backend: str) -> BehindArg:
    from app.backends import registry

    name, _, rest = text.strip().partition("=") if "=" in text.split("://", 1)[0] else ("", "", text.strip())
    url_text, kind = rest, default_backend
    if "@" in rest.rsplit("/", 1)[-1]:
        url_text, _, kind = rest.rpartition("@")
        if kind not in registry.names():
            raise ArgProblem(f"--behind {text}: {kind!r} is not a backend; choose one of "
                             f"{', '.join(registry.names())}")
    url = server_url(f"--behind {text}", url_text)
    return BehindArg(name.strip() or url.authority, url.base_url, kind)


def balancer_backends(args: argparse.Namespace) -> tuple[str | None, tuple[BehindArg, ...]]:
    """The balancer's URL the arguments name (None: --url's as given) and its backends (empty: no balancer);
    ArgProblem says what is wrong. A managed sweep restarts the one server at --url, so it refuses a balancer."""
    fleet_path = getattr(args, "fleet", None)
    behind_texts = getattr(args, "behind", None) or []
    if fleet_path is None and not behind_texts:
        return None, ()
    flag = "--fleet" if fleet_path is not None else "--behind"
    if args.managed or getattr(args, "demo", False):
        raise ArgProblem(f"{flag} measures a balancer and the servers behind it as they run: ollama-deck did not "
                         "start them and cannot restart them per point. Drop --managed/--demo and sweep "
                         "--concurrency, --rate or a --scenario")
    backends = [_behind(text, chosen_backend(args)) for text in behind_texts]
    url = None
    if fleet_path is not None:
        url, from_fleet = _fleet(fleet_path)
        backends += from_fleet
        url = None if args.url is not None else url
    elif args.url is None:
        raise ArgProblem("--behind names the backends behind a balancer; give the balancer's address with --url")
    names = [b.name for b in backends]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise ArgProblem(f"two backends behind the balancer are named {twice!r}; name each, e.g. --behind a=URL")
    return url, tuple(backends)


def _fleet(path: str) -> tuple[str, list[BehindArg]]:
    from app.backends import registry

    text = read_text_file("--fleet", path, "a fleet file (TOML)")
    try:
        fleet = parse_fleet(text, registry.names())
    except FleetError as exc:
        raise ArgProblem(f"--fleet {path}: {exc.user_text()}") from None
    if fleet.balancer is None:
        raise ArgProblem(f"--fleet {path} has no [balancer] section: add one with its url and the names of the "
                         "[[server]] entries behind it")
    behind = [BehindArg(server.name, server.base_url, server.backend) for server in fleet.behind_balancer()]
    return fleet.balancer.base_url, behind


def behind_telemetry(backends: tuple[BehindArg, ...]) -> tuple[Behind, ...]:
    """The sweep's view of the backends behind the balancer: each with its own backend's telemetry."""
    from app.backends import registry
    from app.services.bench.sweep_balance import Behind

    return tuple(Behind(b.name, b.url, registry.get(b.backend).server_telemetry) for b in backends)


__all__ = ["BehindArg", "add_balancer_arguments", "balancer_backends", "behind_telemetry"]
