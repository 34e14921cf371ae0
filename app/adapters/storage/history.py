"""Every sweep, kept in SQLite (stdlib sqlite3, WAL) in the user data folder.

Each point is committed in its own transaction as soon as it is measured, so a sweep cut short
by a crash or a kill keeps every point it finished; such a run is listed as "interrupted" once
the process that wrote it is gone. A file that is not a database is moved aside and reported,
never overwritten unseen. Every call opens its own short connection, so any thread may use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import psutil

from app.adapters.storage import paths as storage_paths
from app.core.errors import DeckError
from app.core.bench.sweep import PointResult
from app.core.bench.run import INTERRUPTED, RUNNING, SweepRun, result_to_json, run_from_json, run_to_json

HISTORY_FILE_NAME = "benchmarks.sqlite3"
# 2: runs name the server that measured them (backend_kind, server_version); format 1's runs are Ollama's.
SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    title TEXT NOT NULL,
    model TEXT NOT NULL,
    gpu_name TEXT NOT NULL,
    ollama_version TEXT NOT NULL,
    points_planned INTEGER NOT NULL,
    best_tokens_per_s REAL,
    recommended TEXT NOT NULL DEFAULT '',
    owner_pid INTEGER NOT NULL,
    owner_started REAL NOT NULL,
    doc TEXT NOT NULL,
    backend_kind TEXT NOT NULL DEFAULT 'ollama',
    server_version TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS points (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    status TEXT NOT NULL,
    output_tokens_per_s REAL,
    doc BLOB NOT NULL,
    PRIMARY KEY (run_id, idx)
);
"""
# Format 1 to 2, in one transaction: every existing run was measured on Ollama, whose version it kept.
_MIGRATE_1_TO_2 = """
BEGIN;
ALTER TABLE runs ADD COLUMN backend_kind TEXT NOT NULL DEFAULT 'ollama';
ALTER TABLE runs ADD COLUMN server_version TEXT NOT NULL DEFAULT '';
UPDATE runs SET server_version = ollama_version;
PRAGMA user_version = 2;
COMMIT;
"""


class HistoryError(DeckError):
    """The benchmark history could not be read or written."""

    hint = "Results already shown are not lost; check the data folder's permissions and free space."


@dataclass(frozen=True)
class RunSummary:
    """One row of the history list."""

    run_id: int
    title: str
    started_at: str
    finished_at: str
    status: str
    model: str
    gpu_name: str
    ollama_version: str
    points_planned: int
    points_done: int
    best_tokens_per_s: float | None
    recommended: str
    backend_kind: str = "ollama"
    server_version: str = ""


def default_history_path() -> Path:
    """benchmarks.sqlite3 in the user data folder (e.g. ~/.local/share/ollama-deck)."""
    return storage_paths.data_dir() / HISTORY_FILE_NAME


