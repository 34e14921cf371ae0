"""Opening one of the SQLite histories without ever mistaking a healthy file for a damaged one.

Only what SQLite itself calls damaged (SQLITE_NOTADB, SQLITE_CORRUPT) or what fails
`PRAGMA integrity_check` is moved aside, with its -wal and -shm. A file another process holds locked
is waited for, then reported with the programs that have it open; a file or folder this user may
not write is opened read-only; a path that is a folder, or lies under a file, is refused. The
check reads only: a file is never changed before it is known to be a database this build can use.

integrity_check rather than quick_check: quick_check skips the comparison of every index with
its table, and integrity_check costs hardly more: on a 234 MiB benchmark history (6,400 runs of
8 points of 200 requests) integrity_check took 0.145-0.151 s and quick_check 0.134-0.142 s (warm
cache; benchmarks/bench_history_check.py). The check runs once per process, off the GUI thread.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from app.adapters.storage.atomic_json import utc_stamp
from app.core.errors import DeckError

BUSY_TIMEOUT_S = 10.0  # how long a connection waits for another writer's lock
CHECK_PRAGMA = "integrity_check"
SIDECARS = ("", "-wal", "-shm")  # the files of one WAL database, moved together
# What a call into sqlite3 raises for a bad file: Python's sqlite3 raises UnicodeDecodeError when
# SQLite's own error message holds bytes that are not UTF-8, which a damaged schema produces.
SQLITE_ERRORS = (sqlite3.Error, UnicodeDecodeError)


class HistoryError(DeckError):
    """A history file could not be read or written."""

    hint = "Results already shown are not lost; check the data folder's permissions and free space."


class HistoryLocationError(HistoryError):
    """The path cannot hold a history file (a folder, under a file, or its folder cannot be made)."""

    hint = "Nothing was changed there; give the path of a file, e.g. …/benchmarks.sqlite3."


@dataclass
class Opened:
    """What opening found: whether the file may be written, and what the user must be told."""

    read_only: bool = False
    immutable: bool = False  # the folder is read-only too: SQLite may not create a -shm beside the file
    moved_to: Path | None = None
    problems: list[str] = field(default_factory=list)
    tables: dict[str, set[str]] = field(default_factory=dict)  # table -> its columns, of an existing file
    version: int = 0  # PRAGMA user_version of an existing file


def error_name(exc: BaseException) -> str:
    """SQLite's primary result code name for an error (e.g. 'SQLITE_CORRUPT'), or ''."""
    return str(getattr(exc, "sqlite_errorname", "") or "")


def is_damage(exc: BaseException) -> bool:
    """True when SQLite says the file is not a database or is malformed."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    name, text = error_name(exc), str(exc)
    return name == "SQLITE_NOTADB" or name.startswith("SQLITE_CORRUPT") \
        or "file is not a database" in text or "malformed" in text


def is_busy(exc: BaseException) -> bool:
    """True when the error is another connection's lock (the busy timeout ran out)."""
    name, text = error_name(exc), str(exc)
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in text


def is_read_only(exc: BaseException) -> bool:
    """True when SQLite could not write because the file, its folder or the disk is read-only."""
    return error_name(exc).startswith("SQLITE_READONLY") or "readonly database" in str(exc)


def holders(path: Path) -> list[str]:
    """'name (pid N)' of every other process that has the database or its -wal/-shm open."""
    targets = {os.path.realpath(f"{path}{suffix}") for suffix in (*SIDECARS, "-journal")}
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.pid == os.getpid():
            continue
        try:
            files = proc.open_files()
        except (psutil.Error, OSError):  # another user's process, or gone meanwhile: cannot be seen
            continue
        if any(os.path.realpath(f.path) in targets for f in files):
            found.append(f"{proc.info.get('name') or 'a process'} (pid {proc.pid})")
    return found


def locked_error(path: Path, what: str, waited_s: float, exc: BaseException) -> HistoryError:
    """The error for a file another program holds locked, naming who has it open."""
    who = holders(path)
    by = ", ".join(who) if who else "another program (which one could not be seen)"
    return HistoryError(f"The {what} {path} is locked by {by}: waited {waited_s:g} s for it ({exc}); "
                        "nothing was changed.",
                        hint="Try again when that program has finished writing, or close it.")


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def check_location(path: Path, what: str) -> None:
    """Raise HistoryLocationError unless path can be a history file; creates the folders above it."""
    try:
        if path.is_dir():
            raise HistoryLocationError(f"{path} is a folder, not a file for the {what}; nothing in it was changed.",
                                       hint=f"Give a file name, e.g. {path / 'benchmarks.sqlite3'}.")
        if path.exists() and not path.is_file():
            raise HistoryLocationError(f"{path} is not a regular file, so it cannot hold the {what}.")
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    except OSError as exc:  # a folder above that this user may not look into
        raise HistoryLocationError(f"Cannot reach the {what} at {path}: {exc.strerror or exc}.") from exc
    if blocker is not None:
        raise HistoryLocationError(f"Cannot create the folder for the {what} ({path.parent}): {blocker} is a "
                                   "file, not a folder.",
                                   hint=f"Nothing was changed; rename {blocker}, or choose another place.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HistoryLocationError(f"Cannot create the folder for the {what} ({path.parent}): "
                                   f"{exc.strerror or exc}.") from exc


