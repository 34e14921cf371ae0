"""`ollama-deck bench` on a card another program fills (an H200 holding 118 GiB for something else), through its
real entry point with the stand-in `ollama` on PATH and the scripted NVIDIA GPU in place of NVML: Peak VRAM is the
server's own (its processes' memory), the card's is its own column, the estimate is set against the server's
figure in the table's notes, --json, --csv and --markdown; a prompt the server answers without its final record
at every point is named as such, with which request it is and in how many points; a server on this computer that
the sweep only attached to is watched for its process tree, never stopped, and its own memory is Peak VRAM."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import app.adapters.telemetry.nvml as nvml
from app.adapters.storage.history import BenchHistory
from app.cli import main
from app.core.bench.outcome import FailureKind, PointStatus
from app.core.telemetry import GpuInfo
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend

H200 = GpuInfo("NVIDIA H200", "570.133.20", 143_771.0, index=0, uuid="GPU-h200")
OTHERS_MIB = 118_000.0  # another process holding most of the card, as when a 24 GiB card was simulated on it
SERVER_MIB = 1_400.0  # what the stand-in's processes hold, as NVML's process list would say
CUT_TEXT = "Recite the alphabet backwards"  # the stand-in ends its replies to this prompt without the final record
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10", "FAKE_OLLAMA_DECODE_SLOWDOWN": "0.5"}


def busy_h200(t: float, pids: Sequence[int]) -> GpuReading:
    """The card as NVML reads it: the other program's memory plus the server's, whose own share is known only
    through its pids (none given: NaN, as NVML cannot attribute it)."""
    return GpuReading(OTHERS_MIB + SERVER_MIB, 90.0, 400.0, 55.0, SERVER_MIB)


@pytest.fixture
def h200(monkeypatch: pytest.MonkeyPatch) -> ScriptedGpuBackend:
    gpu = ScriptedGpuBackend(H200, script=busy_h200)
    monkeypatch.setattr(nvml, "make_gpu_backend", lambda index=0: gpu)
    return gpu


def _bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *args: str, **env: str) -> int:
    for name, value in {**FAST, **env}.items():
        monkeypatch.setenv(name, value)
    return main(["bench", "--config-dir", str(tmp_path / "cfg"), "--history", str(tmp_path / "history.sqlite3"),
                 "--quiet", *args])


def _prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.txt"
    path.write_text(f"Say hello.\n{CUT_TEXT}, one letter per line.\n")
    return path


def test_the_servers_own_peak_the_cards_and_a_prompt_cut_at_every_point(tmp_path, monkeypatch, capsys,
                                                                         standin_ollama, h200) -> None:
    out, table, report = tmp_path / "out.json", tmp_path / "out.csv", tmp_path / "out.md"
    code = _bench(tmp_path, monkeypatch, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{free_port()}",
                  "--managed", "--parallel", "1,2", "--requests", "4", "--num-predict", "8", "--no-think",
                  "--prompt-file", str(_prompts(tmp_path)), "--json", str(out), "--csv", str(table),
                  "--markdown", str(report), FAKE_OLLAMA_UNFINISHED_PROMPT=CUT_TEXT, FAKE_OLLAMA_UNFINISHED_AFTER="3")
    printed = capsys.readouterr().out
    assert code == 0, printed
    lines = printed.splitlines()
    header = next(line for line in lines if "Parallel" in line)
    assert "Peak VRAM (GiB)" in header and "Card VRAM (GiB)" in header
    row = next(line for line in lines if line.lstrip(" *").startswith("1 "))
    # 1.4 GiB is the server's own; 116.6 GiB is the card with the other program on it, in its own column.
    assert "  1.4  " in row and "  116.6  " in row
    assert "VRAM, the estimate against the server's own peak:" in lines
    priced = lines[lines.index("VRAM, the estimate against the server's own peak:") + 1]
    assert priced.startswith("  parallel 1: estimated ") and "the server's own peak 1.37 GiB" in priced
    assert priced.endswith("; card 116.6 GiB")
    # The request whose prompt the server cuts, at every point, named as it is.
    [finding] = [line for line in lines if "failed at every point that sent it" in line]
    assert finding == ("prompt 2 of 2 (“Recite the alphabet backwards, one letter per line.”) failed at every point "
                       "that sent it (2 of 2 points, 4 of 4 requests: reply ended without its final record, after 3 "
                       "tokens): it fails for what it asks, not for the setting.")
    at = lines.index("Failed prompts:")
    assert lines[at + 1] == ("  prompt 2 of 2 “Recite the alphabet backwards, one letter per line.”: reply ended "
                             "without its final record, after 3 tokens; 2 of 2 points, 4 of 4 requests")
    assert lines[at + 2] == "" and "connection dropped" not in printed  # the other prompt never failed

    data = json.loads(out.read_text())
    for point in data["points"]:
        assert point["vram_peak_mib"] == SERVER_MIB and point["vram_peak_unknown"] is None
        assert point["card_vram_peak_mib"] == OTHERS_MIB + SERVER_MIB
        assert point["estimate_peak_mib"] is not None
        assert point["estimate_error_mib"] == pytest.approx(point["estimate_peak_mib"] - SERVER_MIB, abs=0.1)
        assert point["errors"] == {"unfinished": 2} and point["status"] == "unstable"
    [cut] = data["failed_prompts"]
    assert (cut["prompt_index"], cut["every_point"], cut["points_failed"], cut["points_sent"], cut["kinds"]) == (
        1, True, 2, 2, ["unfinished"])
    assert [(f["point"], f["request"]) for f in cut["failures"]] == [(0, 1), (0, 3), (1, 1), (1, 3)]
    assert cut["failures"][0]["error"] == "the server ended the reply without its final record, after 3 tokens"
    assert cut["failures"][0]["tokens"] == 3
    rows = list(csv.DictReader(table.open()))
    assert [float(r["vram_peak_mib"]) for r in rows] == [SERVER_MIB, SERVER_MIB]
    assert [float(r["card_vram_peak_mib"]) for r in rows] == [OTHERS_MIB + SERVER_MIB] * 2
    markdown = report.read_text()
    assert "| Peak VRAM (GiB) | Card VRAM (GiB) |" in markdown
    assert "## VRAM: the estimate against the server's own peak" in markdown and "## Failed prompts" in markdown
    assert "| prompt 2 of 2 | “Recite the alphabet backwards, one letter per line.” | reply ended without its " \
           "final record | 3 | 2 of 2 points | 4 of 4 requests |" in markdown

    [summary] = BenchHistory(tmp_path / "history.sqlite3").list_runs()
    kept = BenchHistory(tmp_path / "history.sqlite3").load(summary.run_id)
    assert [(r.gpu.server_peak_mib, r.gpu.card_peak_mib) for r in kept.results] == [
        (SERVER_MIB, OTHERS_MIB + SERVER_MIB)] * 2
    assert all(r.status is PointStatus.UNSTABLE and r.failure is FailureKind.UNFINISHED for r in kept.results)


def test_an_attached_local_servers_own_memory_is_read_from_its_process_tree(
        tmp_path, monkeypatch, capsys, external_standin, h200) -> None:
    server = external_standin(**FAST)
    out = tmp_path / "out.json"
    code = _bench(tmp_path, monkeypatch, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{server.port}",
                  "--requests", "2", "--num-predict", "8", "--no-think", "--json", str(out), "--no-history")
    printed = capsys.readouterr().out
    assert code == 0, printed
    row = next(line for line in printed.splitlines() if line.lstrip(" *").startswith("— "))
    assert "  1.4  " in row and "  116.6  " in row  # the server's own 1,400 MiB beside the whole card
    [point] = json.loads(out.read_text())["points"]
    assert point["vram_peak_mib"] == SERVER_MIB and point["vram_peak_unknown"] is None
    assert point["card_vram_peak_mib"] == OTHERS_MIB + SERVER_MIB
    assert server.process.poll() is None  # watched for its processes, never stopped
