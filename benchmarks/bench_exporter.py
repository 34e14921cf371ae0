"""Scrape latency and CPU cost of `ollama-deck exporter` sampling every second.

Starts the real command (`python -m app exporter --interval 1`) in front of the real llama-server of the embedded
engine when it is installed (its /metrics and /slots polled every second), else in front of a closed port (the
server read as down). Measures, on the exporter's process:
  - its CPU over `--idle-s` seconds with nobody scraping (% of one core): the sampler and the server poll alone;
  - the latency of `--scrapes` sequential GETs of /metrics (p50, p95, max) and the CPU each scrape adds.

    python benchmarks/bench_exporter.py [--idle-s 30] [--scrapes 300] [--no-engine]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.backends.llama_server.engine import find_bundled_model, find_llama_server  # noqa: E402
from tests.backends.llama_server.engine_server import llama_server  # noqa: E402
from tests.fakes.raw_http import closed_port  # noqa: E402
from tests.prometheus_server import exporter  # noqa: E402


@contextlib.contextmanager
def server_url(use_engine: bool) -> Iterator[tuple[str, str]]:
    """(URL, what it is) of the server the exporter reads."""
    binary, model = find_llama_server(), find_bundled_model()
    if not use_engine or binary is None or model is None:
        yield f"http://127.0.0.1:{closed_port()}", "no server (a closed port)"
        return
    with tempfile.TemporaryDirectory() as logs, \
            llama_server(binary, model, Path(logs), ("-np", "2", "-c", "1024", "-t", "1", "--metrics")) as engine:
        yield engine.base_url, "the embedded llama-server (SmolLM2), polled every second"


def cpu_s(proc: psutil.Process) -> float:
    """CPU seconds the process (all its threads) has used."""
    times = proc.cpu_times()
    return float(times.user + times.system)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-s", type=float, default=30.0, help="seconds of sampling with nobody scraping")
    parser.add_argument("--scrapes", type=int, default=300, help="sequential GETs of /metrics")
    parser.add_argument("--no-engine", action="store_true", help="read a closed port instead of llama-server")
    args = parser.parse_args()
    with server_url(not args.no_engine) as (url, what), \
            exporter("--listen", "127.0.0.1:0", "--url", url, "--backend", "llama_server", "--interval", "1") as app:
        proc = psutil.Process(app.process.pid)
        time.sleep(3.0)  # past start-up (imports, the first samples)
        t0, c0 = time.monotonic(), cpu_s(proc)
        time.sleep(args.idle_s)
        idle_pct = (cpu_s(proc) - c0) / (time.monotonic() - t0) * 100.0
        latencies_ms = []
        size = 0
        c1 = cpu_s(proc)
        for _ in range(args.scrapes):
            start = time.perf_counter()
            with urllib.request.urlopen(app.url, timeout=10) as reply:
                size = len(reply.read())
            latencies_ms.append((time.perf_counter() - start) * 1000.0)
        scrape_span_s = sum(latencies_ms) / 1000.0
        # CPU of the scrapes: the process's CPU while scraping less what sampling costs over that span.
        per_scrape_ms = max(0.0, (cpu_s(proc) - c1) - idle_pct / 100.0 * scrape_span_s) / args.scrapes * 1000.0
    latencies_ms.sort()
    p95 = latencies_ms[min(len(latencies_ms) - 1, int(0.95 * len(latencies_ms)))]
    print(f"server: {what}; sampling every 1 s; {psutil.cpu_count()} CPUs")
    print(f"idle (sampling + server poll, nobody scraping): {idle_pct:.2f} % of one core over {args.idle_s:g} s")
    print(f"scrape of /metrics ({size} bytes), {args.scrapes} sequential: p50 {statistics.median(latencies_ms):.2f} ms, "
          f"p95 {p95:.2f} ms, max {latencies_ms[-1]:.2f} ms; CPU {per_scrape_ms:.2f} ms per scrape")
    print(f"at Prometheus' usual 15 s scrape interval: {idle_pct + per_scrape_ms / 15.0 / 10.0:.2f} % of one core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
