"""The Fleet page's wiring (part of the GUI's composition root): read the --fleet file, and give the page a
monitor polling its servers through the registry's specs, Prometheus's HTTP API for the hosts, and this
machine's GPU for a server on it when the file names no Prometheus."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from app.adapters.prometheus.query import PrometheusReader
from app.core.fleet import FleetError, FleetFile, example_fleet, parse_fleet
from app.core.ports.backend import BackendSpec
from app.services.bench.sweep_balance import Behind
from app.services.fleet import FleetMonitor, local_host_figures
from app.ui.pages.context import PageContext
from app.ui.pages.fleet.feed import FleetFeed
from app.ui.pages.fleet.page import FleetPage

EXAMPLE_BACKEND = "llama_server"  # the example shows two llama-servers behind nginx (the first setup)


def fleet_page(context: PageContext, path: str | None,
               backends: Mapping[str, BackendSpec]) -> tuple[FleetPage, FleetFile | None]:
    """The Fleet page for the fleet file at `path` (None: the empty state with an example file), and the fleet read
    (None when there is none); a file that cannot be read or used is said on the page, with its line, field and
    what to write instead."""
    example = example_fleet(EXAMPLE_BACKEND if EXAMPLE_BACKEND in backends else next(iter(backends)))
    if not path:
        return FleetPage(context, example=example), None
    try:
        fleet = parse_fleet(Path(path).read_text(encoding="utf-8"), list(backends))
    except (OSError, UnicodeDecodeError) as exc:
        return FleetPage(context, example=example, problem=f"Cannot read the fleet file {path}: {exc}"), None
    except FleetError as exc:
        return FleetPage(context, example=example, problem=f"The fleet file {path}: {exc.user_text()}"), None
    local = local_host_figures(context.gpu.info(), context.gpu.unavailable_reason, context.samples)
    monitor = FleetMonitor(fleet, backends, host_reader=PrometheusReader, local_host=local)
    return FleetPage(context, FleetFeed(monitor, context.loop), example=example, source=path), fleet


def behind_the_balancer(fleet: FleetFile | None, base_url: str,
                        backends: Mapping[str, BackendSpec]) -> tuple[Behind, ...]:
    """The backends a sweep at `base_url` reads for their shares: those behind the fleet's balancer when the window
    is attached at the balancer's URL, else none (a sweep of one server reads that server itself)."""
    balancer = fleet.balancer if fleet is not None else None
    if balancer is None or balancer.base_url.rstrip("/") != base_url.rstrip("/"):
        return ()
    servers = fleet.behind_balancer() if fleet is not None else ()
    return tuple(Behind(s.name, s.base_url, backends[s.backend].server_telemetry) for s in servers)


__all__ = ["behind_the_balancer", "fleet_page"]
