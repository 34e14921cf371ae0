"""Measure llama-server's real GPU memory for a grid of settings on one NVIDIA GPU.

For each configuration it starts llama-server fully offloaded, parses the buffer sizes it logs,
reads the process's GPU memory through NVML after load, then sends `parallel` concurrent
completions (one long prompt that nearly fills its slot, the others short) while sampling the
process's GPU memory every 20 ms for the peak. Rows are written to the output JSON after every
configuration so a run cut short keeps what it measured.

Usage: python measure.py --server PATH --model PATH --out rows.json [--deadline-s 480] [--only N,M]
       [--grid calibration|heldout] [--shape NAME --vocab N]
`--grid heldout` runs the smaller grid used on the held-out model shapes (make_gguf.py --shape);
`--shape` is recorded in every row and `--vocab` keeps the prompt's token ids inside the model's
vocabulary. Needs nvidia-ml-py (pynvml) and the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pynvml

MIB = 1024 * 1024  # app.core.units.MIB; this script runs alone on the GPU machine, without the app
SHORT_PROMPT_TOKENS = 70
N_PREDICT = 32

# (ctx_per_slot, parallel, kv type, flash attention, batch, ubatch, long prompt tokens or None for ~full slot)
GRID: list[tuple[int, int, str, str, int, int, int | None]] = [
    (4096, 1, "f16", "on", 2048, 512, None),
    (32768, 1, "f16", "on", 2048, 512, None),
    (8192, 4, "f16", "on", 2048, 512, None),
    (4096, 1, "f16", "off", 2048, 512, None),
    (32768, 1, "q8_0", "on", 2048, 512, None),
    (8192, 1, "f16", "on", 128, 128, None),
    (16384, 1, "f16", "off", 2048, 512, None),
    (40960, 1, "f16", "off", 2048, 512, None),
    (40960, 1, "q8_0", "on", 2048, 512, None),
    (40960, 1, "q4_0", "on", 2048, 512, None),
    (40960, 1, "f16", "on", 2048, 512, 8192),
    (8192, 1, "f16", "on", 2048, 512, None),
    (16384, 1, "f16", "on", 2048, 512, None),
    (4096, 16, "f16", "on", 2048, 512, None),
    (16384, 4, "f16", "on", 2048, 512, 8192),
    (4096, 8, "f16", "on", 2048, 512, None),
    (4096, 1, "q8_0", "on", 2048, 512, None),
    (16384, 1, "q8_0", "on", 2048, 512, None),
    (8192, 4, "q8_0", "on", 2048, 512, None),
    (8192, 16, "q8_0", "on", 2048, 512, None),
    (4096, 1, "q4_0", "on", 2048, 512, None),
    (16384, 1, "q4_0", "on", 2048, 512, None),
    (8192, 4, "q4_0", "on", 2048, 512, None),
    (4096, 16, "q4_0", "on", 2048, 512, None),
    (8192, 1, "f16", "off", 2048, 512, None),
    (32768, 1, "f16", "off", 2048, 512, 16384),
    (8192, 4, "f16", "off", 2048, 512, None),
    (4096, 16, "f16", "off", 2048, 512, None),
    (8192, 1, "q8_0", "off", 2048, 512, None),
    (8192, 1, "f16", "on", 2048, 2048, None),
    (8192, 1, "f16", "off", 1024, 1024, None),
    (10000, 3, "q8_0", "on", 2048, 512, None),
    (24576, 1, "q4_0", "on", 2048, 512, None),
    (12288, 2, "f16", "off", 2048, 512, None),
    (40960, 2, "f16", "on", 2048, 512, 8192),
    (8192, 1, "f16", "on", 256, 256, None),
]

# The out-of-sample grid for other model shapes: 4k-32k per slot, 1-8 slots, every KV type, flash
# attention on and off (a long flash-off prompt for the peak), one larger micro-batch.
HELDOUT_GRID: list[tuple[int, int, str, str, int, int, int | None]] = [
    (4096, 1, "f16", "on", 2048, 512, None),
    (32768, 1, "f16", "on", 2048, 512, None),
    (4096, 1, "f16", "off", 2048, 512, None),
    (32768, 1, "q8_0", "on", 2048, 512, None),
    (16384, 1, "f16", "off", 2048, 512, None),
    (8192, 8, "q8_0", "on", 2048, 512, None),
    (8192, 4, "f16", "on", 2048, 512, None),
    (16384, 1, "q4_0", "on", 2048, 512, None),
    (8192, 2, "f16", "off", 2048, 512, None),
    (4096, 8, "q4_0", "on", 2048, 512, None),
    (8192, 1, "f16", "on", 2048, 2048, None),
    (32768, 1, "f16", "off", 2048, 512, 16384),
]
# Settings the mixture-of-experts terms were not fitted on (micro-batches 256 and 1024, 16 slots,
# a 40k context, a long flash-off prompt), to check them out of sample on the same shape.
MOE_CHECK_GRID: list[tuple[int, int, str, str, int, int, int | None]] = [
    (8192, 1, "f16", "on", 2048, 1024, None),
    (8192, 1, "f16", "on", 2048, 256, None),
    (16384, 2, "q8_0", "on", 2048, 1024, None),
    (8192, 1, "f16", "off", 1024, 1024, None),
    (4096, 16, "f16", "on", 2048, 512, None),
    (40960, 1, "q4_0", "on", 2048, 512, None),
    (24576, 1, "f16", "off", 2048, 512, 12000),
]
GRIDS = {"calibration": GRID, "heldout": HELDOUT_GRID, "moe-check": MOE_CHECK_GRID}

BUFFER_RE = re.compile(r"(\S+) (model|KV|compute|output) buffer size =\s*([\d.]+) MiB")
OFFLOAD_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")


def process_gpu_mib(handle, pid: int) -> float | None:
    """GPU memory NVML attributes to `pid`, in MiB (None when the process holds none)."""
    for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if proc.pid == pid and proc.usedGpuMemory is not None:
            return proc.usedGpuMemory / MIB
    return None


def device_used_mib(handle) -> float:
    """Memory in use on the whole device, in MiB."""
    return pynvml.nvmlDeviceGetMemoryInfo(handle).used / MIB


def post(url: str, body: dict, timeout: float) -> dict:
    """POST JSON and decode the JSON answer."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_ready(proc: subprocess.Popen, port: int, timeout: float) -> bool:
    """Poll /health until it answers 200 or the server exits."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def parse_log(text: str) -> dict:
    """Buffer sizes (MiB) and offload counts from llama-server's load log."""
    out: dict = {}
    for dev, kind, mib in BUFFER_RE.findall(text):
        key = f"{dev}_{kind}".lower()
        # a model split over files logs one model line per file, and a sliding-window model one KV
        # line per cache (full-attention and window layers); compute is reserved once per device
        out[key] = out.get(key, 0.0) + float(mib) if kind in ("model", "KV") else float(mib)
    m = OFFLOAD_RE.search(text)
    if m:
        out["layers_offloaded"], out["layers_total"] = int(m.group(1)), int(m.group(2))
    return out


