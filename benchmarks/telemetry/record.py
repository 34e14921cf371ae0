"""Record real telemetry with ollama-deck's own sampler while llama.cpp's llama-server serves load.

Runs on a machine with an NVIDIA GPU (no Qt needed): starts llama-server on a GGUF, samples it
with app.adapters.telemetry.sampler.Sampler (NVML + psutil, as the app does), drives phases of streaming
requests whose tokens feed the app's TokenMeter, and writes every row of TelemetryBuffers to JSON.
render.py then draws the app's Dashboard page from that recording.

Usage: python benchmarks/telemetry/record.py --server llama-server --model model.gguf --out rec.json
       [--phases idle:8,1:25,4:25,idle:8] [--parallel 4] [--ctx-per-slot 8192]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.adapters.telemetry.host import HostProbe  # noqa: E402
from app.adapters.telemetry.nvml import make_gpu_backend  # noqa: E402
from app.core.telemetry_buffers import Channel  # noqa: E402
from app.adapters.telemetry.sampler import Sampler  # noqa: E402
from app.core.throughput import TokenMeter  # noqa: E402

PROMPT = "Explain why decoding on a GPU is bound by memory bandwidth. " * 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def stream_one(client: httpx.AsyncClient, url: str, meter: TokenMeter, n_predict: int) -> None:
    """One streaming completion; every token received is counted at its arrival time."""
    body = {"prompt": PROMPT, "n_predict": n_predict, "stream": True, "ignore_eos": True, "temperature": 0.7}
    with meter.request():
        async with client.stream("POST", f"{url}/completion", json=body) as r:
            async for line in r.aiter_lines():
                if line.startswith("data:") and '"content"' in line:
                    meter.add(1, time.monotonic())


async def phase(url: str, meter: TokenMeter, clients: int, seconds: float) -> None:
    """`clients` concurrent closed-loop streams for `seconds`."""
    deadline = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as client:
        async def worker() -> None:
            while time.monotonic() < deadline:
                await stream_one(client, url, meter, n_predict=128)
        await asyncio.gather(*(worker() for _ in range(clients)))


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not become ready")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--phases", default="idle:8,1:25,4:25,idle:8")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx-per-slot", type=int, default=8192)
    args = ap.parse_args()

    gpu = make_gpu_backend()
    meter = TokenMeter()
    server_pids: list[int] = []
    sampler = Sampler(gpu, HostProbe(), server_pids=lambda: server_pids, token_meter=meter, interval_s=0.5)
    sampler.start()
    t_start = time.monotonic()
    events = []
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    time.sleep(4.0)  # a few idle samples before the server exists
    events.append((time.monotonic(), "llama-server starts"))
    proc = subprocess.Popen(
        [args.server, "-m", args.model, "-ngl", "99", "-fa", "on", "-np", str(args.parallel),
         "-c", str(args.ctx_per_slot * args.parallel), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    server_pids.append(proc.pid)
    try:
        wait_ready(url, proc)
        events.append((time.monotonic(), "model loaded"))
        for item in args.phases.split(","):
            what, _, seconds = item.partition(":")
            events.append((time.monotonic(), f"phase {what}"))
            if what == "idle":
                time.sleep(float(seconds))
            else:
                asyncio.run(phase(url, meter, int(what), float(seconds)))
    finally:
        proc.terminate()
        proc.wait(30)
        time.sleep(2.0)
        sampler.stop()
    t, rows = sampler.buffers.view()
    info = gpu.info()
    record = {
        "what": "ollama-deck Sampler rows (NVML + psutil) recorded while llama-server served streaming load",
        "gpu": {"name": info.name, "driver": info.driver, "memory_total_mib": info.memory_total_mib} if info else None,
        "interval_s": 0.5,
        "channels": list(Channel.NAMES),
        "t": [round(x - t_start, 3) for x in t.tolist()],
        "rows": [[None if v != v else round(v, 3) for v in r] for r in rows.tolist()],
        "events": [(round(te - t_start, 3), text) for te, text in events],
        "server_command": f"llama-server -ngl 99 -fa on -np {args.parallel} -c {args.ctx_per_slot * args.parallel}",
    }
    Path(args.out).write_text(json.dumps(record))
    print(f"{len(t)} samples, {info.name if info else 'no GPU'}; events {record['events']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
