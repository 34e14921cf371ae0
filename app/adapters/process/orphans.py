"""Recognising servers an earlier run of the app started and left behind, from their records.

A record is judged by the processes it names, by pid and start time, never by name:
- its app still runs (this run or another instance): left alone;
- the server is gone: stale, the record is removed silently;
- the server's pid now belongs to another process (start time differs, or the command line differs and
  the process does not lead the session the server was started in): the record is removed and nothing is
  signalled. The command line is read right after the spawn, so a server started through a launcher
  script that `exec`s the real program shows another one later: the same pid, the same start time (exec
  keeps both) and still the leader of its own session (the spawn made it one) say it is the same process;
- the app is gone and the server still runs as recorded: an orphan, which the supervisor may adopt;
- the app and the server are gone but processes of the server's group live on (runners orphaned by
  a SIGKILLed server, which a parent-death signal cannot reach): they are stopped and the record
  removed, since they can serve nothing and only hold memory.
"""

from __future__ import annotations

import enum
import os
import signal
import time
from dataclasses import dataclass

import psutil

from app.adapters.process import procs
from app.adapters.process.runtime_record import (START_TIME_TOLERANCE_S, RecordBook, ServerRecord, running,
                                                 same_start)

KILL_WAIT_S = 2.0


class Verdict(enum.Enum):
    OWNED = "its app still runs"
    ORPHAN = "left running by an app that is gone"
    STALE = "the server is gone"
    REUSED = "the pid now belongs to another process"
    LEFTOVERS = "the server is gone, processes it started live on"


@dataclass(frozen=True)
class Inspection:
    """What a record names today."""

    record: ServerRecord
    verdict: Verdict
    server: psutil.Process | None = None  # for ORPHAN: the live server, checked by start time
    leftovers: tuple[psutil.Process, ...] = ()  # for LEFTOVERS: live members of its process group


@dataclass(frozen=True)
class Survey:
    """The records after one look: the orphan on the asked-for address, and what was cleaned up."""

    orphan: Inspection | None  # a live orphan recorded for this backend, host and port, listening there
    elsewhere: tuple[Inspection, ...]  # live orphans recorded for other addresses (left as they are)
    reaped: tuple[int, ...]  # pids of leftovers of gone servers that were stopped
    removed: int  # stale or reused records deleted


def inspect(record: ServerRecord) -> Inspection:
    """Judge one record against the running processes (reads /proc; call off the event loop)."""
    if running(record.app_pid, record.app_create_time) is not None:
        return Inspection(record, Verdict.OWNED)
    try:
        proc: psutil.Process | None = psutil.Process(record.pid)
        assert proc is not None
        zombie = proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # ZombieProcess included
        proc, zombie = None, True
    except psutil.AccessDenied:
        return Inspection(record, Verdict.REUSED)  # another user's process: not ours to look into
    if proc is not None and not same_start(proc, record.create_time):
        return Inspection(record, Verdict.REUSED)  # a zombie too: its group is not the recorded one
    if proc is not None and not zombie:
        if not _same_cmdline(proc, record) and not _leads_its_session(proc):
            return Inspection(record, Verdict.REUSED)  # a new process under a reused pid (and start second)
        return Inspection(record, Verdict.ORPHAN, server=proc)
    leftovers = tuple(p for p in procs.group_members(record.pid, record.create_time, START_TIME_TOLERANCE_S)
                      if _same_session(p, record.pid))
    return Inspection(record, Verdict.LEFTOVERS, leftovers=leftovers) if leftovers else Inspection(
        record, Verdict.STALE)


def _same_cmdline(proc: psutil.Process, record: ServerRecord) -> bool:
    try:
        return tuple(proc.cmdline()) == record.cmdline
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _leads_its_session(proc: psutil.Process) -> bool:
    """True when proc leads its own session, as the spawn made the server (False where that cannot be seen)."""
    if not hasattr(os, "getsid"):
        return False
    pid: int = proc.pid
    try:
        return os.getsid(pid) == pid
    except OSError:
        return False


def _same_session(proc: psutil.Process, sid: int) -> bool:
    # The server was its own session's leader, so what it started shares its session id too.
    if not hasattr(os, "getsid"):
        return True
    try:
        return os.getsid(proc.pid) == sid
    except OSError:
        return False


