"""Every sweep, kept in SQLite (stdlib sqlite3, WAL) in the user data folder.

Each point is committed in its own transaction as soon as it is measured, so a sweep cut short
by a crash or a kill keeps every point it finished; such a run is listed as "interrupted" once
the process that wrote it is gone. A damaged file is moved aside and reported, never overwritten
unseen; a read-only one is read; a locked one is reported with who holds it (see sqlite_file).
Every call opens its own short connection, so any thread may use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import zlib
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import psutil

from app.adapters.storage import paths as storage_paths
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.adapters.storage.sqlite_file import (BUSY_TIMEOUT_S, HistoryError, HistoryLocationError, Opened,
                                              check_shape, is_busy, is_damage, is_read_only, locked_error,
                                              open_file, read_only_uri, set_aside, SQLITE_ERRORS)
from app.core.bench.sweep import GpuFigures, PointResult
from app.core.bench.outcome import RunStatus, saved_run_status
from app.core.bench.run import SweepRun, result_to_json, run_from_json, run_to_json
from app.core.bench.run_summary import RunSummary
from app.core.watch.events import EventKind

# The stored names of the event kinds (all, and those that spoil a measurement), as SQL lists.
KNOWN_KINDS = ", ".join(f"'{k.value}'" for k in EventKind)
SPOILING_KINDS = ", ".join(f"'{k.value}'" for k in EventKind if k.spoils_measurement)

HISTORY_FILE_NAME = "benchmarks.sqlite3"
# 2: runs name the server that measured them (backend_kind, server_version); format 1's runs are Ollama's.
# 3: each point keeps what the server did without saying so while it ran (points.events, a JSON list); a
# format-2 file is read as it is (its points saw no events) and brought to format 3 by its first write.
# 4: each point keeps the server's own peak VRAM (its processes' memory) and the whole card's in columns of their
# own (points.server_peak_mib, points.card_peak_mib); formats 2 and 3 kept only the card's, as the point's
# "vram_peak_mib". A format-2 or -3 file is read as it is (the card's figure as the card's, the server's as not
# recorded) and brought to format 4 by its first write, which fills the columns from each point as it was kept.
SCHEMA_VERSION = 4
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
    events TEXT NOT NULL DEFAULT '[]',
    server_peak_mib REAL,
    card_peak_mib REAL,
    PRIMARY KEY (run_id, idx)
);
"""
# What any format (1 or 2) has; a file without these is not one this build can read.
_RUNS_COLUMNS = frozenset({"id", "started_at", "finished_at", "status", "title", "model", "gpu_name", "ollama_version",
                           "points_planned", "best_tokens_per_s", "recommended", "owner_pid", "owner_started", "doc"})
_POINTS_COLUMNS = frozenset({"run_id", "idx", "status", "output_tokens_per_s", "doc"})
# Format 1 to 2, in one transaction: every existing run was measured on Ollama, whose version it kept.
_MIGRATE_1_TO_2 = """
BEGIN;
ALTER TABLE runs ADD COLUMN backend_kind TEXT NOT NULL DEFAULT 'ollama';
ALTER TABLE runs ADD COLUMN server_version TEXT NOT NULL DEFAULT '';
UPDATE runs SET server_version = ollama_version;
PRAGMA user_version = 2;
COMMIT;
"""
# Format 2 to 3, in one transaction: the points stored so far saw no events (none were watched then).
_MIGRATE_2_TO_3 = """
BEGIN;
ALTER TABLE points ADD COLUMN events TEXT NOT NULL DEFAULT '[]';
PRAGMA user_version = 3;
COMMIT;
"""

# Format 3 to 4 (with the columns filled from each point's own figures, in the same transaction: _convert_before_write).
_MIGRATE_3_TO_4 = ("ALTER TABLE points ADD COLUMN server_peak_mib REAL",
                   "ALTER TABLE points ADD COLUMN card_peak_mib REAL")
_PEAK_COLUMNS = ("server_peak_mib", "card_peak_mib")


def default_history_path() -> Path:
    """benchmarks.sqlite3 in the user data folder (e.g. ~/.local/share/ollama-deck)."""
    return storage_paths.data_dir() / HISTORY_FILE_NAME


def _process_start(pid: int) -> float:
    try:
        started: float = psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0
    return started


def _alive(pid: int, started: float) -> bool:
    """True when the process that wrote a run is still the one running under its pid."""
    try:
        return psutil.pid_exists(pid) and abs(_process_start(pid) - started) < 1.0
    except (OverflowError, ValueError, psutil.Error):  # a damaged row's pid is no process at all
        return False


