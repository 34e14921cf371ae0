"""Measure what the real Ollama (and llama-server started alone) load on one NVIDIA GPU, on the whole card
or on a smaller card simulated by another process holding the rest of its memory.

For each configuration it starts `ollama serve` with the configuration's environment (parallel slots, KV
type, context), loads the model with an empty request, and records: NVML's memory info v2 before the load
(total, reserved, used, free), the llama-server command Ollama logged, llama.cpp's buffer lines and its
`offloaded N/M layers` line, `/api/ps`, and NVML's per-process memory of the llama-server child after the
load. `--mode llama-server` starts llama-server itself (no -c, llama.cpp's --fit on) to record the context
per slot it picks. Rows are written after every configuration, so a run cut short keeps what it measured.

Usage: python measure_ollama.py --ollama BIN --llama-server BIN --gguf PATH --shape NAME --out rows.json
       [--plan "1:default:f16 8:8192:q8_0 ..."] [--hold-free-mib 24564] [--deadline-s 500] [--logdir DIR]
Needs nvidia-ml-py (pynvml), and torch for --hold-free-mib. Runs alone on the GPU machine, without the app.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pynvml
from measure import stop  # the script folder is on sys.path

MIB = 1024 * 1024
HOLDER = r"""
import os, sys, time
import pynvml, torch
target = int(sys.argv[1]) * 1024 * 1024
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
def free():
    return pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2).free
torch.cuda.init(); torch.empty(1, device="cuda")
held = []
while free() - target > 4 * 1024 * 1024:
    step = free() - target
    held.append(torch.empty(step - step % (2 * 1024 * 1024) or 2 * 1024 * 1024, dtype=torch.uint8, device="cuda"))