def run_one(args, handle, cfg, port: int) -> dict:
    """Start, load, load-test and stop one llama-server; returns the measured row."""
    ctx, par, kv, fa, batch, ubatch, long_tokens = cfg
    row: dict = {"flash_attention": fa, "kv_cache": kv, "ctx_per_slot": ctx, "parallel": par,
                 "batch": batch, "ubatch": ubatch}
    log_path = Path(args.logdir) / f"server_{ctx}_{par}_{kv}_{fa}_{batch}_{ubatch}.log"
    cmd = [args.server, "-m", args.model, "--host", "127.0.0.1", "--port", str(port), "-ngl", "99",
           "--fit", "off", "-c", str(ctx * par), "-np", str(par), "-fa", fa, "-ctk", kv, "-ctv", kv,
           "-b", str(batch), "-ub", str(ubatch), "-t", "8", "--no-webui", "--log-verbosity", "4"]
    row["command"] = " ".join(["llama-server"] + cmd[1:])
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ready = wait_ready(proc, port, 90)
        text = log_path.read_text(errors="replace")
        row.update(parse_log(text))
        if not ready:
            row["status"] = "failed to start"
            row["log_tail"] = [ln for ln in text.splitlines() if ln.strip()][-6:]
            return row
        row["load_s"] = round(time.monotonic() - t0, 2)
        time.sleep(0.5)
        row["process_mib"] = process_gpu_mib(handle, proc.pid)
        row["device_used_mib"] = device_used_mib(handle)

        peak = [row["process_mib"] or 0.0]
        peak_device = [row["device_used_mib"]]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                v = process_gpu_mib(handle, proc.pid)
                if v is not None and v > peak[0]:
                    peak[0] = v
                peak_device[0] = max(peak_device[0], device_used_mib(handle))
                stop.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        long_len = long_tokens if long_tokens else ctx - N_PREDICT - 64
        span = min(150000, args.vocab - 1000)  # token ids stay inside the vocabulary
        prompts = [[1000 + j % (span - 1000) for j in range(long_len)]]
        prompts += [[(5000 + 37 * i + j) % span for j in range(SHORT_PROMPT_TOKENS)] for i in range(par - 1)]
        body = {"n_predict": N_PREDICT, "temperature": 0, "cache_prompt": False, "ignore_eos": True}
        t1 = time.monotonic()
        with ThreadPoolExecutor(max_workers=par) as pool:
            results = list(pool.map(lambda p: post(f"http://127.0.0.1:{port}/completion",
                                                   dict(body, prompt=p), 300), prompts))
        wall = time.monotonic() - t1
        time.sleep(0.1)
        stop.set()
        sampler.join()
        row["peak_mib"] = peak[0]
        row["peak_device_used_mib"] = peak_device[0]
        row["long_prompt_tokens"] = long_len
        row["requests_wall_s"] = round(wall, 2)
        rates = [r.get("timings", {}).get("predicted_per_second") for r in results]
        rates = [r for r in rates if r]
        if rates:
            row["decode_tokens_per_s_per_request"] = round(sum(rates) / len(rates), 2)
        prompt_rate = results[0].get("timings", {}).get("prompt_per_second")
        if prompt_rate:
            row["long_prompt_tokens_per_s"] = round(prompt_rate, 1)
        row["status"] = "ok"
        return row
    except Exception as exc:  # keep the grid going; the row records what broke
        row["status"] = f"error: {exc!r}"
        return row
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """End a server started in its own session: SIGTERM to its group, SIGKILL after 20 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    """Run the grid (or the rows named in --only) until the deadline."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--logdir", default="/tmp")
    ap.add_argument("--deadline-s", type=float, default=480)
    ap.add_argument("--only", default="")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="calibration")
    ap.add_argument("--shape", default="", help="model shape name recorded in every row (make_gguf.py --shape)")
    ap.add_argument("--vocab", type=int, default=151936, help="the model's vocabulary size")
    args = ap.parse_args()
    grid = GRIDS[args.grid]
    start = time.monotonic()
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    meta = {
        "gpu": pynvml.nvmlDeviceGetName(handle),
        "driver": pynvml.nvmlSystemGetDriverVersion(),
        "gpu_total_mib": info.total / MIB,
        "gpu_used_before_mib": info.used / MIB,
        "model_file_bytes": os.path.getsize(args.model),
    }
    if args.shape:
        meta.update(shape=args.shape, grid=args.grid)
    picks = [int(i) for i in args.only.split(",") if i] or range(len(grid))
    rows = []
    for n, i in enumerate(picks):
        if time.monotonic() - start > args.deadline_s:
            meta["stopped_at_deadline_before_row"] = i
            break
        row = run_one(args, handle, grid[i], 8100 + n)
        row["grid_index"] = i
        if args.shape:
            row["shape"] = args.shape
        rows.append(row)
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        print(json.dumps({k: row.get(k) for k in ("grid_index", "ctx_per_slot", "parallel", "kv_cache",
                                                   "flash_attention", "ubatch", "status", "cuda0_model",
                                                   "cuda0_kv", "cuda0_compute", "process_mib", "peak_mib")}),
              flush=True)
    meta["elapsed_s"] = round(time.monotonic() - start, 1)
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
