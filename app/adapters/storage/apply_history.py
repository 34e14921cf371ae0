"""Predicted-versus-measured records of every guarded apply, kept in SQLite."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import platformdirs

SCHEMA = """
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


def default_history_path() -> Path:
    """apply-checks.sqlite3 in the user data directory."""
    return Path(platformdirs.user_data_dir("ollama-deck")) / "apply-checks.sqlite3"


class ApplyHistory:
    """Append-only log of apply checks. Each insert is one transaction (atomic under WAL)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_history_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def add(self, record: dict[str, Any]) -> int:
        """Store one record (as produced by ApplyReport.to_record); returns its id."""
        with self._lock, self._connect() as db:
            cur = db.execute(
                "INSERT INTO apply_checks (at, kept, predicted_vram_bytes, measured_vram_bytes, reason, record)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (record["at"], int(record["kept"]), record.get("predicted_vram_bytes"),
                 record.get("measured_vram_bytes"), record["reason"], json.dumps(record)),
            )
            return int(cur.lastrowid)

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest records first."""
        with self._lock, self._connect() as db:
            rows = db.execute("SELECT record FROM apply_checks ORDER BY id DESC LIMIT ?", (limit,)).fetchall()
        return [json.loads(r[0]) for r in rows]
