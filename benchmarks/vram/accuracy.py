"""Compare the VRAM estimator with every measured llama-server row and print the table.

Reads the raw measurement files in this folder (h200_*.json), rebuilds each row's setting for
the estimator with the Qwen3-14B Q4_K_M tensor list from tests/data/show_qwen3_14b.json, and
prints predicted vs measured: the logged GPU buffers (model + KV + compute), the process total
(NVML, after load) and the peak while serving a long prompt. The CUDA runtime overhead is the
one parameter that depends on the card and driver: the table uses the median measured on this
H200 (printed), the estimator's default is for consumer cards.

Usage: python benchmarks/vram/accuracy.py [--csv]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.core.estimator import DEFAULT_RUNTIME_OVERHEAD_BYTES, GpuMemory, LoadSettings, OllamaEra, estimate  # noqa: E402
from app.core.estimator_memory import peak_extra_bytes, plan_context  # noqa: E402
from app.core.model_shape import shape_from_show  # noqa: E402

HERE = Path(__file__).resolve().parent
MIB = 1024 * 1024
H200_TOTAL_MIB = 143771


def load_rows() -> list[dict]:
    """Measured rows from every results file, in one shape (MiB)."""
    rows = []
    for path in sorted(HERE.glob("h200_*.json")):
        data = json.loads(path.read_text())
        for r in data["rows"]:
            if "cuda_model_buffer_mib" in r:  # the reference file's field names
                r = dict(r, cuda0_model=r["cuda_model_buffer_mib"], cuda0_kv=r["cuda_kv_buffer_mib"],
                         cuda0_compute=r["cuda_compute_buffer_mib"], status="ok", long_prompt_tokens=70)
            rows.append(dict(r, source=path.name))
    return rows


def measured_rows() -> list[dict]:
    """Rows where llama-server loaded and every number was read."""
    return [r for r in load_rows() if r.get("status") == "ok" and r.get("process_mib") and r.get("cuda0_compute")]


def settings_for(r: dict) -> LoadSettings:
    """The estimator setting equal to one measured llama-server command line."""
    return LoadSettings(num_ctx=r["ctx_per_slot"], parallel=r["parallel"], kv_cache_type=r["kv_cache"],
                        flash_attention=r["flash_attention"] == "on", num_batch=r["batch"], num_ubatch=r["ubatch"])


def runtime_overhead_mib(rows: list[dict]) -> float:
    """Median of process memory minus logged GPU buffers: the CUDA runtime on this card."""
    return statistics.median(r["process_mib"] - r["cuda0_model"] - r["cuda0_kv"] - r["cuda0_compute"] for r in rows)


def compare(rows: list[dict], overhead_mib: float) -> list[dict]:
    """One result per row: predicted and measured MiB and the errors."""
    shape = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
    gpu = GpuMemory(total_bytes=H200_TOTAL_MIB * MIB, runtime_overhead_bytes=int(overhead_mib * MIB))
    out = []
    for r in rows:
        s = settings_for(r)
        est = estimate(shape, s, gpu, OllamaEra.C)
        plan = plan_context(shape, s.num_ctx, s.parallel, s.ubatch)
        extra = peak_extra_bytes(shape, plan, est.kv_cache_type, s.flash_attention, r.get("long_prompt_tokens"))
        buffers = r["cuda0_model"] + r["cuda0_kv"] + r["cuda0_compute"]
        pred_buffers = (est.weights_gpu_bytes + est.kv_gpu_bytes + est.compute_bytes) / MIB
        pred_process = est.total_gpu_bytes / MIB
        pred_peak = (est.total_gpu_bytes + extra) / MIB
        out.append({
            "row": r, "buffers": buffers, "pred_buffers": pred_buffers,
            "err_buffers_pct": 100 * (pred_buffers - buffers) / buffers,
            "compute": r["cuda0_compute"], "pred_compute": est.compute_bytes / MIB,
            "process": r["process_mib"], "pred_process": pred_process,
            "err_process_mib": pred_process - r["process_mib"],
            "err_process_pct": 100 * (pred_process - r["process_mib"]) / r["process_mib"],
            "peak": r.get("peak_mib"), "pred_peak": pred_peak,
            "err_peak_mib": pred_peak - r["peak_mib"] if r.get("peak_mib") else None,
        })
    return out


def main() -> None:
    """Print the accuracy table and its summary."""
    rows = measured_rows()
    overhead = runtime_overhead_mib(rows)
    results = compare(rows, overhead)
    head = (f"{'ctx':>6} {'par':>3} {'kv':>5} {'fa':>3} {'ub':>4} | {'buffers':>8} {'pred':>8} {'err%':>6} | "
            f"{'compute':>7} {'pred':>7} | {'process':>7} {'pred':>7} {'errMiB':>6} | {'prompt':>6} {'peak':>7} "
            f"{'pred':>7} {'errMiB':>6}")
    print(head)
    print("-" * len(head))
    for x in results:
        r = x["row"]
        peak = (f"{r.get('long_prompt_tokens', 0):>6} {x['peak']:7.0f} {x['pred_peak']:7.0f} {x['err_peak_mib']:+6.0f}"
                if x["peak"] else f"{'':>6} {'':>7} {'':>7} {'':>6}")
        print(f"{r['ctx_per_slot']:>6} {r['parallel']:>3} {r['kv_cache']:>5} {r['flash_attention']:>3} {r['ubatch']:>4} | "
              f"{x['buffers']:8.1f} {x['pred_buffers']:8.1f} {x['err_buffers_pct']:+6.2f} | "
              f"{x['compute']:7.1f} {x['pred_compute']:7.1f} | "
              f"{x['process']:7.0f} {x['pred_process']:7.0f} {x['err_process_mib']:+6.0f} | {peak}")
    errs = [abs(x["err_buffers_pct"]) for x in results]
    proc = [abs(x["err_process_mib"]) for x in results]
    proc_pct = [abs(x["err_process_pct"]) for x in results]
    peaks = [abs(x["err_peak_mib"]) for x in results if x["err_peak_mib"] is not None]
    print()
    print(f"rows compared: {len(results)} (files: {', '.join(sorted({x['row']['source'] for x in results}))})")
    print(f"runtime overhead on this H200 (median process - buffers): {overhead:.0f} MiB")
    print(f"model+KV+compute buffers: median |err| {statistics.median(errs):.3f} %, worst {max(errs):.3f} % "
          f"(target 3 % / 8 %)")
    print(f"process total: median |err| {statistics.median(proc):.0f} MiB, worst {max(proc):.0f} MiB = "
          f"{max(proc_pct):.2f} % (target 8 % or 600 MiB)")
    if peaks:
        print(f"peak while serving: median |err| {statistics.median(peaks):.0f} MiB, worst {max(peaks):.0f} MiB")
    default = compare(rows, DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB)
    worst_default = max(abs(x["err_process_mib"]) for x in default)
    print(f"process total with the estimator's consumer-card default runtime overhead "
          f"({DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB:.0f} MiB) instead: worst |err| {worst_default:.0f} MiB")
    print(repeatability())
    seen = set()
    for r in load_rows():
        key = (r["ctx_per_slot"], r["parallel"], r["kv_cache"], r["flash_attention"])
        if r.get("status") != "ok" and key not in seen:
            seen.add(key)
            why = next((ln.split(" E ", 1)[-1] for ln in r.get("log_tail", []) if "requires" in ln), r.get("status"))
            print(f"not loaded: ctx {key[0]} x{key[1]} kv {key[2]} flash attention {key[3]}: {why}")


def repeatability() -> str:
    """How far two runs of the same grid differ in process and peak memory."""
    runs = [json.loads(p.read_text())["rows"] for p in sorted(HERE.glob("h200_llama_server_run*.json"))]
    if len(runs) < 2:
        return "repeat runs: only one run present"
    first = {r["grid_index"]: r for r in runs[0] if r.get("status") == "ok"}
    diffs = [(abs(r["process_mib"] - first[r["grid_index"]]["process_mib"]),
              abs(r["peak_mib"] - first[r["grid_index"]]["peak_mib"]))
             for r in runs[1] if r.get("status") == "ok" and r["grid_index"] in first]
    return (f"repeat runs ({len(diffs)} configurations measured twice): process differs by at most "
            f"{max(d[0] for d in diffs):.0f} MiB, peak by at most {max(d[1] for d in diffs):.0f} MiB")


if __name__ == "__main__":
    main()
