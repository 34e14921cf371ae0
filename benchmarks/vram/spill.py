"""Spilled loads: the estimator against the real ones, layers on the GPU, GPU compute buffer and process memory.

When llama.cpp leaves layers in host memory, big prompt batches still run them on the GPU, and the scheduler copies
that layer's weights and its whole K and V (every cell of every slot) into the GPU compute buffer; --fit measures the
grown buffer when it picks the layer count. This prints, per spilled load, what the estimator prices and what the
server did:

- the H200 run of Ollama 0.32.15 on a simulated 24 GiB card (spill_reported_ollama_h200.json: layer counts and the
  two compute buffers it reported), priced through the same path as every surface (pricing.price with Ollama's
  planner) on that card (its total, nvidia-smi's used, the driver's reserve, the learnt runtime allowance), beside
  what the estimator priced before the reserve and the copies were modelled;
- the recorded CUDA llama-server with 20 of 33 layers on the GPU (tests/data/gpu/: its log and NVML's reading of
  its process), at its forced layer count;
- every spilled row of h200_spill_*.json (measure.py's row format) where present: at the row's own layer count,
  and through --fit where the row carries the card's free memory (`gpu_free_mib`, `gpu_reserved_mib`).

Usage: python benchmarks/vram/spill.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import SHOW_FILES, settings_for, shape_for  # noqa: E402

from app.backends.ollama.planner import OLLAMA_PLANNER  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.core.memory.estimator import GpuMemory, LoadSettings, estimate  # noqa: E402
from app.core.memory.pricing import price  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402
from app.core.units import MIB  # noqa: E402

HERE = Path(__file__).resolve().parent
H200_TOTAL_MIB = 143771
H200_RUNTIME_MIB = 592
HEADER = (f"{'load':44} {'layers est/real':>15} {'before':>6} | {'compute est':>11} {'real':>7} {'err %':>6} | "
          f"{'process est':>11} {'real':>7}")


def _fmt(v: float | None, width: int, digits: int = 0) -> str:
    return f"{v:{width}.{digits}f}" if v is not None else f"{'—':>{width}}"


def _line(name: str, layers: tuple[int, int | None], before: int | None, compute: tuple[float, float | None],
          process: tuple[float | None, float | None]) -> str:
    est_c, real_c = compute
    err = 100 * (est_c - real_c) / real_c if real_c else None
    lay = f"{layers[0]}/{layers[1] if layers[1] is not None else '—'}"
    mark = "" if layers[1] is None or layers[0] == layers[1] else "  ← layers differ"
    return (f"{name:44} {lay:>15} {before if before is not None else '—':>6} | {_fmt(est_c, 11)} {_fmt(real_c, 7)} "
            f"{_fmt(err, 6, 1)} | {_fmt(process[0], 11)} {_fmt(process[1], 7)}{mark}")


def ollama_rows() -> list[str]:
    data = json.loads((HERE / "spill_reported_ollama_h200.json").read_text())
    card = data["card"]
    others = card["total_mib"] - card["free_mib_nvidia_smi"] - card["reserved_mib"]
    gpu = GpuMemory(card["total_mib"] * MIB, others * MIB, card["runtime_allowance_mib"] * MIB,
                    reserved_bytes=card["reserved_mib"] * MIB)
    shape = shape_from_show(json.loads((ROOT / data["model"]["show"]).read_text()), data["model"]["size_bytes"])
    out = []
    for r in data["rows"]:
        est = price(ServerSettings(num_parallel=r["parallel"], kv_cache_type=r["kv_cache"]), shape, gpu,
                    data["server_version"], planner=OLLAMA_PLANNER)
        name = f"Ollama qwen3-14b np{r['parallel']} {r['kv_cache']} ctx 40960 (24 GiB)"
        out.append(_line(name, (est.layers_on_gpu, r["layers_offloaded"]), r.get("layers_priced_before"),
                         (est.compute_bytes / MIB, r["cuda0_compute"]), (est.total_gpu_bytes / MIB, None)))
    return out


def _logged_mib(log: str, what: str) -> float:
    m = re.search(rf"{what} size =\s+([\d.]+) MiB", log)
    assert m is not None, what
    return float(m.group(1))


def recorded_log_rows() -> list[str]:
    log = (ROOT / "tests/data/gpu/llama_server_cuda_ngl20_lv4.log").read_text()
    file, size = SHOW_FILES["mistral-7b"]
    shape = shape_from_show(json.loads((ROOT / "tests/data" / file).read_text()), size)
    load = LoadSettings(num_ctx=2048, parallel=2, num_batch=2048, num_ubatch=512, flash_attention=False, num_gpu=20)
    est = estimate(shape, load, GpuMemory(143155 * MIB, 0, H200_RUNTIME_MIB * MIB))
    # the same server's NVML process memory right after load (the recording of record_on_gpu.sh)
    nvml = json.loads((ROOT / "tests/data/gpu/nvml_llama.json").read_text())["samples"][0]
    process = sum(p["usedGpuMemory"] for p in nvml["compute_processes"]) / MIB
    return [_line("llama-server mistral-7b -ngl 20 np2 ctx 2048 FA off", (est.layers_on_gpu, 20), None,
                  (est.compute_bytes / MIB, _logged_mib(log, "CUDA0 compute buffer")),
                  (est.total_gpu_bytes / MIB, process))]


def measured_rows() -> list[str]:
    out = []
    for path in sorted(HERE.glob("h200_spill_*.json")):
        for r in json.loads(path.read_text())["rows"]:
            if r.get("status", "ok") != "ok" or not r.get("layers_offloaded") or not r.get("cuda0_compute"):
                continue
            if r["layers_offloaded"] >= r["layers_total"]:
                continue
            shape = shape_for(r.get("shape", "qwen3-14b"))
            s = settings_for(r)
            name = (f"{r.get('shape', 'qwen3-14b')} np{r['parallel']} {r['kv_cache']} ctx {r['ctx_per_slot']} "
                    f"ub {r['ubatch']} FA {r['flash_attention']}")
            forced = estimate(shape, LoadSettings(**{**s.__dict__, "num_gpu": r["layers_offloaded"]}),
                              GpuMemory(H200_TOTAL_MIB * MIB, 0, H200_RUNTIME_MIB * MIB))
            layers: tuple[int, int | None] = (forced.layers_on_gpu, r["layers_offloaded"])
            if "gpu_free_mib" in r:  # the card as the server found it: place by --fit
                reserved = r.get("gpu_reserved_mib", 0)
                others = H200_TOTAL_MIB - r["gpu_free_mib"] - reserved
                fit = estimate(shape, s, GpuMemory(H200_TOTAL_MIB * MIB, int(others * MIB), H200_RUNTIME_MIB * MIB,
                                                   reserved_bytes=int(reserved * MIB)))
                layers = (fit.layers_on_gpu, r["layers_offloaded"])
            out.append(_line(name, layers, None, (forced.compute_bytes / MIB, r["cuda0_compute"]),
                             (forced.total_gpu_bytes / MIB, r.get("process_mib"))))
    return out


def main() -> None:
    print(HEADER)
    print("-" * len(HEADER))
    for line in ollama_rows() + recorded_log_rows() + measured_rows():
        print(line)
    print("\nlayers: the estimate's count / the server's; before: what the estimator priced before the driver's "
          "reserve and the grown compute buffer (the run's own figures). MiB throughout; process: NVML's figure "
          "after load where measured.")


if __name__ == "__main__":
    main()
