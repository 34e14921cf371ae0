"""Predicted-versus-measured records of every guarded apply, kept in SQLite.

Format 1 (PRAGMA user_version = 1) adds the kind of server each record was applied to; the
records of format 0, which had no version, were all applied to Ollama. The file is checked
before it is written (see sqlite_file): only a damaged one is moved aside.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

from app.adapters.storage import paths as storage_paths
from app.adapters.storage.sqlite_file import (BUSY_TIMEOUT_S, HistoryError, check_shape, is_busy, is_read_only, locked_error,
                                              open_file, read_only_uri, SQLITE_ERRORS)


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
WHAT = "apply-check log"
_COLUMNS = frozenset({"id", "at", "kept", "predicted_vram_bytes", "measured_vram_bytes", "reason", "record"})

log = logging.getLogger(__name__)


def default_history_path() -> Path:
    """apply-checks.sqlite3 in the user data directory."""
    return storage_paths.data_dir() / APPLY_HISTORY_FILE_NAME


class ApplyHistory:
    """Append-only log of apply checks. Each insert is one transaction (atomic under WAL).

    It never stops the app: a damaged file is moved aside and a new one started; a file that
    is read-only, locked, or cannot be made keeps this session's records in memory. `problems`
    says what the user must be told (with the path); `saving` is False while records stay in memory.
    """

    def __init__(self, path: Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path or default_history_path()
        self.busy_timeout_s = busy_timeout_s
        self.problems: list[str] = []
        self.saving = False
        self.readable = False
        self._uri: str | None = None  # the read-only URI when the file can be read but not written
        self._memory: list[dict[str, Any]] = []  # this session's records that the file could not take
        self._lock = threading.Lock()
        try:
            self._prepare()
        except HistoryError as exc:
            self.problems.append(f"{exc.message} New apply checks are kept in memory for this session only.")

    def _prepare(self) -> None:
        opened = open_file(self.path, WHAT, self.busy_timeout_s)
        self.problems += opened.problems
        if opened.version > SCHEMA_VERSION:
            raise HistoryError(f"The {WHAT} {self.path} was written by a newer ollama-deck (format {opened.version}); "
                               "it is left as it is.")
        check_shape(self.path, WHAT, f"an {WHAT}", opened.tables, {"apply_checks": _COLUMNS})
        if opened.read_only:
            self._read_only(opened.immutable)
            return
        try:
            with closing(self._connect()) as db, db:
                if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    db.execute("PRAGMA journal_mode=WAL")
                columns = opened.tables.get("apply_checks")
                if columns is not None and "backend_kind" not in columns:
                    # One statement, so atomic: format-0 rows take the column's default, Ollama.
                    db.execute("ALTER TABLE apply_checks ADD COLUMN backend_kind TEXT NOT NULL DEFAULT 'ollama'")
                if columns is None or opened.version != SCHEMA_VERSION:
                    db.execute(SCHEMA)
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except SQLITE_ERRORS as exc:
            if is_read_only(exc) and opened.tables:
                self._read_only(opened.immutable)
                return
            raise self._error(exc) from exc
        self.saving = self.readable = True

    def _read_only(self, immutable: bool) -> None:
        self._uri = read_only_uri(self.path, immutable)
        self.readable = True
        self.problems.append(f"The {WHAT} {self.path} is read-only; showing its records, new apply checks are "
                             "kept in memory for this session only.")

    def _error(self, exc: BaseException) -> HistoryError:
        if is_busy(exc):
            return locked_error(self.path, WHAT, self.busy_timeout_s, exc)
        return HistoryError(f"The {WHAT} {self.path} failed: {exc}.")

    def _connect(self) -> sqlite3.Connection:
        if self._uri is not None:
            conn = sqlite3.connect(self._uri, uri=True, timeout=self.busy_timeout_s)
        else:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        return conn

    def add(self, record: dict[str, Any]) -> int:
        """Store one record (as produced by ApplyReport.to_record); returns its id (negative: in memory only)."""
        tried = record.get("tried")
        kind = tried.get("backend") if isinstance(tried, dict) else None
        kind = kind if isinstance(kind, str) and kind else LEGACY_BACKEND
        with self._lock:
            if self.saving:
                try:
                    with closing(self._connect()) as db, db:
                        cur = db.execute(
                            "INSERT INTO apply_checks (at, kept, predicted_vram_bytes, measured_vram_bytes, reason,"
                            " record, backend_kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (record["at"], int(record["kept"]), record.get("predicted_vram_bytes"),
                             record.get("measured_vram_bytes"), record["reason"], json.dumps(record), kind))
                        row_id = cur.lastrowid
                        assert row_id is not None  # set by every successful INSERT
                        return row_id
                except SQLITE_ERRORS as exc:
                    # The apply itself went fine; losing its record must not fail it.
                    log.warning("%s; kept the record in memory", self._error(exc).message)
            self._memory.append({**record, "backend_kind": kind})
            return -len(self._memory)

    def recent(self, limit: int = 50) -> list[dict[str, Any]]:
        """The newest records first, each with the backend_kind of the server it was applied to."""
        with self._lock:
            found = list(reversed(self._memory))[:limit]
            if not self.readable or len(found) >= limit:
                return found
            try:
                with closing(self._connect()) as db:
                    rows = db.execute("SELECT record, backend_kind FROM apply_checks ORDER BY id DESC LIMIT ?",
                                      (limit - len(found),)).fetchall()
            except SQLITE_ERRORS as exc:
                raise self._error(exc) from exc
        for record, kind in rows:
            try:
                found.append({**json.loads(record), "backend_kind": kind})
            except (TypeError, ValueError):
                found.append({"reason": "unreadable record", "backend_kind": kind, "unreadable": True})
        return found


__all__ = ["APPLY_HISTORY_FILE_NAME", "ApplyHistory", "HistoryError", "default_history_path"]