def _normalise_host(host: str) -> str:
    return host.strip().strip("[]").lower()


def survey(book: RecordBook, backend: str, host: str, port: int, grace_s: float = 5.0) -> Survey:
    """Look at every record: remove stale and reused ones, stop leftovers of gone servers (SIGTERM,
    grace_s seconds, SIGKILL), and return the live orphan recorded for backend on host:port (unless
    another process is seen listening there).
    Blocks while leftovers stop; call it off the event loop."""
    orphan: Inspection | None = None
    elsewhere: list[Inspection] = []
    reaped: list[int] = []
    removed = 0
    for record in book.load_all():
        found = inspect(record)
        if found.verdict is Verdict.OWNED:
            continue
        if found.verdict is Verdict.ORPHAN:
            here = (record.backend == backend and record.port == port
                    and _normalise_host(record.host) == _normalise_host(host))
            if here and orphan is None and listens_here(found, procs.listening_pids(host, port)):
                orphan = found
            else:
                elsewhere.append(found)
            continue
        if found.verdict is Verdict.LEFTOVERS:
            reaped += [p.pid for p in found.leftovers]
            stop_processes(list(found.leftovers), grace_s)
        else:
            removed += 1
        book.remove(record)
    return Survey(orphan, tuple(elsewhere), tuple(reaped), removed)


def stop_processes(targets: list[psutil.Process], grace_s: float) -> list[psutil.Process]:
    """SIGTERM, wait grace_s seconds, SIGKILL what is left; returns any that survived (blocking).
    psutil refuses to signal a process whose pid was reused since it was looked up."""
    procs.signal_all(targets, signal.SIGTERM)
    _gone, left = psutil.wait_procs(procs.alive(targets), timeout=grace_s)
    left = procs.alive(left)
    if left:
        procs.signal_all(left, signal.SIGKILL)
        _gone, left = psutil.wait_procs(left, timeout=KILL_WAIT_S)
    return procs.alive(left)


def listens_here(found: Inspection, listeners: set[int] | None) -> bool:
    """True when the orphan (or one of its tree) is among the processes listening on the recorded
    port, or when the system does not say who listens (then the record alone decides)."""
    if not listeners or found.server is None:
        return True
    return bool(listeners & {p.pid for p in procs.tree_of(found.server)})


def since_text(epoch_s: float, now_s: float | None = None) -> str:
    """'14:02' for a time today, '2026-11-30 14:02' for an earlier day (local time)."""
    then = time.localtime(epoch_s)
    today = time.localtime(now_s if now_s is not None else time.time())
    same_day = then.tm_yday == today.tm_yday and then.tm_year == today.tm_year
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", then)


def orphan_message(program: str, record: ServerRecord) -> str:
    """What the user should know about an adopted orphan, naming its pid, start and address."""
    return (
        f"{program} that ollama-deck started earlier (pid {record.pid}, since {since_text(record.create_time)}) "
        f"is still running at {record.base_url}: its app was closed without stopping it. ollama-deck "
        "manages it again: Stop it, or keep using it (it is stopped when you quit, like any server "
        "ollama-deck starts). " + (f"Its log is read from {record.log_path}." if record.log_path else
                                   "Its log is not available: its output went to the app that was closed.")
    )


def elsewhere_note(program: str, found: tuple[Inspection, ...]) -> str:
    """A sentence about orphans recorded for other addresses, or '' when there are none."""
    if not found:
        return ""
    listed = ", ".join(f"{i.record.base_url} (pid {i.record.pid})" for i in found)
    return (f" {program} that ollama-deck started earlier still runs at {listed}: set that host and port "
            "to take it back and stop it.")


def reaped_note(pids: tuple[int, ...]) -> str:
    """A sentence about leftovers that were stopped, or '' when there were none."""
    if not pids:
        return ""
    listed = ", ".join(str(p) for p in pids)
    noun = "process" if len(pids) == 1 else "processes"
    return (f" ollama-deck stopped {len(pids)} {noun} (pid {listed}) that a server it started earlier "
            "left behind when it was killed; they held memory and could serve nothing.")


__all__ = ["Inspection", "Survey", "Verdict", "elsewhere_note", "inspect", "listens_here", "orphan_message",
           "reaped_note", "since_text", "stop_processes", "survey"]
