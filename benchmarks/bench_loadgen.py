"""Is the load generator ever the bottleneck? Throughput and timing error of app/services/bench/loadgen.py.

Every server runs in its own process (no shared GIL) on 127.0.0.1. Two servers:
- "asyncio": tests/fakes/ollama/fast_ollama.py, a minimal NDJSON streamer with Ollama's fields and final
  line that writes as fast as one process can;
- "threaded": the stand-in `ollama serve` the tests use (tests/fakes/ollama/standin_ollama.py), which
  models Ollama's scheduler and spends a thread per stream.
Both stamp each line's `created_at` with the wall clock (nanoseconds) as they write it.

1. capacity: 64 clients, server unpaced: output chunks per second the generator takes in, and
   the client process's CPU.
2. timing error: 64 streams paced at --rate tokens/s each (default 160: 10,240 chunks/s in all),
   two requests per client after a warm-up. Error = the generator's receive stamp (monotonic,
   mapped to the wall clock) minus the line's `created_at`: the loopback transfer plus any delay
   in the generator, plus whatever the OS scheduler adds on a busy machine. TPOT is compared
   with the pacing (1 / rate). Repeated --repeat times against the asyncio server, once against
   the threaded stand-in.
3. open loop: Poisson arrivals; how late requests leave against their schedule.

    python benchmarks/bench_loadgen.py [--streams 64] [--rate 160] [--tokens 480] [--repeat 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services.bench import loadgen  # noqa: E402
from app.backends.ollama.client import load_client  # noqa: E402
from app.services.bench.loadgen import LoadGenerator  # noqa: E402
from app.core.bench.stats import summarize  # noqa: E402
from app.core.bench.workload import BenchPrompt, LoadPlan  # noqa: E402
from tests.fakes.ollama.fast_ollama import parse_created_at_ns  # noqa: E402

PROMPT = (BenchPrompt("short", "Write one sentence about memory bandwidth."),)


def start_fast(rate: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.ollama.fast_ollama", "--port", "0", "--tokens-per-s", str(rate)],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline().split()[1])
    return proc, f"http://127.0.0.1:{port}"


def start_standin(tokens: int, rate: float) -> tuple[subprocess.Popen, str]:
    from tests.fakes.ollama.server_fixtures import free_port

    port = free_port()
    env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{port}", OLLAMA_NUM_PARALLEL="64",
               FAKE_OLLAMA_TOKENS_PER_S=str(rate or 1e9),
               FAKE_OLLAMA_PROMPT_TOKENS_PER_S="1e9", FAKE_OLLAMA_ANSWER_TOKENS=str(tokens), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.ollama.standin_ollama", "serve"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:
        if "Listening on" in line:
            break
    return proc, f"http://127.0.0.1:{port}"


def stop(proc: subprocess.Popen) -> None:
    """Ask the server to end (stdin closed), then SIGTERM it if it has not."""
    if proc.stdin:
        proc.stdin.close()
    try:
        proc.wait(3)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(10)


async def measure(url: str, plan: LoadPlan, stamp_lines: bool = False) -> dict:
    """Run the plan; chunks/s, client CPU and (optionally) every line's receive stamp."""
    stamps: list[tuple[float, dict]] = []
    original = loadgen._Reply.on_chunk
    if stamp_lines:
        def on_chunk(self, chunk) -> None:  # the generator's own stamp, kept for the error
            stamps.append((chunk.t_monotonic, chunk.raw))
            original(self, chunk)

        loadgen._Reply.on_chunk = on_chunk
    try:
        async with LoadGenerator(url, load_client) as generator:
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = await generator.run(plan)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        loadgen._Reply.on_chunk = original
    chunks = sum(r.output_chunks for r in result.records)
    return {"result": result, "chunks": chunks, "chunks_per_s": chunks / result.measured_s,
            "client_cpu_pct": 100 * cpu / wall, "stamps": stamps}


def percentiles(values: np.ndarray) -> dict:
    return {k: round(float(v), 4) for k, v in zip(("p50", "p90", "p99", "p99.9", "max"),
                                                  np.percentile(values, [50, 90, 99, 99.9, 100]))}


def start_server(kind: str, rate: float, tokens: int) -> tuple[subprocess.Popen, str]:
    """The asyncio streamer ("asyncio") or the threaded stand-in `ollama serve` ("threaded")."""
    return start_fast(rate) if kind == "asyncio" else start_standin(tokens, rate)


async def capacity(kind: str, n: int, tokens: int) -> dict:
    proc, url = start_server(kind, 0.0, tokens)
    try:
        model = "m" if kind == "asyncio" else "qwen3:0.6b"
        plan = LoadPlan(model, prompts=PROMPT, concurrency=n, requests=2 * n, think=False,
                        num_predict=tokens if kind == "asyncio" else None, warmup_requests=n)
        cap = await measure(url, plan)
    finally:
        stop(proc)
    out = {"server": kind, "streams": n, "chunks": cap["chunks"], "chunks_per_s": round(cap["chunks_per_s"]),
           "client_cpu_pct_of_one_core": round(cap["client_cpu_pct"], 1)}
    print(f"capacity, {kind} server: {n} streams, {cap['chunks_per_s']:,.0f} chunks/s received "
          f"(client CPU {cap['client_cpu_pct']:.0f} % of one core over warm-up and run)", flush=True)
    return out


