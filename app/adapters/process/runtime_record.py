"""A small JSON file per server the app started, so a later run can tell a server left behind by a
killed app (an orphan it may stop) from a server someone else runs (which it never touches).

One file per managed server in the runtime folder (adapters/storage/paths.runtime_dir), written
atomically right after the spawn and removed once the server and its leftovers are gone. A process
is identified by its pid together with its start time (psutil create_time), never by its name."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import psutil

from app.adapters.storage.atomic_json import write_json_atomic
from app.adapters.storage.json_file import decode_json, read_capped

log = logging.getLogger(__name__)

RECORD_FORMAT = 1
RECORD_PREFIX = "server-"
RECORD_SUFFIX = ".json"
# psutil derives create_time from the boot time, which the clock's adjustments can move a little.
START_TIME_TOLERANCE_S = 1.0
MAX_PID = 2**22  # Linux's largest pid_max; a bigger number names no process anywhere


@dataclass(frozen=True)
class ServerRecord:
    """What the app started: the server process, where it listens, and which app run started it."""

    backend: str  # registry name, e.g. "ollama"
    pid: int
    create_time: float  # psutil create_time of the server, seconds since the epoch
    cmdline: tuple[str, ...]  # as psutil read it right after the spawn
    host: str
    port: int
    base_url: str
    app_pid: int
    app_create_time: float  # psutil create_time of the app process that started it
    started_at: float  # wall clock when the record was written, seconds since the epoch
    dies_with_app: bool  # whether the server was asked to get SIGTERM when the app dies
    log_path: str | None = None  # the file its stdout and stderr go to

    def to_json(self) -> dict[str, object]:
        """The record as the JSON document on disk."""
        document: dict[str, object] = {"format": RECORD_FORMAT, **asdict(self)}
        document["cmdline"] = list(self.cmdline)
        return document

    @classmethod
    def from_json(cls, document: object) -> ServerRecord:
        """Read a record; raises ValueError when the document is not one."""
        if not isinstance(document, dict) or document.get("format") != RECORD_FORMAT:
            raise ValueError("not a server record of this format")
        try:
            record = cls(
                backend=str(document["backend"]), pid=int(document["pid"]),
                create_time=float(document["create_time"]),
                cmdline=tuple(str(part) for part in document["cmdline"]),
                host=str(document["host"]), port=int(document["port"]), base_url=str(document["base_url"]),
                app_pid=int(document["app_pid"]), app_create_time=float(document["app_create_time"]),
                started_at=float(document["started_at"]), dies_with_app=bool(document["dies_with_app"]),
                log_path=str(document["log_path"]) if document.get("log_path") else None,
            )
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"incomplete server record: {exc}") from None
        problem = record.problem()
        if problem:
            raise ValueError(f"not a usable server record: {problem}")
        return record

    def problem(self) -> str:
        """Why this record cannot name a process and an address ('' when it can)."""
        for name in ("pid", "app_pid"):
            if not 1 <= getattr(self, name) <= MAX_PID:
                return f"{name} {getattr(self, name)} is not a process id"
        if not 1 <= self.port <= 65535:
            return f"port {self.port} is outside 1-65535"
        for name in ("create_time", "app_create_time", "started_at"):
            if not math.isfinite(getattr(self, name)):
                return f"{name} is not a time"
        return ""

    def adopted_by_this_app(self) -> ServerRecord:
        """The same server, now owned by this app run (a later crash of ours orphans it again)."""
        pid, created = this_app()
        return replace(self, app_pid=pid, app_create_time=created, dies_with_app=False)


def this_app() -> tuple[int, float]:
    """This process's pid and start time (seconds since the epoch)."""
    return os.getpid(), psutil.Process().create_time()


def same_start(proc: psutil.Process, create_time: float) -> bool:
    """True when proc is still the process that started at create_time (not a reused pid)."""
    try:
        started: float = proc.create_time()
        return abs(started - create_time) <= START_TIME_TOLERANCE_S
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def running(pid: int, create_time: float) -> psutil.Process | None:
    """The live, non-zombie process with this pid and start time, or None."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return proc if same_start(proc, create_time) else None


def record_for(backend: str, pid: int, host: str, port: int, base_url: str, *, dies_with_app: bool,
               log_path: str | None = None) -> ServerRecord:
    """Describe a server this app just spawned; raises psutil.Error when it is already gone."""
    proc = psutil.Process(pid)
    app_pid, app_created = this_app()
    return ServerRecord(
        backend=backend, pid=pid, create_time=proc.create_time(), cmdline=tuple(proc.cmdline()),
        host=host, port=port, base_url=base_url, app_pid=app_pid, app_create_time=app_created,
        started_at=time.time(), dies_with_app=dies_with_app, log_path=log_path,
    )


class RecordBook:
    """The folder of server records; every method is safe to call from any thread and never raises
    for a folder that cannot be written (the app then works as before, without the records)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        # Where each record was read from: a file renamed or copied by hand still gets removed.
        self._read_from: dict[ServerRecord, Path] = {}

    def path_for(self, record: ServerRecord) -> Path:
        """The file of one record."""
        return self.folder / f"{RECORD_PREFIX}{record.backend}-{record.pid}{RECORD_SUFFIX}"

    def write(self, record: ServerRecord) -> bool:
        """Write (or replace) a record atomically; False when the folder cannot be written."""
        try:
            write_json_atomic(self.path_for(record), record.to_json())
        except OSError as exc:
            log.warning("could not write the server record in %s: %s", self.folder, exc)
            return False
        return True

    def remove(self, record: ServerRecord) -> None:
        """Delete a record's file (already gone is fine)."""
        for path in {self.path_for(record), self._read_from.pop(record, self.path_for(record))}:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not remove the server record %s: %s", path, exc)

    def load_all(self) -> list[ServerRecord]:
        """Every readable record; a file that is not one is removed (it names nothing we can trust)."""
        try:
            paths = sorted(self.folder.glob(f"{RECORD_PREFIX}*{RECORD_SUFFIX}"))
        except OSError:
            return []
        records = []
        for path in paths:
            try:
                # The one reader of state files: capped in size and depth, so no content can raise past it.
                document, why = decode_json(read_capped(path))
                if why:
                    raise ValueError(why)
                record = ServerRecord.from_json(document)
                self._read_from[record] = path
                records.append(record)
            except (OSError, ValueError) as exc:
                log.warning("removing the unreadable server record %s: %s", path, exc)
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass
        return records


__all__ = ["RecordBook", "ServerRecord", "record_for", "running", "same_start", "this_app"]