def _pack(data: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(), 6)


def _unpack(blob: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(zlib.decompress(blob).decode())
    return data


def _events(text: object) -> list[Any]:
    """A point's stored events as a JSON list; a damaged cell is no events (that point's figures stay readable)."""
    if not isinstance(text, str):
        return []
    try:
        items = json.loads(text)
    except ValueError:
        return []
    return items if isinstance(items, list) else []


class BenchHistory:
    """The sweep history in one SQLite file.

    The file is checked on first use (or by open()): a damaged one is moved aside and a new one
    started, a read-only one is read but not written, a locked one is waited for busy_timeout_s
    and then reported with who holds it. `problems` says what the user must be told.
    """

    def __init__(self, path: Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S, *,
                 named: bool = False) -> None:
        self.path = Path(path) if path is not None else default_history_path()
        self.busy_timeout_s = busy_timeout_s
        self.named = named  # the user chose this path: a file there that is not SQLite is refused, not moved
        self.problems: list[str] = []
        self.read_only = False
        self._immutable = False
        self._legacy_columns = False  # a format-1 file opened read-only: no backend_kind/server_version
        self._events_column = True  # points.events exists (False: a format-2 file until its first write)
        self._peaks_columns = True  # points' peak columns exist (False: a format-2 or -3 file until its first write)
        self._pid = os.getpid()
        self._pid_started = _process_start(self._pid)
        self._ready = False
        self._opening = threading.Lock()  # the GUI's reader and the sweep's writer may both open it first

    def open(self) -> list[str]:
        """Check and prepare the file now (it is also done on first use); returns the problems to show."""
        self._ensure_schema()
        return list(self.problems)

    # ---- connections ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _connect(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        """A connection in WAL mode with full syncs; commits on success, rolls back on error."""
        self._ensure_schema()
        if write and self.read_only:
            raise HistoryError(f"The benchmark history {self.path} is read-only; this run is not saved to it.",
                               hint="The results on screen can still be exported; fix the file's permissions, "
                                    "or choose another history file, to keep new runs.")
        if write and not (self._events_column and self._peaks_columns):
            self._convert_before_write()
        try:
            conn = self._open()
        except SQLITE_ERRORS as exc:
            raise self._error("Cannot open", exc) from exc
        try:
            with conn:
                yield conn
        except SQLITE_ERRORS as exc:
            raise self._error("Failed to use", exc) from exc
        finally:
            conn.close()

    def _error(self, doing: str, exc: BaseException) -> HistoryError:
        if is_busy(exc):
            return locked_error(self.path, "benchmark history", self.busy_timeout_s, exc)
        if is_damage(exc):
            self._ready = False  # the next use checks the file again, and moves it aside
            return HistoryError(f"The benchmark history {self.path} is damaged ({exc}).",
                                hint="It is checked again, and moved aside if need be, when next opened.")
        if is_read_only(exc):
            return HistoryError(f"The benchmark history {self.path} cannot be written ({exc}); nothing was saved.")
        return HistoryError(f"{doing} the benchmark history at {self.path}: {exc}.")

    def _open(self) -> sqlite3.Connection:
        if self.read_only:
            conn = sqlite3.connect(read_only_uri(self.path, self._immutable), uri=True, timeout=self.busy_timeout_s)
        else:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = FULL")
        # A bit flipped in a text cell must cost that run, not the whole list.
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        return conn

    def _ensure_schema(self) -> None:
        with self._opening:
            if self._ready:
                return
            opened = open_file(self.path, "benchmark history", self.busy_timeout_s, named=self.named)
            if opened.version > SCHEMA_VERSION:
                raise HistoryError(f"The benchmark history at {self.path} was written by a newer ollama-deck "
                                   f"(format {opened.version}).", hint="Use that version, or move the file away.")
            check_shape(self.path, "benchmark history", "a benchmark history", opened.tables,
                        {"runs": _RUNS_COLUMNS, "points": _POINTS_COLUMNS})
            self.problems += opened.problems
            self._immutable = opened.immutable
            if opened.read_only:
                self._use_read_only(opened)
            else:
                self._prepare(opened)
            self._ready = True

    def _prepare(self, opened: Opened) -> None:
        try:
            try:
                self._create(opened)
            except _ConversionFailed as failed:
                # The old file is kept whole (the conversion is one transaction) and a new one is started.
                kept = set_aside(self.path, "benchmark history", str(failed.cause))
                self.problems.append(f"The benchmark history {self.path} could not be converted to format "
                                     f"{SCHEMA_VERSION} ({failed.cause}); it was moved to {kept} as it was, and "
                                     "a new one was started.")
                opened = Opened()
                self._create(opened)
        except SQLITE_ERRORS as exc:
            if not is_read_only(exc):
                raise self._error("Cannot prepare", exc) from exc
            self._use_read_only(opened)  # e.g. a read-only file system, which access() does not see

    def _use_read_only(self, opened: Opened) -> None:
        self.read_only = True
        self._legacy_columns = "backend_kind" not in opened.tables.get("runs", {"backend_kind"})
        self._events_column = "events" in opened.tables.get("points", {"events"})
        self._peaks_columns = set(_PEAK_COLUMNS) <= set(opened.tables.get("points", _PEAK_COLUMNS))
        self.problems.append(f"The benchmark history {self.path} is read-only; showing its runs, new results "
                             "will not be saved to it.")

    def _create(self, opened: Opened) -> None:
        """Bring the file to this format; a file already in it is not written to at all."""
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            runs = opened.tables.get("runs")
            converted = runs is not None and "backend_kind" not in runs
            if converted:
                try:
                    self._migrate(conn, opened.version)
                except SQLITE_ERRORS as exc:
                    if is_busy(exc) or is_read_only(exc):
                        raise
                    raise _ConversionFailed(exc) from exc
            # A format-2 or -3 file is left as it is until something is written to it (see _convert_before_write); a
            # converted one, a new one or one of no known format is brought to this format now.
            if not opened.tables or converted or opened.version not in (2, 3, SCHEMA_VERSION):
                if "events" not in opened.tables.get("points", {"events"}):
                    conn.executescript(_MIGRATE_2_TO_3)
                if not set(_PEAK_COLUMNS) <= set(opened.tables.get("points", _PEAK_COLUMNS)):
                    _fill_peaks(conn)
                with conn:
                    conn.executescript(_SCHEMA)
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(points)")}
            self._events_column = "events" in columns
            self._peaks_columns = set(_PEAK_COLUMNS) <= columns
        finally:
            conn.close()

    def _convert_before_write(self) -> None:
        """Bring a format-2 or -3 file to this format before its first write: format 3's events column, then format
        4's peak columns filled from each point as it was kept (each step one transaction: on failure the step
        changed nothing, and the write is not made)."""
        with self._opening:
            if self._events_column and self._peaks_columns:
                return
            try:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s)
            except SQLITE_ERRORS as exc:
                raise self._error("Cannot open", exc) from exc
            try:
                columns = {row[1] for row in conn.execute("PRAGMA table_info(points)")}
                if "events" not in columns:
                    conn.executescript(_MIGRATE_2_TO_3)
                self._events_column = True
                if not set(_PEAK_COLUMNS) <= columns:
                    _fill_peaks(conn)
                self._peaks_columns = True
            except SQLITE_ERRORS as exc:
                if conn.in_transaction:
                    conn.rollback()
                raise self._error("Cannot convert", exc) from exc
            finally:
                conn.close()

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        """Bring a format-1 history to format 2; on any failure nothing changes (one transaction)."""
        try:
            conn.executescript(_MIGRATE_1_TO_2)
        except SQLITE_ERRORS:
            conn.rollback()
            raise
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        self.problems.append(f"The benchmark history {self.path} was in format {version}; converted it to format "
                             f"{SCHEMA_VERSION}: its {runs} runs are recorded as measured on Ollama.")

    # ---- writing -------------------------------------------------------------------------------
    def begin(self, run: SweepRun) -> int:
        """Record a run that is starting (status running); returns its id."""
        with self._connect(write=True) as conn:
            return self._insert_run(conn, run)

    def add_point(self, run_id: int, result: PointResult) -> None:
        """Store one finished point (one transaction)."""
        with self._connect(write=True) as conn:
            self._insert_point(conn, run_id, result)

    def finish(self, run_id: int, run: SweepRun) -> None:
        """Mark a run finished or cancelled, with its recommendation, and store every point an earlier
        add_point could not (a lock, a full disk), in the same transaction: a run the history calls finished
        holds all its points, and one whose end cannot be written stays open (read as interrupted later)."""
        with self._connect(write=True) as conn:
            stored = {row[0] for row in conn.execute("SELECT idx FROM points WHERE run_id = ?", (run_id,))}
            for result in run.results:
                if result.point.index not in stored:
                    self._insert_point(conn, run_id, result)
            self._update_run(conn, run_id, run)

    def keep_judgement(self, run_id: int, run: SweepRun) -> None:
        """Keep a run as last judged (re-judged against other targets): its recommendation and targets, and
        the targets it ran with; the measured requests stay as they are."""
        with self._connect(write=True) as conn:
            self._update_run(conn, run_id, run)

    def save(self, run: SweepRun) -> int:
        """Store a whole run with its points in one transaction; returns its id."""
        with self._connect(write=True) as conn:
            run_id = self._insert_run(conn, run)
            for result in run.results:
                self._insert_point(conn, run_id, result)
            self._update_run(conn, run_id, run)
            return run_id

    @staticmethod
    def _doc(run: SweepRun) -> str:
        doc = run_to_json(run, SAVED_FORMAT)
        doc.pop("points", None)  # the points live in their own rows
        doc.pop("failed_prompts", None)  # read from the points' requests
        if run.capacity is not None:  # a rate sweep's steps have no rows of their own: their requests go here
            doc["capacity"] = run.capacity.to_json(with_records=True)
        if run.default_capacity is not None:
            doc["default_capacity"] = run.default_capacity.to_json(with_records=True)
        return json.dumps(doc, ensure_ascii=False)

    def _insert_run(self, conn: sqlite3.Connection, run: SweepRun) -> int:
        cursor = conn.execute(
            "INSERT INTO runs (started_at, finished_at, status, title, model, gpu_name, ollama_version, "
            "points_planned, owner_pid, owner_started, doc, backend_kind, server_version) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run.started_at, run.finished_at, run.status, run.title, run.fingerprint.model, run.fingerprint.gpu_name,
             run.fingerprint.server_version, len(run.points), self._pid, self._pid_started, self._doc(run),
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
        doc = result_to_json(result)
        events = doc.pop("events", [])  # in their own column: readable without unpacking the point
        gpu = doc.get("gpu") or {}
        peaks = [gpu.pop(name, None) for name in _PEAK_COLUMNS]  # so are the peaks
        conn.execute("INSERT OR REPLACE INTO points (run_id, idx, status, output_tokens_per_s, doc, events, "
                     "server_peak_mib, card_peak_mib) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     (run_id, result.point.index, result.status, result.output_tokens_per_s, _pack(doc),
                      json.dumps(events, ensure_ascii=False), *peaks))

    def delete(self, run_id: int) -> None:
        """Remove a run and its points."""
        with self._connect(write=True) as conn:
            conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # ---- reading -------------------------------------------------------------------------------
    def _status(self, saved: str, pid: int, started: float) -> RunStatus:
        status = saved_run_status(saved)
        if status is RunStatus.RUNNING and not (pid == self._pid and abs(started - self._pid_started) < 1.0) \
                and not _alive(pid, started):
            return RunStatus.INTERRUPTED
        return status

    def list_runs(self) -> list[RunSummary]:
        """Every run, newest first; a run whose row is damaged is listed with status 'unreadable'."""
        self._ensure_schema()  # it tells whether the file has the format-2 columns
        kind, version = ("'ollama'", "r.ollama_version") if self._legacy_columns else ("r.backend_kind",
                                                                                         "r.server_version")
        # Each run's events and its points that saw one spoiling a measurement, from the points' events column (a
        # damaged cell counts none; a format-2 file's points saw none).
        kind_of = "CASE WHEN e.type = 'object' THEN json_extract(e.value, '$.kind') END"
        valid = "json_valid(p.events) AND json_type(p.events) = 'array'"
        events = (f"(SELECT COUNT(*) FROM points p, json_each(CASE WHEN {valid} THEN p.events ELSE '[]' END) e "
                  f"WHERE p.run_id = r.id AND {kind_of} IN ({KNOWN_KINDS})), "
                  f"(SELECT COUNT(*) FROM points p WHERE p.run_id = r.id AND EXISTS (SELECT 1 FROM "
                  f"json_each(CASE WHEN {valid} THEN p.events ELSE '[]' END) e WHERE {kind_of} IN ({SPOILING_KINDS})))"
                  ) if self._events_column else "0, 0"
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT r.id, r.title, r.started_at, r.finished_at, r.status, r.model, r.gpu_name, r.ollama_version, "
                "r.points_planned, (SELECT COUNT(*) FROM points p WHERE p.run_id = r.id), "
                "COALESCE(r.best_tokens_per_s, (SELECT MAX(output_tokens_per_s) FROM points p WHERE p.run_id = r.id)), "
                f"r.recommended, r.owner_pid, r.owner_started, {kind}, {version}, {events} "
                "FROM runs r ORDER BY r.id DESC").fetchall()
        return [self._summary(row) for row in rows]

    def _summary(self, row: tuple[Any, ...]) -> RunSummary:
        texts = (row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[11], row[14], row[15])
        numbers_ok = isinstance(row[8], int) and isinstance(row[12], int) and isinstance(row[13], (int, float)) \
            and (row[10] is None or isinstance(row[10], (int, float)))
        if not (numbers_ok and all(isinstance(t, str) for t in texts)):
            return RunSummary(row[0], "unreadable run", "", "", RunStatus.UNREADABLE, "", "", 0, row[9], None, "",
                              SAVED_FORMAT.default_backend)
        # row[7] (the ollama_version column) holds what row[15] (the server's version) does in every format
        counts = [n if isinstance(n, int) else 0 for n in (row[16], row[17])]
        return RunSummary(row[0], row[1], row[2], row[3], self._status(row[4], row[12], row[13]), row[5], row[6],
                          row[8], row[9], row[10], row[11], row[14], row[15], *counts)

    def load(self, run_id: int) -> SweepRun:
        """One run with every point and request; HistoryError when there is no such run or it is damaged."""
        with self._connect() as conn:
            row = conn.execute("SELECT doc, status, owner_pid, owner_started FROM runs WHERE id = ?",
                               (run_id,)).fetchone()
            if row is None:
                raise HistoryError(f"There is no run {run_id} in the benchmark history.", hint="It may have been deleted.")
            events = "events" if self._events_column else "'[]'"  # a format-2 file's points saw none
            # a format-2 or -3 file's points hold the card's peak in their own figures
            peaks = ", ".join(_PEAK_COLUMNS) if self._peaks_columns else "NULL, NULL"
            points = conn.execute(f"SELECT doc, {events}, {peaks} FROM points WHERE run_id = ? ORDER BY idx",
                                  (run_id,)).fetchall()
        try:
            doc = json.loads(row[0])
            doc["status"] = self._status(row[1], row[2], row[3])
            doc["results"] = [_with_peaks({**_unpack(p[0]), "events": _events(p[1])}, p[2:], self._peaks_columns)
                              for p in points]
            return run_from_json(doc, SAVED_FORMAT, run_id)
        except Exception as exc:  # noqa: BLE001 - damaged cells fail in any way; one run must not break the rest
            raise HistoryError(f"Run {run_id} in the benchmark history {self.path} is damaged and cannot be shown "
                               f"({type(exc).__name__}: {exc}).", hint="The other runs are not affected.") from exc


