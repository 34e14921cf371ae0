"""Compare the VRAM estimator with every measured llama-server row and print the tables.

Two tables, kept apart on purpose:
- in-sample: the Qwen3-14B Q4_K_M rows (run 2 and the six reference rows) that several of the
  estimator's constants were fitted on; agreement there shows the fit, not the model;
- held-out: rows measured on model shapes the estimator was never fitted to (Llama-3.1-8B,
  Qwen2.5-7B, Gemma-3-12B text model, Mistral-7B; h200_llama_server_heldout.json). Their CUDA
  runtime overhead is NOT re-measured from these rows: the in-sample median is used, as a user
  would use one number per card.
A third table shows the mixture-of-experts Qwen3-30B-A3B rows. Those in h200_llama_server_moe.json
were measured before the estimator knew anything MoE-specific beyond reading the expert keys
(that out-of-sample table is accuracy_moe_before.txt); two MoE terms were then fitted on them.
Those in h200_llama_server_moe_check.json were measured afterwards, on settings the terms were not
fitted on (micro-batches 256 and 1024, 16 slots, a 40k context, a long flash-off prompt).

Each row's setting is rebuilt for the estimator from the model's /api/show JSON in tests/data/
(the tensor list, as Ollama returns with verbose). The table shows predicted vs measured logged
GPU buffers (model + KV + compute), the process total (NVML, after load) and the peak while
serving a long prompt. A last summary repeats the held-out rows with the tensor list removed, so
the estimator splits weights from the file size (Ollama's /api/show without verbose).

Usage: python benchmarks/vram/accuracy.py [--table in-sample|heldout|moe|both]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.core.memory.estimator import DEFAULT_RUNTIME_OVERHEAD_BYTES, GpuMemory, LoadSettings, estimate  # noqa: E402
from app.core.memory.llama_cpp import peak_extra_bytes, plan_context  # noqa: E402
from app.core.model_shape import ModelShape  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.core.units import MIB  # noqa: E402

HERE = Path(__file__).resolve().parent
H200_TOTAL_MIB = 143771
CALIBRATION_SHAPE = "qwen3-14b"
MOE_SHAPES = ("qwen3-30b-a3b",)
HELDOUT_FILE = "h200_llama_server_heldout.json"
# shape name -> (/api/show JSON in tests/data, model size on disk in bytes)
SHOW_FILES: dict[str, tuple[str, int]] = {
    "qwen3-14b": ("show_qwen3_14b.json", 9_000_210_784),
    "llama3.1-8b": ("show_llama3_1_8b_tensors.json", 4_915_500_384),
    "qwen2.5-7b": ("show_qwen2_5_7b.json", 4_680_225_664),
    "gemma3-12b": ("show_gemma3_12b_text.json", 7_299_456_064),
    "mistral-7b": ("show_mistral_7b.json", 4_372_715_520),
    "qwen3-30b-a3b": ("show_qwen3_30b_a3b.json", 18_553_835_456),
}


@cache
def shape_for(name: str, with_tensors: bool = True) -> ModelShape:
    """The estimator's view of one measured model shape."""
    file, size = SHOW_FILES[name]
    show = json.loads((ROOT / "tests/data" / file).read_text())
    if not with_tensors:
        show = {k: v for k, v in show.items() if k != "tensors"}
    return shape_from_show(show, size)


def load_rows() -> list[dict]:
    """Measured rows from every results file, in one shape (MiB), each tagged with its model shape."""
    rows = []
    for path in sorted(HERE.glob("h200_*.json")):
        if path.name.startswith("h200_spill"):  # Ollama loads, compared by ollama_fit_accuracy.py
            continue
        data = json.loads(path.read_text())
        for r in data["rows"]:
            if "cuda_model_buffer_mib" in r:  # the reference file's field names
                r = dict(r, cuda0_model=r["cuda_model_buffer_mib"], cuda0_kv=r["cuda_kv_buffer_mib"],
                         cuda0_compute=r["cuda_compute_buffer_mib"], status="ok", long_prompt_tokens=70)
            rows.append(dict(r, source=path.name, shape=r.get("shape", CALIBRATION_SHAPE)))
    return rows


