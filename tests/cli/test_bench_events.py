"""`ollama-deck bench` with a point whose model spilled to the CPU: the server's events are printed per point
and summed up for the run, are in --json's points and --markdown's report, and the history keeps them. A
real process, the stand-in `ollama` on PATH (its /api/ps reports the spill as the real one does)."""

from __future__ import annotations

import json
from pathlib import Path

from app.adapters.storage.history import BenchHistory
from app.core.watch.events import EventKind
from tests.cli.test_bench_cli import bench
from tests.fakes.ollama.server_fixtures import free_port


def test_the_events_of_each_point_are_printed_exported_and_kept(tmp_path: Path, standin_ollama: Path) -> None:
    out, report = tmp_path / "out.json", tmp_path / "out.md"
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}", "--managed",
                   "--parallel", "1,2", "--requests", "4", "--num-predict", "8", "--no-think", "--json", str(out),
                   "--markdown", str(report), FAKE_OLLAMA_GPU_MIB="1500")  # parallel 2 needs 1694 MiB
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("What the server did without saying so, point by point:")
    assert lines[at + 1] == "parallel 2: 1 event; not stable (layers on the CPU)"
    # Said first by whichever source saw it first: /api/ps's host share, or the server log's layer count.
    assert any(said in lines[at + 2] for said in ("WARNING layers on the CPU: qwen3:0.6b holds 0.2 GiB in host memory",
                                                  "WARNING layers on the CPU: 3 of 29 layers run on the CPU"))
    assert lines[at + 3].startswith("      loaded models: qwen3:0.6b: size ")
    summary = lines.index("Server events in this run: 1 event")
    assert lines[summary + 1] == "  1 × layers on the CPU (warning, not stable) at parallel 2"
    assert lines[summary + 2].startswith("    what to do: Free GPU memory")
    assert "Recommended: parallel 1" in result.stdout
    points = json.loads(out.read_text())["points"]
    assert [p["event_count"] for p in points] == [0, 1] and points[1]["spoiled_by"] == ["layers_on_cpu"]
    assert points[1]["events"][0]["evidence"][0]["source"] == "loaded"
    markdown = report.read_text()
    assert "## Server events" in markdown and "| warning | layers on the CPU |" in markdown
    [summary_row] = BenchHistory(tmp_path / "history.sqlite3").list_runs()
    kept = BenchHistory(tmp_path / "history.sqlite3").load(summary_row.run_id)
    assert [[e.kind for e in r.events] for r in kept.results] == [[], [EventKind.LAYERS_ON_CPU]]