def check_shape(path: Path, what: str, a_what: str, tables: dict[str, set[str]],
                required: dict[str, frozenset[str]]) -> None:
    """Refuse (without changing it) a database that is not `a_what`, or whose tables lack required columns."""
    if not tables:
        return
    if not set(required) & set(tables):
        raise HistoryError(f"{path} is an SQLite database but not {a_what} (it holds the tables "
                           f"{', '.join(sorted(tables))}); nothing was changed.", hint="Choose another file for it.")
    for table, wanted in required.items():
        missing = sorted(wanted - tables.get(table, set()))
        if missing:
            raise HistoryError(f"The {what} {path} is damaged: its table {table} lacks {', '.join(missing)}; "
                               "nothing was changed.", hint="Move the file away to start a new one; it is kept as it is.")


def read_only_uri(path: Path, immutable: bool) -> str:
    """The URI that opens path read-only (immutable: without a -shm, for a read-only folder)."""
    return path.resolve().as_uri() + ("?mode=ro&immutable=1" if immutable else "?mode=ro")


def set_aside(path: Path, what: str, why: str) -> Path:
    """Move path and its -wal/-shm to <name>.corrupt-<stamp>; HistoryError when they cannot be moved."""
    stamp = utc_stamp()  # the same stamp as the JSON files' copies, so they sort together
    kept = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while any(Path(f"{kept}{s}").exists() for s in SIDECARS):
        n += 1
        kept = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        for suffix in SIDECARS:
            source = Path(f"{path}{suffix}")
            if source.exists():
                source.rename(Path(f"{kept}{suffix}"))
    except OSError as exc:
        raise HistoryError(f"The {what} {path} is damaged ({why}) and could not be moved aside "
                           f"({exc.strerror or exc}); it was left as it is.",
                           hint="Move or delete it by hand; until then nothing is saved to it.") from exc
    return kept


def _damage_report(rows: list[tuple[object, ...]]) -> str:
    """The first lines the check found, or '' when it said ok."""
    lines = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(lines[:3]) + (f" (and {len(lines) - 3} more)" if len(lines) > 3 else "")


def _inspect(path: Path, immutable: bool, busy_timeout_s: float, opened: Opened) -> str:
    """Read-only look at an existing file: fills tables and version; returns why it is damaged, or ''."""
    try:
        conn = sqlite3.connect(read_only_uri(path, immutable), uri=True, timeout=busy_timeout_s)
    except SQLITE_ERRORS as exc:
        return _damage_text(exc) if is_damage(exc) else _raise_open(path, exc)
    try:
        conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
        report = _damage_report(conn.execute(f"PRAGMA {CHECK_PRAGMA}").fetchall())
        if report:
            return f"{CHECK_PRAGMA}: {report}"
        opened.version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for name in names:
            if not str(name).startswith("sqlite_"):
                opened.tables[str(name)] = {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{name}")')}
        return ""
    except SQLITE_ERRORS as exc:
        if is_damage(exc):
            return _damage_text(exc)
        if is_busy(exc):
            raise
        raise HistoryError(f"Cannot read {path}: {exc}.") from exc
    finally:
        conn.close()


def _damage_text(exc: BaseException) -> str:
    return "SQLite's message about it is not even text" if isinstance(exc, UnicodeDecodeError) else str(exc)


def _raise_open(path: Path, exc: BaseException) -> str:
    raise HistoryError(f"Cannot open {path}: {exc}.", hint="Check the file's permissions.") from exc


def open_file(path: Path, what: str, busy_timeout_s: float = BUSY_TIMEOUT_S) -> Opened:
    """Check path before any write: refuse a bad location, move a damaged file aside, see read-only.

    Raises HistoryLocationError (the path cannot be a file), or HistoryError when the file is
    locked or cannot be read; neither changes anything on disk.
    """
    check_location(path, what)
    opened = Opened()
    folder_writable = _writable(path.parent)
    if not path.exists() or path.stat().st_size == 0:
        if not folder_writable:
            raise HistoryLocationError(f"Cannot create the {what} at {path}: the folder {path.parent} is "
                                       "read-only.", hint="Fix the folder's permissions, or choose another place.")
        return opened
    # Without a writable folder SQLite cannot make the -shm a WAL reader needs: read it as immutable.
    opened.immutable = not folder_writable
    try:
        why = _inspect(path, opened.immutable, busy_timeout_s, opened)
    except sqlite3.Error as exc:  # only a busy error gets here
        raise locked_error(path, what, busy_timeout_s, exc) from exc
    if why:
        opened.moved_to = set_aside(path, what, why)
        opened.tables, opened.version = {}, 0
        opened.problems.append(f"The {what} {path} could not be read: it is damaged ({why}). It was moved to "
                               f"{opened.moved_to} and a new one was started.")
        return opened
    if not (folder_writable and _writable(path)):
        opened.read_only = True
    return opened


__all__ = ["BUSY_TIMEOUT_S", "HistoryError", "HistoryLocationError", "Opened", "check_location", "check_shape",
           "holders", "is_busy", "is_damage", "is_read_only", "locked_error", "open_file", "read_only_uri", "set_aside",
           "SQLITE_ERRORS"]