def _with_peaks(point: dict[str, Any], peaks: tuple[Any, ...], columns: bool) -> dict[str, Any]:
    """A stored point with its peaks from their columns (format 4; a point kept before them, whose figures hold
    the card's peak under its earlier name, keeps reading them from there when the columns are empty)."""
    if not columns:
        return point
    gpu = dict(point.get("gpu") or {})
    for name, value in zip(_PEAK_COLUMNS, peaks):
        if value is not None or name not in gpu:
            gpu[name] = value if isinstance(value, (int, float)) else None
    return {**point, "gpu": gpu}


def _fill_peaks(conn: sqlite3.Connection) -> None:
    """Add the peak columns and fill them from each point as it was kept (the card's peak under its earlier name
    "vram_peak_mib"; the server's where it was kept), then mark the file format 4; one transaction. A point whose
    cell cannot be read keeps empty columns (its figures read as before)."""
    conn.execute("BEGIN")
    try:
        for statement in _MIGRATE_3_TO_4:
            conn.execute(statement)
        for run_id, idx, blob in conn.execute("SELECT run_id, idx, doc FROM points").fetchall():
            try:
                gpu = GpuFigures.from_json((_unpack(blob).get("gpu") or {}) if isinstance(blob, bytes) else {})
            except (ValueError, TypeError, AttributeError, zlib.error):
                continue
            conn.execute("UPDATE points SET server_peak_mib = ?, card_peak_mib = ? WHERE run_id = ? AND idx = ?",
                         (gpu.server_peak_mib, gpu.card_peak_mib, run_id, idx))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise


class _ConversionFailed(Exception):
    """Converting an older format failed for a reason other than a lock or a read-only file."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


__all__ = ["BenchHistory", "HISTORY_FILE_NAME", "HistoryError", "HistoryLocationError", "RunSummary",
           "default_history_path"]
