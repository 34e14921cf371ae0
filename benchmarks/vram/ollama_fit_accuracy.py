"""The app's price of each load measured on the real Ollama 0.32.15 and llama-server on an H200, whole and
as a simulated 24 GiB card (h200_spill_ollama.json), against what the GPU held.

Every row is priced the way the app prices it: the backend's planner (Ollama 0.32.15's own batch and
context, llama-server's default context and --fit) and the estimator, fed the GPU as NVML read it before
the load (total, other processes' memory, the driver's reserve) and the runtime allowance learnt from the
first row of the card (NVML process memory minus the logged CUDA0 buffers of that one load). The table
prints, per row: the batch and context per slot planned vs the command Ollama logged, the layers on the GPU
priced vs llama.cpp's `offloaded N/M`, the CUDA0 compute buffer priced vs logged, and the process total
priced vs NVML's per-process figure (MiB and %).

Usage: python benchmarks/vram/ollama_fit_accuracy.py [--allowance learned|default] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.backends import registry  # noqa: E402
from app.core.errors import EstimateError  # noqa: E402
from app.core.memory.allowance import DEFAULT_ALLOWANCE, AllowanceSource, RuntimeAllowance  # noqa: E402
from app.core.memory.estimator import GpuMemory, VramEstimate  # noqa: E402
from app.core.memory.host import HostMemory  # noqa: E402
from app.core.memory.launch_plan import LaunchPlan  # noqa: E402
from app.core.memory.pricing import price_load  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402
from app.core.units import GIB, MIB  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import shape_for  # noqa: E402

HERE = Path(__file__).resolve().parent
ROWS = HERE / "h200_spill_ollama.json"
OLLAMA_VERSION = "0.32.15"
LOGS = HERE / "h200_spill_logs"
HOST_RAM_BYTES = 128 * GIB  # the machine the loads ran on, where its log does not say what was free
SYSTEM_MEMORY_RE = re.compile(r'msg="system memory" total="([\d.]+) GiB" free="([\d.]+) GiB"')


def host_of(row: dict) -> HostMemory:
    """The host's RAM as Ollama logged it before this load ("system memory"), else the machine's 128 GiB."""
    log = LOGS / f"{row['mode'].replace('llama-server', 'server')}_{row['shape']}_{row['parallel']}_{row['ctx']}_{row['kv']}.log"
    if row["mode"] == "ollama" and log.exists() and (m := SYSTEM_MEMORY_RE.search(log.read_text(errors="replace"))):
        return HostMemory(int(float(m.group(2)) * GIB), int(float(m.group(1)) * GIB))
    return HostMemory(HOST_RAM_BYTES, HOST_RAM_BYTES)


def learnt_allowance(rows: list[dict]) -> RuntimeAllowance:
    """The allowance the app learns from the first load it sees on the card: NVML minus the CUDA0 buffers."""
    first = next(r for r in rows if r.get("process_mib"))
    gpu = sum(v for k, v in first["buffers"].items() if k.startswith("CUDA0"))
    return RuntimeAllowance(int((first["process_mib"] - gpu) * MIB), AllowanceSource.LEARNED, first["gpu"],
                            first["driver"], loads=1)


def gpu_of(row: dict, allowance: RuntimeAllowance) -> GpuMemory:
    b = row["before"]
    return GpuMemory.with_allowance(int(b["total_mib"] * MIB), int(b["used_mib"] * MIB), int(b["reserved_mib"] * MIB),
                                    allowance)


def priced(row: dict, allowance: RuntimeAllowance) -> tuple[LaunchPlan, VramEstimate]:
    backend = registry.get("ollama" if row["mode"] == "ollama" else "llama_server")
    ctx = None if row["ctx"] == "default" else int(row["ctx"])
    settings = ServerSettings(num_parallel=row["parallel"], context_length=ctx, kv_cache_type=row["kv"],
                              flash_attention="on")
    shape = shape_for(row["shape"])
    gpu = gpu_of(row, allowance)
    version = OLLAMA_VERSION if row["mode"] == "ollama" else None
    priced = price_load(backend.planner, settings, shape, gpu, version, host_of(row))
    return priced.plan, priced.estimate


def logged_batch(row: dict) -> int | None:
    m = re.search(r" -b (\d+)", row.get("command", ""))
    return int(m.group(1)) if m else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--allowance", choices=("learned", "default"), default="learned")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = json.loads(ROWS.read_text())
    allowance = learnt_allowance(rows) if args.allowance == "learned" else DEFAULT_ALLOWANCE
    print(f"runtime allowance: {allowance.describe()}")
    head = ("shape", "card", "mode", "np", "ctx", "kv", "batch", "ctx/slot", "layers", "compute MiB",
            "process MiB (priced / NVML)", "error MiB", "error %", "verdict")
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    errors, layer_misses = [], 0
    for row in rows:
        try:
            plan, est = priced(row, allowance)
        except EstimateError as exc:
            print(f"{row['shape']} {row['config']}: cannot price: {exc.message}")
            continue
        sum(v for k, v in row["buffers"].items() if k.startswith("CUDA0"))
        real = row.get("process_mib") or 0.0
        loaded = bool(real)
        b = logged_batch(row)
        batch = f"{plan.num_batch}/{b}" if b else f"{plan.num_batch}"
        ctx = f"{plan.num_ctx}/{row.get('n_ctx_slot') or '-'}"
        layers = f"{est.layers_on_gpu}/{row.get('offloaded', '-')}"
        if row.get("offloaded") is not None and est.layers_on_gpu != row["offloaded"]:
            layer_misses += 1
        compute = f"{est.compute_bytes / MIB:.0f}/{row['buffers'].get('CUDA0 compute', 0):.0f}"
        if loaded:
            err = est.total_gpu_bytes / MIB - real
            errors.append(abs(err))
            proc, e_mib, e_pct = f"{est.total_gpu_bytes / MIB:.0f} / {real:.0f}", f"{err:+.0f}", f"{100 * err / real:+.2f}"
        else:
            proc, e_mib, e_pct = f"{est.total_gpu_bytes / MIB:.0f} / killed", "-", "-"
        cells = (row["shape"], "24G" if row["card"] != "whole" else "whole", row["mode"], str(row["parallel"]),
                 row["ctx"], row["kv"], batch, ctx, layers, compute, proc, e_mib, e_pct,
                 est.verdict.value + ("" if loaded else f" (host {est.host_verdict.value if est.host_verdict else '?'})"))
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(f"{c:>10}" for c in cells))
    if errors:
        print(f"\n{len(errors)} loaded rows: process total error median {statistics.median(errors):.0f} MiB, "
              f"worst {max(errors):.0f} MiB; layer count differs on {layer_misses} rows")


if __name__ == "__main__":
    main()