print("ready", free() // (1024 * 1024), flush=True)
while True:
    time.sleep(3600)
"""
BUFFER_RE = re.compile(r"(\w[\w_]*):\s+(\S+)\s+(model|KV|compute|output|RS) buffer size =\s+([\d.]+) MiB")
OFFLOAD_RE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
SLOT_RE = re.compile(r"n_slots = (\d+), n_ctx_slot = (\d+)")
NCTX_RE = re.compile(r"llama_context: n_ctx\s+=\s+(\d+)")
CMD_RE = re.compile(r'msg="starting llama-server" cmd="([^"]*)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mem_v2(handle) -> dict:
    m = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    return {"total_mib": m.total / MIB, "reserved_mib": m.reserved / MIB, "used_mib": m.used / MIB,
            "free_mib": m.free / MIB}


def mem_v1(handle) -> dict:
    m = pynvml.nvmlDeviceGetMemoryInfo(handle)
    return {"v1_total_mib": m.total / MIB, "v1_used_mib": m.used / MIB, "v1_free_mib": m.free / MIB}


def procs(handle) -> dict[int, float]:
    return {p.pid: (p.usedGpuMemory or 0) / MIB for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}


def children(pid: int) -> list[int]:
    out = []
    try:
        text = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    except OSError:
        return out
    for line in text.split():
        c = int(line)
        out += [c, *children(c)]
    return out


def get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except Exception as exc:  # noqa: BLE001 - any failure is "not ready"
        return 0, str(exc)


def post(url: str, body: dict, timeout: float) -> tuple[int, str]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except Exception as exc:  # noqa: BLE001
        return 0, str(exc)


def parse(text: str) -> dict:
    buffers: dict[str, float] = {}
    for m in BUFFER_RE.finditer(text):
        key = f"{m.group(2)} {m.group(3)}"
        buffers[key] = buffers.get(key, 0.0) + float(m.group(4))
    row: dict = {"buffers": buffers}
    if (m := OFFLOAD_RE.search(text)):
        row["offloaded"], row["layers"] = int(m.group(1)), int(m.group(2))
    if (m := SLOT_RE.search(text)):
        row["n_slots"], row["n_ctx_slot"] = int(m.group(1)), int(m.group(2))
    if (m := NCTX_RE.search(text)):
        row["n_ctx"] = int(m.group(1))
    if (m := CMD_RE.search(text)):
        row["command"] = m.group(1)
    row["buffer_lines"] = [ln.strip() for ln in text.splitlines() if "buffer size" in ln or "offloaded" in ln
                           or "n_ctx" in ln or "fit" in ln.lower()[:40]][:80]
    return row


class Ollama:
    def __init__(self, binary: str, home: Path, models: Path, logdir: Path) -> None:
        self.binary, self.home, self.models, self.logdir = binary, home, models, logdir
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log: Path | None = None

    def start(self, env_extra: dict[str, str], tag: str) -> bool:
        self.port = free_port()
        self.log = self.logdir / f"ollama_{tag}.log"
        env = dict(os.environ, HOME=str(self.home), OLLAMA_MODELS=str(self.models),
                   OLLAMA_HOST=f"127.0.0.1:{self.port}", HTTPS_PROXY="http://127.0.0.1:9",
                   HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1,localhost", OLLAMA_KEEP_ALIVE="-1",
                   OLLAMA_LOAD_TIMEOUT="10m", **env_extra)
        self.proc = subprocess.Popen([self.binary, "serve"], env=env, stdout=self.log.open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if get(f"http://127.0.0.1:{self.port}/api/version", 2)[0] == 200:
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


def run_ollama(args, handle, ol: Ollama, name: str, cfg: str) -> dict:
    np_, ctx, kv = cfg.split(":")
    env = {"OLLAMA_NUM_PARALLEL": np_, "OLLAMA_KV_CACHE_TYPE": kv, "OLLAMA_FLASH_ATTENTION": "1"}
    if ctx != "default":
        env["OLLAMA_CONTEXT_LENGTH"] = ctx
    row: dict = {"mode": "ollama", "shape": args.shape, "config": cfg, "parallel": int(np_), "ctx": ctx, "kv": kv,
                 "hold_free_mib": args.hold_free_mib}
    tag = f"{args.shape}_{np_}_{ctx}_{kv}"
    if not ol.start(env, tag):
        row["error"] = "ollama did not start"
        return row
    try:
        row["before"] = {**mem_v2(handle), **mem_v1(handle)}
        row["procs_before"] = procs(handle)
        t0 = time.monotonic()
        code, body = post(f"http://127.0.0.1:{ol.port}/api/generate", {"model": name, "prompt": "",
                                                                       "keep_alive": -1}, args.load_timeout)
        row["load_s"] = round(time.monotonic() - t0, 2)
        row["load_status"] = code
        row["load_body"] = body[:300]
        time.sleep(0.5)
        row["ps"] = json.loads(get(f"http://127.0.0.1:{ol.port}/api/ps")[1] or "{}").get("models", [])
        kids = children(ol.proc.pid) if ol.proc else []
        now = procs(handle)
        row["process_mib"] = sum(now.get(k, 0.0) for k in kids)
        row["after"] = mem_v2(handle)
        text = ol.log.read_text(errors="replace") if ol.log else ""
        row.update(parse(text))
        for key in ("total_vram", "available", "default_num_ctx"):
            m = re.search(rf'{key}="?([^" ]+)', text)
            if m:
                row[f"ollama_{key}"] = m.group(1)
    finally:
        ol.stop()
    return row


def run_server(args, handle, cfg: str) -> dict:
    np_, ctx, kv = cfg.split(":")
    port = free_port()
    cmd = [args.llama_server, "--model", args.gguf, "--port", str(port), "--host", "127.0.0.1", "--no-webui",
           "-np", np_, "--log-verbosity", "4", "--flash-attn", "on", "-ctk", kv, "-ctv", kv]
    if ctx != "default":
        cmd += ["-c", str(int(ctx) * int(np_))]
    log = Path(args.logdir) / f"server_{args.shape}_{np_}_{ctx}_{kv}.log"
    row: dict = {"mode": "llama-server", "shape": args.shape, "config": cfg, "parallel": int(np_), "ctx": ctx,
                 "kv": kv, "hold_free_mib": args.hold_free_mib, "command": " ".join(cmd)}
    row["before"] = {**mem_v2(handle), **mem_v1(handle)}
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.monotonic()
        ok = False
        while time.monotonic() - t0 < args.load_timeout:
            if get(f"http://127.0.0.1:{port}/health", 2)[0] == 200:
                ok = True
                break
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        row["load_s"] = round(time.monotonic() - t0, 2)
        row["ready"] = ok
        time.sleep(0.5)
        row["process_mib"] = procs(handle).get(proc.pid, 0.0)
        row["after"] = mem_v2(handle)
        row.update(parse(log.read_text(errors="replace")))
    finally:
        stop(proc)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ollama")
    ap.add_argument("--llama-server")
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--shape", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plan", default="1:default:f16")
    ap.add_argument("--mode", choices=("ollama", "llama-server"), default="ollama")
    ap.add_argument("--hold-free-mib", type=int, default=0)
    ap.add_argument("--deadline-s", type=float, default=500)
    ap.add_argument("--load-timeout", type=float, default=150)
    ap.add_argument("--logdir", default="/tmp/vram/logs")
    ap.add_argument("--models", default="/dev/shm/olmodels")
    args = ap.parse_args()
    t_end = time.monotonic() + args.deadline_s
    Path(args.logdir).mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    out = Path(args.out)
    rows: list[dict] = json.loads(out.read_text()) if out.exists() else []
    meta = {"gpu": pynvml.nvmlDeviceGetName(handle), "driver": pynvml.nvmlSystemGetDriverVersion()}
    holder = None
    if args.hold_free_mib:
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(args.hold_free_mib)], stdout=subprocess.PIPE,
                                  text=True, start_new_session=True)
        line = holder.stdout.readline() if holder.stdout else ""
        print("holder:", line.strip(), flush=True)
        meta["holder_pid"] = holder.pid
    ol = None
    name = f"m-{args.shape}"
    try:
        if args.mode == "ollama":
            home = Path("/tmp/olhome")
            home.mkdir(exist_ok=True)
            ol = Ollama(args.ollama, home, Path(args.models), Path(args.logdir))
            if not ol.start({}, f"create_{args.shape}"):
                raise SystemExit("ollama serve did not start")
            mf = Path(f"/tmp/Modelfile.{args.shape}")
            mf.write_text(f"FROM {args.gguf}\n")
            env = dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{ol.port}", HOME=str(home))
            r = subprocess.run([args.ollama, "create", name, "-f", str(mf)], env=env, capture_output=True, text=True)
            print("create:", r.returncode, r.stderr[-300:], flush=True)
            ol.stop()
        for cfg in args.plan.split():
            if time.monotonic() > t_end - 20:
                print("deadline: stopping before", cfg, flush=True)
                break
            t = time.monotonic()
            row = run_ollama(args, handle, ol, name, cfg) if ol is not None else run_server(args, handle, cfg)
            row.update(meta)
            rows.append(row)
            out.write_text(json.dumps(rows, indent=1))
            print(f"{cfg}: {time.monotonic() - t:.1f}s offloaded={row.get('offloaded')}/{row.get('layers')} "
                  f"proc={row.get('process_mib', 0):.0f} bufs={row.get('buffers')} slot={row.get('n_ctx_slot')} "
                  f"cmd={row.get('command', '')[-160:]}", flush=True)
    finally:
        if ol is not None:
            ol.stop()
        if holder is not None:
            os.killpg(holder.pid, signal.SIGKILL)
        shutil.rmtree("/tmp/olhome", ignore_errors=True)


if __name__ == "__main__":
    main()
