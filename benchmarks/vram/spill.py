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
- every Ollama load of h200_spill_*.json (measure_ollama.py's rows: the real Ollama 0.32.15 on an H200, whole or
  with a 24 GiB card simulated), placed by --fit on the card as NVML's memory info v2 read it before the load
  (total, used, the driver's reserve) with the runtime allowance learnt from those loads; the compute buffer is
  compared at the server's own layer count.

Usage: python benchmarks/vram/spill.py
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import SHOW_FILES, shape_for  # noqa: E402

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


def _arg(argv: list[str], flag: str, default: str) -> str:
    return argv[argv.index(flag) + 1] if flag in argv else default


def measured_settings(r: dict) -> LoadSettings:
    """The load a measured row's llama-server command line asks for (measure_ollama.py rows)."""
    argv = shlex.split(r["command"])
    parallel = int(_arg(argv, "-np", "1"))
    batch = int(_arg(argv, "-b", "2048"))
    return LoadSettings(num_ctx=int(_arg(argv, "-c", "4096")) // parallel, parallel=parallel,
                        kv_cache_type=_arg(argv, "--cache-type-k", "f16"),
                        flash_attention=_arg(argv, "--flash-attn", "on") == "on", num_batch=batch,
                        num_ubatch=int(_arg(argv, "-ub", str(batch))))


def measured_loads() -> list[dict]:
    """Every Ollama load of h200_spill_*.json whose llama-server logged its layer count (a load that failed after
    placing its layers has no buffers)."""
    rows = []
    for path in sorted(HERE.glob("h200_spill_*.json")):
        data = json.loads(path.read_text())
        for r in data if isinstance(data, list) else data["rows"]:
            if r.get("mode") == "ollama" and r.get("command") and r.get("offloaded"):
                rows.append(r)
    return rows


def runtime_allowance_mib(rows: list[dict]) -> float:
    """The card's runtime allowance as the app learns it: NVML's process memory less llama.cpp's GPU buffers."""
    spans = sorted(r["process_mib"] - sum(v for k, v in r["buffers"].items() if k.startswith("CUDA0"))
                   for r in rows if r.get("process_mib") and r.get("buffers", {}).get("CUDA0 compute"))
    return spans[len(spans) // 2]


def card_of(r: dict, runtime_mib: float) -> GpuMemory:
    """The card as NVML's memory info v2 read it before the load: total, used by others, the driver's reserve."""
    before = r["before"]
    return GpuMemory(int(before["total_mib"] * MIB), int(before["used_mib"] * MIB), int(runtime_mib * MIB),
                     reserved_bytes=int(before["reserved_mib"] * MIB))


def measured_rows() -> list[str]:
    rows = measured_loads()
    if not rows:
        return []
    runtime = runtime_allowance_mib(rows)
    out = []
    for r in rows:
        shape = shape_for(r["shape"])
        s = measured_settings(r)
        gpu = card_of(r, runtime)
        fit = estimate(shape, s, gpu)  # --fit's placement on the card as it was
        at_real = estimate(shape, replace(s, num_gpu=r["offloaded"]), gpu)  # the buffers at the server's count
        card = "24 GiB" if r.get("hold_free_mib") else "whole"
        name = f"{r['shape']} {r['config']} ({card})"
        out.append(_line(name, (fit.layers_on_gpu, r["offloaded"]), None,
                         (at_real.compute_bytes / MIB, r.get("buffers", {}).get("CUDA0 compute")),
                         (fit.total_gpu_bytes / MIB, r.get("process_mib") or None)))
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
