"""CPU cost of the telemetry sampler at 4 Hz, as a percentage of one core.

Runs the real Sampler thread with the real host probe over a stand-in server process tree
(a child and a grandchild Python process) and a token stream of ~130 tok/s, once with the
NVML backend (or the null backend where no NVIDIA driver is present) and once with the
scripted RTX 4090. The cost is the process's CPU time over wall time, less the main thread's
own CPU time (it plays the token streams, work the app's network thread does). Target: < 1 %
of one core.

    python benchmarks/bench_sampler.py [--seconds 20] [--interval 0.25] [--gpu-server-mib 2048]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.adapters.telemetry.host import HostProbe  # noqa: E402
from app.adapters.telemetry.nvml import make_gpu_backend  # noqa: E402
from app.adapters.telemetry.sampler import Sampler  # noqa: E402
from app.core.telemetry import GpuBackend  # noqa: E402
from app.core.throughput import TokenMeter  # noqa: E402
from tests.fakes.scripted_gpu import ScriptedGpuBackend, serving_script  # noqa: E402

# A stand-in server: starts one runner child (optionally holding GPU memory through torch),
# reports the runner's pid once it is ready, then waits for stdin to close.
SERVER = r"""
import subprocess, sys
runner = sys.argv[1]
kid = subprocess.Popen([sys.executable, "-c", runner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
if kid.stdout.readline().strip() != "ready":
    sys.exit(1)
print(kid.pid, flush=True)
sys.stdin.read()
kid.stdin.close()
kid.wait()
"""
RUNNER = r"""
import sys
mib = {gpu_mib}
if mib:
    import torch
    held = torch.empty(mib * 2**20, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.read()
"""


def start_server_tree(gpu_mib: int = 0) -> tuple[subprocess.Popen, int]:
    """The stand-in server and its runner's pid (returns once both are up)."""
    runner = RUNNER.format(gpu_mib=int(gpu_mib))
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, runner], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    line = server.stdout.readline()
    if not line.strip():
        raise SystemExit("the stand-in server did not start (with --gpu-server-mib, is torch with CUDA installed?)")
    return server, int(line)


def describe(gpu: GpuBackend) -> str:
    """One line on what the backend is."""
    info = gpu.info()
    if info is None:
        return f"{type(gpu).__name__}: {gpu.unavailable_reason}"
    return f"{type(gpu).__name__}: {info.name}, driver {info.driver}, {info.memory_total_mib:.0f} MiB"


def measure(label: str, gpu: GpuBackend, server_pid: int, seconds: float, interval_s: float) -> None:
    """Run the sampler for `seconds` and print its CPU share."""
    meter = TokenMeter()
    sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [server_pid], token_meter=meter, interval_s=interval_s)
    stop = threading.Event()
    sampler.start()
    wall0, cpu0, feeder0 = time.perf_counter(), time.process_time(), time.thread_time()
    meter.begin()
    while not stop.wait(0.1):  # ~130 tok/s in 13-token chunks, as two streams would deliver
        meter.add(13, time.monotonic())
        if time.perf_counter() - wall0 >= seconds:
            stop.set()
    meter.end()
    wall, cpu, feeder = time.perf_counter() - wall0, time.process_time() - cpu0, time.thread_time() - feeder0
    sampler.stop()
    ticks = max(sampler.ticks, 1)
    sampler_cpu = cpu - feeder
    pct = 100.0 * sampler_cpu / wall
    print(f"{label:<26} sampler {pct:6.3f} % of one core ({1e3 * sampler_cpu / ticks:5.3f} ms CPU per tick; "
          f"with the token feeder {100.0 * cpu / wall:5.3f} %)   {sampler.ticks} ticks in {wall:.1f} s, "
          f"skipped {sampler.skipped_ticks}, errors {sampler.tick_errors}   [{'OK' if pct < 1.0 else 'OVER'} vs 1 %]")
    last = sampler.latest
    if last is not None:
        g, h = last.gpu, last.host
        gpu_text = "gpu None" if g is None else (
            f"gpu used {g.memory_used_mib:.0f}/{g.memory_total_mib:.0f} MiB, server {g.server_memory_mib:.0f} MiB, "
            f"util {g.utilization_pct:.0f} %, {g.power_w:.1f} W, {g.temperature_c:.0f} °C")
        print(f"{'':<26} last sample: {gpu_text}; RAM {h.ram_used_mib:.0f}/{h.ram_total_mib:.0f} MiB, "
              f"server CPU {h.server_cpu_pct:.1f} %, RSS {h.server_rss_mib:.1f} MiB, {last.tokens_per_s:.0f} tok/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="run time per variant")
    parser.add_argument("--interval", type=float, default=0.25, help="sampling interval (s); 0.25 = 4 Hz")
    parser.add_argument("--gpu-server-mib", type=int, default=0,
                        help="let the stand-in server's runner hold this much GPU memory (needs torch + CUDA)")
    args = parser.parse_args()

    server, runner_pid = start_server_tree(args.gpu_server_mib)
    try:
        real_gpu = make_gpu_backend()
        print(f"sampler at {1 / args.interval:g} Hz for {args.seconds:g} s per variant; "
              f"python {sys.version.split()[0]}; "
              f"server tree pids {server.pid} + {runner_pid}")
        print(f"GPU backend: {describe(real_gpu)}")
        first = real_gpu.sample(time.monotonic(), HostProbe().tree_pids([server.pid]))
        print(f"first NVML reading: {first}")
        label = "real host + " + ("NVML" if real_gpu.available else "null GPU")
        measure(label, real_gpu, server.pid, args.seconds, args.interval)
        real_gpu.close()
        scripted = ScriptedGpuBackend(script=serving_script())
        measure("real host + scripted 4090", scripted, server.pid, args.seconds, args.interval)
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