def measured_rows(heldout: bool | None = None) -> list[dict]:
    """Rows where llama-server loaded and every number was read (None: all, else in-sample/held-out
    dense shapes; the MoE rows come from moe_rows)."""
    rows = [r for r in load_rows() if r.get("status") == "ok" and r.get("process_mib") and r.get("cuda0_compute")]
    if heldout is None:
        return rows
    dense = [r for r in rows if r["shape"] not in MOE_SHAPES]
    return [r for r in dense if (r["shape"] != CALIBRATION_SHAPE) == heldout]


def moe_rows() -> list[dict]:
    """Measured rows of the mixture-of-experts shapes."""
    return [r for r in measured_rows() if r["shape"] in MOE_SHAPES]


def settings_for(r: dict) -> LoadSettings:
    """The estimator setting equal to one measured llama-server command line."""
    return LoadSettings(num_ctx=r["ctx_per_slot"], parallel=r["parallel"], kv_cache_type=r["kv_cache"],
                        flash_attention=r["flash_attention"] == "on", num_batch=r["batch"], num_ubatch=r["ubatch"])


def runtime_overhead_mib(rows: list[dict]) -> float:
    """Median of process memory minus logged GPU buffers: the CUDA runtime on this card."""
    return statistics.median(r["process_mib"] - r["cuda0_model"] - r["cuda0_kv"] - r["cuda0_compute"] for r in rows)


def compare(rows: list[dict], overhead_mib: float, with_tensors: bool = True) -> list[dict]:
    """One result per row: predicted and measured MiB and the errors."""
    gpu = GpuMemory(total_bytes=H200_TOTAL_MIB * MIB, runtime_overhead_bytes=int(overhead_mib * MIB))
    out = []
    for r in rows:
        shape = shape_for(r["shape"], with_tensors)
        s = settings_for(r)
        est = estimate(shape, s, gpu)  # llama.cpp's --fit placement
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
            "err_compute_mib": est.compute_bytes / MIB - r["cuda0_compute"],
            "err_model_mib": est.weights_gpu_bytes / MIB - r["cuda0_model"],
            "err_kv_mib": est.kv_gpu_bytes / MIB - r["cuda0_kv"],
            "process": r["process_mib"], "pred_process": pred_process,
            "err_process_mib": pred_process - r["process_mib"],
            "err_process_pct": 100 * (pred_process - r["process_mib"]) / r["process_mib"],
            "peak": r.get("peak_mib"), "pred_peak": pred_peak,
            "err_peak_mib": pred_peak - r["peak_mib"] if r.get("peak_mib") else None,
        })
    return out


def summary(results: list[dict]) -> dict[str, float]:
    """Median and worst errors of a set of compared rows."""
    errs = [abs(x["err_buffers_pct"]) for x in results]
    proc = [abs(x["err_process_mib"]) for x in results]
    peaks = [abs(x["err_peak_mib"]) for x in results if x["err_peak_mib"] is not None]
    return {
        "rows": len(results), "buffers_median_pct": statistics.median(errs), "buffers_worst_pct": max(errs),
        "process_median_mib": statistics.median(proc), "process_worst_mib": max(proc),
        "process_worst_pct": max(abs(x["err_process_pct"]) for x in results),
        "peak_median_mib": statistics.median(peaks) if peaks else float("nan"),
        "peak_worst_mib": max(peaks) if peaks else float("nan"),
        "model_worst_mib": max(abs(x["err_model_mib"]) for x in results),
        "kv_worst_mib": max(abs(x["err_kv_mib"]) for x in results),
        "compute_worst_mib": max(abs(x["err_compute_mib"]) for x in results),
    }


