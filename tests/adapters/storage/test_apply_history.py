"""The apply-check log in a real SQLite file: records keep the kind of server they were applied to,
and a log the format-0 release wrote opens with every record, recorded as applied to Ollama."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from app.adapters.storage.saved_format import SAVED_FORMAT
from app.adapters.storage.apply_history import SCHEMA_VERSION, ApplyHistory
from app.backends.ollama.tuning import ollama_settings
from app.core.server.settings import ServerSettings

# The format-0 release's table, and a record as its ApplyReport.to_record wrote it (flat settings).
V0_SCHEMA = """
CREATE TABLE IF NOT EXISTS apply_checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kept INTEGER NOT NULL,
    predicted_vram_bytes INTEGER,
    measured_vram_bytes INTEGER,
    reason TEXT NOT NULL,
    record TEXT NOT NULL
)
"""
V0_SETTINGS = {"num_parallel": 4, "context_length": 16384, "kv_cache_type": "q8_0", "flash_attention": "on",
               "keep_alive": "5m", "max_loaded_models": 0, "max_queue": 512, "gpu_overhead_mib": 256,
               "host": "127.0.0.1", "port": 11434, "models_dir": "", "extra_env": "", "ollama_binary": "",
               "allow_network": False}
V0_RECORD = {"at": 1785578400.0, "tried": V0_SETTINGS, "restored": None, "kept": True,
             "reason": "Kept: predicted 14.2 GiB, measured 13.9 GiB.", "predicted_vram_bytes": 15247245312,
             "predicted_verdict": "fits", "measured_vram_bytes": 14925037568,
             "observation": {"ps_size_bytes": 14925037568, "ps_size_vram_bytes": 14925037568}, "rollback_ok": True}


def test_a_format_0_log_keeps_every_record_as_applied_to_ollama(tmp_path: Path) -> None:
    path = tmp_path / "apply-checks.sqlite3"
    old = sqlite3.connect(path)
    old.execute("PRAGMA journal_mode=WAL")
    old.execute(V0_SCHEMA)
    for reason in ("first", "second"):
        record = {**V0_RECORD, "reason": reason}
        old.execute("INSERT INTO apply_checks (at, kept, predicted_vram_bytes, measured_vram_bytes, reason, record)"
                    " VALUES (?, ?, ?, ?, ?, ?)", (record["at"], 1, record["predicted_vram_bytes"],
                                                   record["measured_vram_bytes"], reason, json.dumps(record)))
    old.commit()
    old.close()

    history = ApplyHistory(path)
    records = history.recent()

    assert [r["reason"] for r in records] == ["second", "first"]
    for record in records:
        assert record.pop("backend_kind") == "ollama"
        assert record == {**V0_RECORD, "reason": record["reason"]}
    tried, problems = ServerSettings.from_json(records[0]["tried"], SAVED_FORMAT)
    assert problems == [] and tried.gpu_overhead_mib == 256 and tried.backend == "ollama"
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_new_record_keeps_the_kind_of_its_server(tmp_path: Path) -> None:
    history = ApplyHistory(tmp_path / "h.sqlite3")
    tried = ollama_settings(ServerSettings(num_parallel=2), gpu_overhead_mib=512)
    history.add({"at": 2.0, "kept": False, "reason": "rolled back", "tried": tried.to_json()})
    history.add({"at": 3.0, "kept": True, "reason": "ok", "tried": tried.replace(backend="llama_server").to_json()})
    assert [r["backend_kind"] for r in ApplyHistory(tmp_path / "h.sqlite3").recent()] == ["llama_server", "ollama"]
    assert ServerSettings.from_json(history.recent()[1]["tried"]) == (tried, [])
