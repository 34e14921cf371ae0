"""The one way the app reads its JSON state files (settings, presets, window state): read the
bytes, decode them, and move a file that cannot be used aside under a timestamped name, so it is
never overwritten unseen. Each store turns the outcome into its own words."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.adapters.storage.atomic_json import STALE_TEMP_AGE_S, remove_stale_temp_files, set_aside

MISSING = "missing"  # no file yet
READ = "read"  # decoded; `data` holds the document
UNREADABLE = "unreadable"  # the file exists but could not be read (permissions, I/O); left in place
SET_ASIDE = "set aside"  # not usable; moved to `kept`
STUCK = "stuck"  # not usable, and could not be moved aside (`move_error` says why); left in place


@dataclass(frozen=True)
class JsonRead:
    """What reading one JSON file found."""

    outcome: str
    data: Any = None
    raw: bytes | None = None
    why: str = ""  # for UNREADABLE the system's reason; for SET_ASIDE/STUCK what is wrong with the file
    kept: Path | None = None
    move_error: str = ""

    @property
    def ok(self) -> bool:
        """True when `data` holds a usable document."""
        return self.outcome == READ


def decode_json(raw: bytes) -> tuple[Any, str]:
    """The document in raw UTF-8 JSON bytes and '' — or None and why it is not valid JSON."""
    try:
        return json.loads(raw.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, "it is not valid JSON (it is not UTF-8 text)"
    except json.JSONDecodeError as exc:
        return None, f"it is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"


def os_reason(exc: OSError) -> str:
    """The system's words for an OSError, e.g. 'Permission denied'."""
    return exc.strerror or str(exc)


def read_json_file(
    path: Path, tag: str, shape_problem: Callable[[Any], str] | None = None,
    *, stale_temp_age_s: float = STALE_TEMP_AGE_S,
) -> JsonRead:
    """Read path as JSON, first removing temp files of saves that died.

    A file that is not valid JSON, or whose document shape_problem() finds unusable (it returns
    why, '' when fine), is moved to <name>.<tag>-<UTC stamp> beside it.
    """
    remove_stale_temp_files(path, stale_temp_age_s)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return JsonRead(MISSING)
    except OSError as exc:
        return JsonRead(UNREADABLE, why=os_reason(exc))
    data, why = decode_json(raw)
    if not why and shape_problem is not None:
        why = shape_problem(data)
    if not why:
        return JsonRead(READ, data, raw)
    try:
        kept = set_aside(path, tag)
    except OSError as exc:
        return JsonRead(STUCK, raw=raw, why=why, move_error=os_reason(exc))
    return JsonRead(SET_ASIDE, raw=raw, why=why, kept=kept)


__all__ = ["JsonRead", "MISSING", "READ", "SET_ASIDE", "STUCK", "UNREADABLE", "decode_json", "os_reason",
           "read_json_file"]
