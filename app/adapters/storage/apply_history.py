"""Predicted-versus-measured records of every guarded apply, kept in SQLite.

Format 1 (PRAGMA user_version = 1) adds the kind of server each record was applied to; the
records of format 0, which had no version, were all applied to Ollama.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from app.adapters.storage import paths as storage_paths


SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS apply_checks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kept INTEGER NOT NULL,
    predicted_vram_bytes INTEGER,
    measured_vram_bytes INTEGER,
    reason TEXT NOT NULL,
    record TEXT NOT NULL,
    backend_kind TEXT NOT NULL DEFAULT 'ollama'
)
"""
APPLY_HISTORY_FILE_NAME = "apply-checks.sqlite3"
LEGACY_BACKEND = "ollama"  # every record from before servers had kinds


def default_history_path() -> Path:
    """apply-checks.sqlite3 in the user data directory."""
    return storage_paths.data_dir() / APPLY_HISTORY_FILE_NAME


class ApplyHistory:
    """Append-only log of apply checks. Each insert is one transaction (atomic under WAL)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_history_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            columns = {row[1] for row in db.execute("PRAGMA table_info(apply_checks)")}
            if columns and "backend_kind" not in columns:
                # One statement, so atomic: format-0 rows take the column's default, Ollama.
                db.execute("ALTER TABLE apply_checks ADD COLUMN backend_kind TEXT NOT NULL DEFAULT 'ollama'")
            db.execute(SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def add(self, record: dict[str, Any]) -> int:
        """Store one record (as produced by ApplyReport.to_record); returns its id."""
        tried = record.get("tried")
        kind = tried.get("backend") if isinstance(tried, dict) else None
        with self._lock, self._connect() as db:
            cur = db.execute(
                "INSERT INTO apply_checks (at, kept, predicted_vram_bytes, measured_vram_bytes, reason, record,"
                " backend_kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (record["at"], int(record["kept"]), record.get("predicted_vram_bytes"),
                 record.get("measured_vram_bytes"), record["reason"], json.dumps(record),
                 kind if isinstance(kind, str) and kind else LEGACY_BACKEND),
            )
            row_id = cur.lastrowid
            assert row_id is not None  # set by every successful INSERT
            return row_id

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest records first, each with the backend_kind of the server it was applied to."""
        with self._lock, self._connect() as db:
            rows = db.execute("SELECT record, backend_kind FROM apply_checks ORDER BY id DESC LIMIT ?",
                              (limit,)).fetchall()
        return [{**json.loads(record), "backend_kind": kind} for record, kind in rows]