async def timing(kind: str, n: int, rate: float, tokens: int) -> dict:
    proc, url = start_server(kind, rate, tokens)
    try:
        model = "m" if kind == "asyncio" else "qwen3:0.6b"
        plan = LoadPlan(model, prompts=PROMPT, concurrency=n, requests=2 * n, think=False,
                        num_predict=tokens if kind == "asyncio" else None, warmup_requests=n)
        offset_before = time.time() - time.monotonic()
        paced = await measure(url, plan, stamp_lines=True)
        offset_after = time.time() - time.monotonic()
    finally:
        stop(proc)
    offset = (offset_before + offset_after) / 2
    err = np.asarray([(t + offset) * 1e3 - parse_created_at_ns(line["created_at"]) / 1e6
                      for t, line in paced["stamps"]])
    stats = summarize(paced["result"].records)
    out = {"server": kind, "streams": n, "rate_per_stream": rate, "target_chunks_per_s": n * rate,
           "chunks_per_s": round(paced["chunks_per_s"]), "seconds": round(paced["result"].measured_s, 2),
           "client_cpu_pct_of_one_core": round(paced["client_cpu_pct"], 1),
           "lines_compared": int(err.size), "error_ms": percentiles(err), "error_ms_min": round(float(err.min()), 4),
           "share_under_1ms": round(float((err < 1.0).mean()), 5),
           "clock_offset_drift_ms": round((offset_after - offset_before) * 1e3, 4),
           "tpot_ms_expected": round(1e3 / rate, 4), "tpot_ms_mean": round(stats.tpot_ms.mean, 4),
           "tpot_ms_p99": round(stats.tpot_ms.p99, 4), "itl_ms_p50": round(stats.itl_ms.p50, 4)}
    print(f"timing, {kind} server: {n} streams x {rate:g} tok/s = {out['chunks_per_s']:,} chunks/s for "
          f"{out['seconds']} s, client CPU {out['client_cpu_pct_of_one_core']} % of one core; receive stamp - server write (ms) {out['error_ms']}, "
          f"{out['share_under_1ms'] * 100:.2f} % under 1 ms; TPOT mean {out['tpot_ms_mean']} ms "
          f"(pacing {out['tpot_ms_expected']} ms)", flush=True)
    return out


async def open_loop(rate_rps: float, requests: int) -> dict:
    proc, url = start_fast(2000.0)
    try:
        plan = LoadPlan("m", prompts=PROMPT, mode="open", rate_rps=rate_rps, concurrency=0, requests=requests,
                        num_predict=20, warmup_requests=0, seed=1)
        opened = await measure(url, plan)
    finally:
        stop(proc)
    late = np.asarray([(r.sent_s - r.scheduled_s) * 1e3 for r in opened["result"].records])
    gaps = np.diff([r.scheduled_s for r in opened["result"].records])
    out = {"rate_rps": rate_rps, "requests": int(late.size), "mean_gap_ms": round(float(gaps.mean()) * 1e3, 3),
           "send_late_ms": percentiles(late)}
    print(f"open loop: {rate_rps:g} req/s Poisson, mean gap {gaps.mean() * 1e3:.2f} ms, sent late by (ms) "
          f"{out['send_late_ms']}", flush=True)
    return out


async def main(args: argparse.Namespace) -> dict:
    report: dict = {"machine": {"cpus": os.cpu_count(), "load_avg_before": os.getloadavg()}}
    n = args.streams
    report["capacity"] = [await capacity(kind, n, args.tokens) for kind in ("asyncio", "threaded")]
    report["timing"] = [await timing("asyncio", n, args.rate, args.tokens) for _ in range(args.repeat)]
    report["timing_threaded"] = await timing("threaded", n, args.rate, args.tokens)
    report["open_loop"] = await open_loop(args.open_rate, args.open_requests)
    report["machine"]["load_avg_after"] = os.getloadavg()
    print(f"load average before/after: {report['machine']['load_avg_before']} / {report['machine']['load_avg_after']}")
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--rate", type=float, default=160.0, help="tokens/s per stream in the timing run")
    parser.add_argument("--tokens", type=int, default=480, help="tokens per reply (3 s at 160 tok/s)")
    parser.add_argument("--open-rate", type=float, default=200.0, help="arrivals/s in the open-loop run")
    parser.add_argument("--open-requests", type=int, default=400)
    parser.add_argument("--repeat", type=int, default=3, help="timing runs against the asyncio streamer")
    parser.add_argument("--json", help="write the report as JSON")
    a = parser.parse_args()
    out = asyncio.run(main(a))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
