"""The log of a server ollama-deck attached to but did not start, followed where it lives.

A systemd service logs to the journal (`journalctl -u ollama.service -f`); the Ollama desktop app
writes ~/.ollama/logs/server.log. Either is followed from its last lines onwards and passed line by
line to a callback, like the log of a managed server. What cannot be followed (no journalctl, no
permission to read the journal, no log file) is said in one line, once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from collections.abc import Callable, Coroutine
from typing import Any, BinaryIO

from app.core.server.state import ExternalKind

TAIL_LINES = 200
FILE_POLL_S = 0.5
DESKTOP_LOG = Path("~/.ollama/logs/server.log")
SYSTEMD_UNIT = "ollama.service"
MARK = "[ollama-deck] "  # lines the app adds, told apart from the server's own

LineSink = Callable[[str], None]
Follower = Callable[[LineSink], Coroutine[Any, Any, None]]


def follower_for(kind: ExternalKind | None, *, journalctl: str | None = None,
                 desktop_log: Path | None = None, unit: str = SYSTEMD_UNIT) -> Follower | None:
    """How to follow the log of a server run by `kind`; None when its log is out of reach (a
    terminal's `ollama serve` writes to that terminal)."""
    if kind is ExternalKind.SYSTEMD:
        return lambda sink: follow_journal(sink, unit, journalctl)
    if kind is ExternalKind.TRAY_APP:
        path = (desktop_log or DESKTOP_LOG).expanduser()
        return lambda sink: follow_file(sink, path)
    return None


async def follow_journal(sink: LineSink, unit: str = SYSTEMD_UNIT, journalctl: str | None = None) -> None:
    """Pass the unit's journal to sink, from its last TAIL_LINES lines on, until cancelled."""
    program = journalctl or shutil.which("journalctl")
    if program is None:
        sink(f"{MARK}journalctl is not on this system, so the service's log cannot be followed here.")
        return
    try:
        proc = await asyncio.create_subprocess_exec(
            program, "--unit", unit, "--follow", "--lines", str(TAIL_LINES), "--output", "cat", "--no-pager",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    except OSError as exc:
        sink(f"{MARK}Could not run journalctl: {exc.strerror or exc}.")
        return
    assert proc.stdout is not None
    saw_lines = False
    try:
        while True:
            raw = await proc.stdout.readline()
            if not raw:
                break
            saw_lines = True
            sink(raw.decode("utf-8", errors="replace").rstrip("\n"))
        code = await proc.wait()
        if code != 0 or not saw_lines:
            sink(f"{MARK}journalctl stopped (exit {code}). Reading another service's journal needs membership "
                 "of the systemd-journal (or adm) group: sudo usermod -aG systemd-journal $USER, then log in again.")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def follow_file(sink: LineSink, path: Path, poll_s: float = FILE_POLL_S) -> None:
    """Pass a log file to sink, from its last TAIL_LINES lines on, following appends, truncation and
    rotation (a new file under the same name), until cancelled."""
    said_missing = False
    while True:
        try:
            handle = open(path, "rb")
        except OSError:
            if not said_missing:
                sink(f"{MARK}Waiting for {path} (the desktop app writes its server log there).")
                said_missing = True
            await asyncio.sleep(poll_s)
            continue
        with handle:
            inode = os.fstat(handle.fileno()).st_ino
            for line in _last_lines(handle, TAIL_LINES):
                sink(line)
            partial = b""
            while True:
                chunk = handle.read()
                if chunk:
                    *raw_lines, partial = (partial + chunk).split(b"\n")
                    for raw in raw_lines:
                        sink(raw.decode("utf-8", errors="replace").rstrip("\r"))
                    continue
                await asyncio.sleep(poll_s)
                try:
                    now = os.stat(path)
                except OSError:
                    break  # rotated away: wait for the new file
                if now.st_ino != inode or now.st_size < handle.tell():
                    sink(f"{MARK}{path.name} was rotated or truncated; following the new file.")
                    break
        said_missing = False


def _last_lines(handle: BinaryIO, count: int, block: int = 65536) -> list[str]:
    """The file's last `count` complete lines; the handle is left just after them, so a line still
    being written is read (whole) by the caller once it ends."""
    handle.seek(0, os.SEEK_END)
    end = handle.tell()
    data = b""
    position = end
    while position > 0 and data.count(b"\n") <= count:
        step = min(block, position)
        position -= step
        handle.seek(position)
        data = handle.read(step) + data
    *complete, partial = data.split(b"\n")
    handle.seek(end - len(partial))
    if position > 0 and complete:
        complete = complete[1:]  # the first piece may be the tail of a longer line
    return [line.decode("utf-8", errors="replace").rstrip("\r") for line in complete[-count:]]
