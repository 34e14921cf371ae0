"""How long pricing one setting and the whole parallel x context heat-map takes on the GUI thread.

The Server page's fit panel recomputes both 150 ms after the last edit (a timer, never a paint
event); this measures that work for a dense and a mixture-of-experts model on a 24 GiB card.
Target: well under one 60 Hz frame (16 ms).

    python benchmarks/bench_pricing.py [--runs 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.core.memory.estimator import GpuMemory  # noqa: E402
from app.backends.ollama.show import shape_from_show  # noqa: E402
from app.backends.ollama.planner import OLLAMA_PLANNER  # noqa: E402
from app.core.memory.pricing import fit_grid, price  # noqa: E402
from app.core.server.settings import ServerSettings  # noqa: E402
from app.core.units import MIB  # noqa: E402

MODELS = (("qwen3:14b", "show_qwen3_14b.json", 9_000_210_784),
          ("qwen3:30b-a3b", "show_qwen3_30b_a3b.json", 18_553_835_456))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    gpu = GpuMemory(total_bytes=24564 * MIB)
    settings = ServerSettings(context_length=32768, num_parallel=2, kv_cache_type="q8_0", flash_attention=True)
    for name, file, size in MODELS:
        shape = shape_from_show(json.loads((ROOT / "tests/data" / file).read_text()), size)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            price(settings, shape, gpu, "0.12.6", planner=OLLAMA_PLANNER)
            grid = fit_grid(settings, shape, gpu, "0.12.6", planner=OLLAMA_PLANNER)
            times.append((time.perf_counter() - start) * 1e3)
        cells = sum(len(row) for row in grid)
        times.sort()
        print(f"{name:<14} price + heat-map ({cells} cells): median {statistics.median(times):.2f} ms, "
              f"p95 {times[int(0.95 * (len(times) - 1))]:.2f} ms, max {times[-1]:.2f} ms over {args.runs} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
