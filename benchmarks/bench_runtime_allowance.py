"""The process total priced with the default runtime allowance and with the one learnt from the loads, against
what NVML read, over the H200's recorded llama-server loads (benchmarks/vram/h200_llama_server_run2.json: 35
Qwen3-14B-shaped Q4_K_M loads, driver 580.159.04).

The learnt figure comes out of the app's own path: each row's buffer lines read by llama-server's log reader
into the RuntimeLearner with NVML's process reading after the load (and the peak reading while serving, which the
learner must ignore), one load after the other; the figure priced is the learner's at the end (the median of the
last five loads). Each row is then priced by the estimator with GpuMemory.with_allowance(...).

With --heldout the figure learnt on those loads prices the 48 held-out loads of four other model shapes
(h200_llama_server_heldout.json: Llama-3.1-8B, Qwen2.5-7B, Gemma-3-12B, Mistral-7B), as a user's card learnt on
one model prices the next.

Usage: python benchmarks/bench_runtime_allowance.py [--rows N] [--heldout]   (N: learn from the first N rows only;
default: all)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.backends.llama_server.log_signals import LlamaServerLogSignals  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.core.memory.allowance import DEFAULT_ALLOWANCE, RuntimeAllowance  # noqa: E402
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate  # noqa: E402
from app.core.telemetry import GpuInfo, GpuSample  # noqa: E402
from app.core.units import MIB  # noqa: E402
from app.services.runtime_learner import RuntimeLearner  # noqa: E402

RUN2 = ROOT / "benchmarks/vram/h200_llama_server_run2.json"
SHOW = ROOT / "tests/data/show_qwen3_14b.json"
MODEL_BYTES = 9_000_210_784


def row_lines(r: dict) -> list[str]:
    """The row's load as llama-server logs it at -lv 4."""
    return [f"load_tensors:   CPU_Mapped model buffer size = {r['cpu_mapped_model']:8.2f} MiB",
            f"load_tensors:        CUDA0 model buffer size = {r['cuda0_model']:8.2f} MiB",
            f"llama_kv_cache:      CUDA0 KV buffer size = {r['cuda0_kv']:8.2f} MiB",
            f"sched_reserve:      CUDA0 compute buffer size = {r['cuda0_compute']:8.2f} MiB",
            f"sched_reserve:  CUDA_Host compute buffer size = {r['cuda_host_compute']:8.2f} MiB",
            f"srv    load_model: initializing, n_slots = {r['parallel']}, n_ctx_slot = {r['ctx_per_slot']}, "
            "kv_unified = 'false'"]


def learn(rows: list[dict], gpu: GpuInfo) -> RuntimeAllowance:
    learner = RuntimeLearner(None, gpu)
    for r in rows:
        learner.follow(LlamaServerLogSignals())
        for line in row_lines(r):
            learner.feed_log(line)
        for mib in (r["process_mib"], r["peak_mib"]):
            learner.feed_gpu(GpuSample(t=0.0, memory_used_mib=mib, memory_total_mib=gpu.memory_total_mib,
                                       server_memory_mib=mib, utilization_pct=0.0, power_w=0.0, temperature_c=0.0))
    return learner.allowance()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="learn from the first N rows only")
    parser.add_argument("--heldout", action="store_true", help="price the held-out shapes' loads")
    args = parser.parse_args()
    data = json.loads(RUN2.read_text())
    rows = [r for r in data["rows"] if r["status"] == "ok"]
    gpu = GpuInfo(data["meta"]["gpu"], data["meta"]["driver"], data["meta"]["gpu_total_mib"])
    learnt = learn(rows[:args.rows] if args.rows else rows, gpu)
    if args.heldout:
        from benchmarks.vram.accuracy import measured_rows, shape_for

        rows = measured_rows(heldout=True)
    total = int(gpu.memory_total_mib * MIB)
    print(f"GPU {gpu.name}, driver {gpu.driver}; {len(rows)} loads priced")
    print(f"default: {DEFAULT_ALLOWANCE.describe()}")
    print(f"learnt:  {learnt.describe()}")
    print()
    print(f"{'shape':>12} {'ctx':>6} {'par':>3} {'kv':>5} {'fa':>3} {'ub':>5} {'NVML':>8} {'default':>8} {'err':>6} {'err%':>6}"
          f" {'learnt':>8} {'err':>6} {'err%':>6}")
    errors: dict[str, list[float]] = {"default": [], "learnt": []}
    for r in rows:
        settings = LoadSettings(num_ctx=r["ctx_per_slot"], parallel=r["parallel"], kv_cache_type=r["kv_cache"],
                                flash_attention=r["flash_attention"] == "on", num_batch=r["batch"], num_ubatch=r["ubatch"])
        shape = shape_for(r["shape"]) if args.heldout else shape_from_show(json.loads(SHOW.read_text()), MODEL_BYTES)
        cells = []
        for name, allowance in (("default", DEFAULT_ALLOWANCE), ("learnt", learnt)):
            priced = estimate(shape, settings, GpuMemory.with_allowance(total, allowance=allowance)).total_gpu_bytes / MIB
            err = priced - r["process_mib"]
            errors[name].append(err)
            cells.append(f"{priced:8.0f} {err:+6.0f} {100 * err / r['process_mib']:+6.2f}")
        print(f"{r.get('shape', 'qwen3-14b'):>12} {r['ctx_per_slot']:>6} {r['parallel']:>3} {r['kv_cache']:>5} {r['flash_attention']:>3} {r['ubatch']:>5}"
              f" {r['process_mib']:8.0f} {cells[0]} {cells[1]}")
    print()
    for name, errs in errors.items():
        pct = [100 * e / r["process_mib"] for e, r in zip(errs, rows, strict=True)]
        print(f"{name:8} median {statistics.median(errs):+7.1f} MiB, worst {max(errs, key=abs):+7.1f} MiB "
              f"({max(pct, key=abs):+.2f} %), within 64 MiB: {sum(abs(e) <= 64 for e in errs)}/{len(errs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
