"""Files written so that a reader (or a crash) sees the old content or the new, never a part:
write a temp file in the same folder, fsync it, rename it over the target, fsync the folder."""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile
import time
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"
# A temp file this old belongs to a save that died (killed, power loss); newer ones may be live.
STALE_TEMP_AGE_S = 60.0
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def temp_prefix(path: Path) -> str:
    """The prefix of temp files written for `path` (hidden, named after it)."""
    return f".{path.name}."


def write_atomic(path: Path, payload: bytes) -> None:
    """Replace path's content with payload atomically; raises OSError and leaves the old file."""
    directory = path.parent
    temp_name = None
    try:
        fd, temp_name = tempfile.mkstemp(prefix=temp_prefix(path), suffix=TEMP_SUFFIX, dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
        temp_name = None
        fsync_directory(directory)
    finally:
        if temp_name is not None:
            try:
                os.unlink(temp_name)
            except OSError:
                pass


def json_bytes(document: Any) -> bytes:
    """Readable UTF-8 JSON with a final newline (non-ASCII text kept as is).

    An unpaired surrogate (text from a broken source) has no UTF-8 form; it becomes U+FFFD rather
    than failing the save.
    """
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text).encode("utf-8")


def write_json_atomic(path: Path, document: Any) -> None:
    """Write a JSON document atomically, creating the folder; raises OSError, leaving the old file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json_bytes(document))


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable, where the platform allows it."""
    if os.name == "nt":
        return  # Windows cannot open a directory; its renames are journaled
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # the new file is already in place; some file systems refuse fsync on directories
    finally:
        os.close(fd)


def remove_stale_temp_files(path: Path, max_age_s: float = STALE_TEMP_AGE_S) -> None:
    """Delete temp files of `path` left by saves that died more than max_age_s ago."""
    try:
        candidates = list(path.parent.glob(f"{temp_prefix(path)}*{TEMP_SUFFIX}"))
    except OSError:
        return
    now = time.time()
    for temp in candidates:
        try:
            if now - temp.stat().st_mtime > max_age_s:
                temp.unlink()
        except OSError:
            continue


def utc_stamp() -> str:
    """A compact UTC timestamp for file names, e.g. 20260801T120000Z."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def free_name(path: Path) -> Path:
    """path, or path-2, path-3, … whichever does not exist yet."""
    if not path.exists():
        return path
    number = 2
    while True:
        candidate = path.with_name(f"{path.name}-{number}")
        if not candidate.exists():
            return candidate
        number += 1


def set_aside(path: Path, tag: str) -> Path:
    """Move an unreadable file to <name>.<tag>-<UTC stamp> beside it and return where; raises OSError."""
    target = free_name(path.with_name(f"{path.name}.{tag}-{utc_stamp()}"))
    os.replace(path, target)
    return target


def keep_copy(path: Path, raw: bytes, tag: str) -> Path:
    """Write raw to <name>.<tag>[-N] beside path, or return an existing copy with the same bytes; raises OSError."""
    base = path.with_name(f"{path.name}.{tag}")
    for candidate in [base, *sorted(path.parent.glob(f"{glob.escape(base.name)}-*"))]:
        try:
            if candidate.stat().st_size == len(raw) and candidate.read_bytes() == raw:
                return candidate
        except OSError:
            continue
    target = free_name(base)
    write_atomic(target, raw)
    return target


__all__ = ["STALE_TEMP_AGE_S", "free_name", "keep_copy", "fsync_directory", "json_bytes", "remove_stale_temp_files",
           "set_aside", "temp_prefix", "utc_stamp", "write_atomic", "write_json_atomic"]
