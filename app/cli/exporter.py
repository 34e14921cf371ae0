"""Serve what ollama-deck samples (the GPU through NVML, the host, the server's own telemetry) as a Prometheus exporter
until stopped (Ctrl+C or SIGTERM); prints the URL to scrape and a scrape_configs snippet for prometheus.yml.

Listens on 127.0.0.1 unless --allow-network allows the host given to --listen: the exporter has no authentication,
so any machine that reaches it can read its figures. Exit status 0 when stopped, 2 on unusable input, 1 when the
address cannot be listened on (a port in use says by whom)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from app import __version__
from app.cli.backend_arg import add_backend_argument, chosen_backend
from app.cli.checks import ArgProblem, Range, check_config_dir, check_ranges, one_line, server_url

if TYPE_CHECKING:  # imported when the command runs, so --help stays quick
    from app.adapters.prometheus.exporter import ExporterServer, ListenAddress

PROG = "ollama-deck exporter"
RANGES = (Range("--interval", 0.25, 1.0, "s", "the app's sampler takes GPU and host readings 1 to 4 times a second; "
                "Prometheus reads the newest at each scrape"),)
EXIT_CANNOT_LISTEN = 1
FIRST_SAMPLE_WAIT_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Fill the `exporter` parser."""
    from app.adapters.prometheus.exporter import DEFAULT_PORT

    parser.add_argument("--listen", metavar="HOST:PORT", default=f"127.0.0.1:{DEFAULT_PORT}",
                        help=f"address to serve /metrics on (default 127.0.0.1:{DEFAULT_PORT}; port 0: any free one)")
    parser.add_argument("--allow-network", action="store_true",
                        help="allow listening on the non-loopback host in --listen: any machine that reaches it can "
                             "read this computer's GPU, host and server figures (no authentication)")
    parser.add_argument("--url", help="the server whose own telemetry to export (default: host and port from the "
                                      "saved settings)")
    add_backend_argument(parser)
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between samples, 0.25-1 (default 1)")
    parser.add_argument("--config-dir", help="settings folder for the saved server address (default: the user "
                                             "config folder)")


def _say(text: str) -> None:
    print(f"{PROG}: {one_line(text)}", file=sys.stderr, flush=True)


def _server_base_url(args: argparse.Namespace) -> str:
    """--url, or the saved settings' server (read only: a damaged file is left for the window to report)."""
    if args.url is not None:
        return server_url("--url", args.url).base_url
    from app.adapters.storage.settings_store import SettingsStore
    from app.backends import registry

    check_config_dir("--config-dir", args.config_dir)
    tuning = registry.get(chosen_backend(args)).tuning
    loaded = SettingsStore(Path(args.config_dir) if args.config_dir else None, tuning).load(change_nothing=True)
    return loaded.settings.base_url


def run(args: argparse.Namespace) -> int:
    """Execute `ollama-deck exporter`: serve until SIGINT or SIGTERM."""
    from app.adapters.prometheus.exporter import ListenError, parse_listen

    try:
        check_ranges(args, RANGES)
        address = parse_listen(args.listen)
        base_url = _server_base_url(args)
    except ArgProblem as exc:
        _say(str(exc))
        return 2
    except ListenError as exc:
        _say(f"--listen {exc.user_text()}")
        return 2
    if not address.allowed(address.host if args.allow_network else ""):
        _say(f"{address.refusal()} Add --allow-network to allow it for {address.host}, or use --listen "
             f"127.0.0.1:{address.port}.")
        return 2
    if warning := address.warning():
        _say(f"warning: {warning}")
    return _serve(args, address, base_url)


def _serve(args: argparse.Namespace, address: ListenAddress, base_url: str) -> int:
    """Sample, poll the server and serve until a signal; the exit status."""
    from app.adapters.aio import LoopThread
    from app.adapters.prometheus.exporter import (BindError, ExporterFeed, ExporterServer, ListenerPids,
                                                  ServerTarget, make_registry, poll_server, scrape_config)
    from app.adapters.telemetry.host import HostProbe
    from app.adapters.telemetry.nvml import make_gpu_backend
    from app.adapters.telemetry.sampler import Sampler
    from app.backends import registry
    from app.core.server.exposure import is_loopback
    from app.core.server.url import parse_server_url
    from app.core.telemetry import Sample
    from app.core.throughput import TokenMeter

    spec = registry.get(chosen_backend(args))
    url = parse_server_url(base_url)
    gpu = make_gpu_backend()
    if not gpu.available:
        _say(f"no GPU metrics: {gpu.unavailable_reason}")
    lost = threading.Event()
    sampled = threading.Event()

    def on_sample(sample: Sample) -> None:  # the sampler's thread
        sampled.set()
        if gpu.info() is not None and sample.gpu is None and not lost.is_set():
            lost.set()
            _say(f"GPU metrics stopped: {gpu.unavailable_reason}")

    # The server's process tree (for its GPU memory) is found by its listening socket, on this machine only.
    pids: Callable[[], Sequence[int]] = ListenerPids(url.host, url.port) if is_loopback(url.host) else tuple
    sampler = Sampler(gpu, HostProbe(), server_pids=pids, token_meter=TokenMeter(), interval_s=args.interval,
                      on_sample=on_sample)
    feed = ExporterFeed(gpu.info(), lambda: sampler.latest, target=ServerTarget(spec.name, url.base_url),
                        stale_after_s=max(5.0, 3 * sampler.interval_s))
    server = ExporterServer(make_registry(feed, __version__), address)
    try:
        server.start()
    except BindError as exc:
        _say(exc.user_text())
        gpu.close()
        return EXIT_CANNOT_LISTEN
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    loop = LoopThread("deck-exporter")
    try:
        sampler.start()
        if spec.server_telemetry is not None and (spec.can("server_metrics") or spec.can("reports_slots")):
            telemetry = spec.server_telemetry(url.base_url)
            loop.submit(poll_server(telemetry, feed, sampler.interval_s,
                                    on_notice=lambda text: _say(f"server metrics unavailable: {text}") if text
                                    else _say(f"server metrics from {url.base_url} answer again")))
        else:
            _say(f"{spec.display_name} reports no telemetry of its own: only GPU and host figures are exported")
        sampled.wait(FIRST_SAMPLE_WAIT_S)  # a scrape from now on has the host's figures
        # The URL line last: a script that waits for it has the snippet too.
        print(f"Add to prometheus.yml:\n{scrape_config('ollama-deck', address_for_scrape(server))}\n"
              f"Serving Prometheus metrics at {server.url} (server {url.base_url}, {spec.name}); Ctrl+C stops.",
              flush=True)
        stop.wait()
    finally:
        server.stop()
        sampler.stop()
        loop.stop()
        gpu.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _say("stopped")
    return 0


def address_for_scrape(server: ExporterServer) -> str:
    """host:port Prometheus is to scrape (the port the kernel picked for port 0); for a bind on every address, this
    machine's name, which other machines can reach where the network names it."""
    import socket

    from app.adapters.process.procs import WILDCARD_ADDRESSES
    from app.core.server.exposure import address_text

    host = server.address.host
    return address_text(socket.gethostname() if host in WILDCARD_ADDRESSES else host, server.port)