def print_table(title: str, results: list[dict]) -> None:
    """Row-by-row comparison, then its summary."""
    head = (f"{'shape':<11} {'ctx':>6} {'par':>3} {'kv':>5} {'fa':>3} {'ub':>4} | {'buffers':>8} {'pred':>8} {'err%':>6} | "
            f"{'compute':>7} {'pred':>7} | {'process':>7} {'pred':>7} {'errMiB':>6} | {'prompt':>6} {'peak':>7} "
            f"{'pred':>7} {'errMiB':>6}")
    print(title)
    print(head)
    print("-" * len(head))
    for x in results:
        r = x["row"]
        peak = (f"{r.get('long_prompt_tokens', 0):>6} {x['peak']:7.0f} {x['pred_peak']:7.0f} {x['err_peak_mib']:+6.0f}"
                if x["peak"] else f"{'':>6} {'':>7} {'':>7} {'':>6}")
        print(f"{r['shape']:<11} {r['ctx_per_slot']:>6} {r['parallel']:>3} {r['kv_cache']:>5} {r['flash_attention']:>3} "
              f"{r['ubatch']:>4} | {x['buffers']:8.1f} {x['pred_buffers']:8.1f} {x['err_buffers_pct']:+6.2f} | "
              f"{x['compute']:7.1f} {x['pred_compute']:7.1f} | "
              f"{x['process']:7.0f} {x['pred_process']:7.0f} {x['err_process_mib']:+6.0f} | {peak}")
    print()
    print_summary(results)


def print_summary(results: list[dict], label: str = "") -> None:
    """The summary lines of one table."""
    s = summary(results)
    files = ", ".join(sorted({x["row"]["source"] for x in results}))
    shapes = ", ".join(sorted({x["row"]["shape"] for x in results}))
    print(f"{label}rows compared: {s['rows']} (shapes: {shapes}; files: {files})")
    print(f"{label}model+KV+compute buffers: median |err| {s['buffers_median_pct']:.3f} %, worst "
          f"{s['buffers_worst_pct']:.3f} % (target 3 % / 8 %); worst model {s['model_worst_mib']:.1f} MiB, "
          f"KV {s['kv_worst_mib']:.1f} MiB, compute {s['compute_worst_mib']:.1f} MiB")
    print(f"{label}process total: median |err| {s['process_median_mib']:.0f} MiB, worst {s['process_worst_mib']:.0f} MiB"
          f" = {s['process_worst_pct']:.2f} % (target 8 % or 600 MiB)")
    print(f"{label}peak while serving: median |err| {s['peak_median_mib']:.0f} MiB, worst {s['peak_worst_mib']:.0f} MiB")


def main() -> None:
    """Print the in-sample and held-out accuracy tables and their summaries."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", choices=("in-sample", "heldout", "moe", "both"), default="both")
    args = ap.parse_args()
    in_sample = measured_rows(heldout=False)
    overhead = runtime_overhead_mib(in_sample)
    if args.table in ("in-sample", "both"):
        print_table("IN-SAMPLE (Qwen3-14B shape; several constants were fitted on these rows)",
                    compare(in_sample, overhead))
        print(f"runtime overhead on this H200 (median process - buffers, in-sample): {overhead:.0f} MiB")
        default = compare(in_sample, DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB)
        print(f"process total with the estimator's consumer-card default runtime overhead "
              f"({DEFAULT_RUNTIME_OVERHEAD_BYTES / MIB:.0f} MiB) instead: worst |err| "
              f"{max(abs(x['err_process_mib']) for x in default):.0f} MiB")
        print(repeatability())
        print_not_loaded()
    heldout = measured_rows(heldout=True)
    if args.table in ("heldout", "both") and heldout:
        if args.table == "both":
            print()
        print_table("HELD-OUT (shapes never used for fitting; runtime overhead taken from the in-sample rows)",
                    compare(heldout, overhead))
        print(f"runtime overhead measured on the held-out rows (not used above): {runtime_overhead_mib(heldout):.0f} MiB")
        for name in sorted({r["shape"] for r in heldout}):
            print_summary(compare([r for r in heldout if r["shape"] == name], overhead), f"  {name}: ")
        print_summary(compare(heldout, overhead, with_tensors=False), "without tensor list (file-size split): ")
    moe = moe_rows()
    if args.table in ("moe", "both") and moe:
        if args.table == "both":
            print()
        print_table("MIXTURE OF EXPERTS (Qwen3-30B-A3B; two MoE terms fitted on the h200_llama_server_moe.json "
                    "rows, checked on the _moe_check rows; before fitting: accuracy_moe_before.txt)",
                    compare(moe, overhead))
        for source in sorted({r["source"] for r in moe}):
            print_summary(compare([r for r in moe if r["source"] == source], overhead), f"  {source}: ")
        print_summary(compare(moe, overhead, with_tensors=False), "without tensor list (file-size split): ")


def print_not_loaded() -> None:
    """Configurations llama-server refused, with its reason."""
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