def _process_start(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0


def _alive(pid: int, started: float) -> bool:
    """True when the process that wrote a run is still the one running under its pid."""
    return psutil.pid_exists(pid) and abs(_process_start(pid) - started) < 1.0


def _pack(data: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(), 6)


def _unpack(blob: bytes) -> dict[str, Any]:
    return json.loads(zlib.decompress(blob).decode())


class BenchHistory:
    """The sweep history in one SQLite file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_history_path()
        self.problems: list[str] = []
        self._pid = os.getpid()
        self._pid_started = _process_start(self._pid)
        self._ready = False

    # ---- connections ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection in WAL mode with full syncs; commits on success, rolls back on error."""
        self._ensure_schema()
        try:
            conn = self._open()
        except sqlite3.Error as exc:
            raise HistoryError(f"Cannot open the benchmark history at {self.path}: {exc}.") from exc
        try:
            with conn:
                yield conn
        except sqlite3.Error as exc:
            raise HistoryError(f"The benchmark history at {self.path} failed: {exc}.") from exc
        finally:
            conn.close()

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10.0)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA synchronous = FULL")
        return conn

    def _ensure_schema(self) -> None:
        if self._ready:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise HistoryError(f"Cannot create the folder for the benchmark history ({self.path.parent}): "
                               f"{exc.strerror or exc}.") from exc
        try:
            self._create()
        except sqlite3.DatabaseError as exc:
            # A file another process holds locked is busy, not damaged: it must not be moved aside.
            if not self.path.exists() or "locked" in str(exc) or "busy" in str(exc):
                raise HistoryError(f"Cannot open the benchmark history at {self.path}: {exc}.") from exc
            kept = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                source = Path(f"{self.path}{suffix}")
                if source.exists():
                    source.rename(Path(f"{kept}{suffix}"))
            self.problems.append(f"The benchmark history {self.path} could not be read ({exc}); it was moved to "
                                 f"{kept} and a new one was started.")
            self._create()
        self._ready = True

    def _create(self) -> None:
        conn = self._open()
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise HistoryError(f"The benchmark history at {self.path} was written by a newer ollama-deck "
                                   f"(format {version}).", hint="Use that version, or move the file away.")
            conn.execute("PRAGMA journal_mode = WAL")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            if columns and "backend_kind" not in columns:
                self._migrate(conn, version)
            with conn:
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        finally:
            conn.close()

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        """Bring a format-1 history to format 2; on any failure nothing changes (one transaction)."""
        try:
            conn.executescript(_MIGRATE_1_TO_2)
        except sqlite3.Error:
            conn.rollback()
            raise
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        self.problems.append(f"The benchmark history {self.path} was in format {version}; converted it to format "
                             f"{SCHEMA_VERSION}: its {runs} runs are recorded as measured on Ollama.")

    # ---- writing -------------------------------------------------------------------------------
    def begin(self, run: SweepRun) -> int:
        """Record a run that is starting (status running); returns its id."""
        with self._connect() as conn:
            return self._insert_run(conn, run)

    def add_point(self, run_id: int, result: PointResult) -> None:
        """Store one finished point (one transaction)."""
        with self._connect() as conn:
            self._insert_point(conn, run_id, result)

    def finish(self, run_id: int, run: SweepRun) -> None:
        """Mark a run finished or cancelled, with its recommendation."""
        with self._connect() as conn:
            self._update_run(conn, run_id, run)

    def save(self, run: SweepRun) -> int:
        """Store a whole run with its points in one transaction; returns its id."""
        with self._connect() as conn:
            run_id = self._insert_run(conn, run)
            for result in run.results:
                self._insert_point(conn, run_id, result)
            self._update_run(conn, run_id, run)
            return run_id

    @staticmethod
    def _doc(run: SweepRun) -> str:
        doc = run_to_json(run)
        doc.pop("points", None)  # the points live in their own rows
        return json.dumps(doc, ensure_ascii=False)

    def _insert_run(self, conn: sqlite3.Connection, run: SweepRun) -> int:
        cursor = conn.execute(
            "INSERT INTO runs (started_at, finished_at, status, title, model, gpu_name, ollama_version, "
            "points_planned, owner_pid, owner_started, doc, backend_kind, server_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.started_at, run.finished_at, run.status, run.title, run.fingerprint.model, run.fingerprint.gpu_name,
             run.fingerprint.ollama_version, len(run.points), self._pid, self._pid_started, self._doc(run),
             run.fingerprint.backend_kind, run.fingerprint.server_version))
        run_id = cursor.lastrowid
        assert run_id is not None  # set by every successful INSERT
        return run_id

    def _update_run(self, conn: sqlite3.Connection, run_id: int, run: SweepRun) -> None:
        rec = run.recommendation
        best = rec.output_tokens_per_s if rec and rec.output_tokens_per_s is not None else None
        chosen = run.result_for(rec.index) if rec and rec.index is not None else None
        conn.execute("UPDATE runs SET finished_at = ?, status = ?, best_tokens_per_s = ?, recommended = ?, doc = ? "
                     "WHERE id = ?", (run.finished_at, run.status, best,
                                      chosen.point.label(run.varying) if chosen else "", self._doc(run), run_id))

    @staticmethod
    def _insert_point(conn: sqlite3.Connection, run_id: int, result: PointResult) -> None:
        conn.execute("INSERT OR REPLACE INTO points (run_id, idx, status, output_tokens_per_s, doc) "
                     "VALUES (?, ?, ?, ?, ?)",
                     (run_id, result.point.index, result.status, result.output_tokens_per_s,
                      _pack(result_to_json(result))))

    def delete(self, run_id: int) -> None:
        """Remove a run and its points."""
        with self._connect() as conn:
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # ---- reading -------------------------------------------------------------------------------
    def _status(self, status: str, pid: int, started: float) -> str:
        if status == RUNNING and not (pid == self._pid and abs(started - self._pid_started) < 1.0) \
                and not _alive(pid, started):
            return INTERRUPTED
        return status

    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT r.id, r.title, r.started_at, r.finished_at, r.status, r.model, r.gpu_name, r.ollama_version, "
                "r.points_planned, (SELECT COUNT(*) FROM points p WHERE p.run_id = r.id), "
                "COALESCE(r.best_tokens_per_s, (SELECT MAX(output_tokens_per_s) FROM points p WHERE p.run_id = r.id)), "
                "r.recommended, r.owner_pid, r.owner_started, r.backend_kind, r.server_version "
                "FROM runs r ORDER BY r.id DESC").fetchall()
        return [RunSummary(row[0], row[1], row[2], row[3], self._status(row[4], row[12], row[13]), row[5], row[6],
                           row[7], row[8], row[9], row[10], row[11], row[14], row[15]) for row in rows]

    def load(self, run_id: int) -> SweepRun:
        """One run with every point and request; HistoryError when there is no such run."""
        with self._connect() as conn:
            row = conn.execute("SELECT doc, status, owner_pid, owner_started FROM runs WHERE id = ?",
                               (run_id,)).fetchone()
            if row is None:
                raise HistoryError(f"There is no run {run_id} in the benchmark history.", hint="It may have been deleted.")
            points = conn.execute("SELECT doc FROM points WHERE run_id = ? ORDER BY idx", (run_id,)).fetchall()
        doc = json.loads(row[0])
        doc["status"] = self._status(row[1], row[2], row[3])
        doc["results"] = [_unpack(p[0]) for p in points]
        return run_from_json(doc, run_id)


__all__ = ["BenchHistory", "HISTORY_FILE_NAME", "HistoryError", "RunSummary", "default_history_path"]
