"""The one way the app reads its JSON state files (settings, presets, window state): read the
bytes, decode them, and move a file that cannot be used aside under a timestamped name, so it is
never overwritten unseen. Each store turns the outcome into its own words.

A hand-edited, damaged or hostile file never raises out of here. What makes a file unusable:
- larger than MAX_FILE_BYTES (refused before it is read into memory);
- not UTF-8 (a UTF-8 byte-order mark at the start is accepted and skipped);
- not valid JSON, or nested deeper than MAX_DEPTH (Python's decoder and the writer recurse per
  level, so a file of 10^5 brackets would otherwise end in RecursionError);
- a whole number longer than Python converts (int_max_str_digits, 4300 digits by default);
- text holding a lone UTF-16 surrogate escape such as "\\ud800" (not Unicode: it could never be
  written back as UTF-8; I-JSON, RFC 7493, forbids it too).
NaN and Infinity, which Python's own writer emits, are read as floats: each store checks the
numbers it uses, and what it does not use is written back unchanged.
"""

from __future__ import annotations

import errno
import json
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from app.adapters.storage.atomic_json import STALE_TEMP_AGE_S, remove_stale_temp_files, set_aside
from app.core.units import MIB

MISSING = "missing"  # no file yet
READ = "read"  # decoded; `data` holds the document
UNREADABLE = "unreadable"  # the file exists but could not be read (permissions, I/O); left in place
SET_ASIDE = "set aside"  # not usable; moved to `kept`
LEFT = "left"  # not usable, and left in place as asked (a reader that must not change the file)
STUCK = "stuck"  # not usable, and could not be moved aside (`move_error` says why); left in place

# A state file is a few KiB; anything this large is not one of ours, and reading it could exhaust memory.
MAX_FILE_BYTES = 16 * MIB
# Our files are at most four levels deep. The limit leaves room under the interpreter's recursion
# limit (1000) for the decoder, the indenting writer (a frame per level) and the caller's own stack.
MAX_DEPTH = 256

_STRING_RE = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # a JSON string, escapes included
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
for _open in b"[{":
    _STEP[_open] = 1
for _close in b"]}":
    _STEP[_close] = -1
_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")


class FileTooLargeError(OSError):
    """The file is over MAX_FILE_BYTES; it was not read."""


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


def nesting_depth(raw: bytes) -> int:
    """How deeply arrays and objects nest in raw JSON bytes (brackets inside strings ignored)."""
    brackets = _STRING_RE.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def has_lone_surrogate(data: Any) -> bool:
    """True when a string (key or value) in a decoded document holds an unpaired UTF-16 surrogate."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def decode_json(raw: bytes) -> tuple[Any, str]:
    """The document in raw UTF-8 JSON bytes and '' — or None and why it cannot be used."""
    if len(raw) > MAX_FILE_BYTES:
        return None, too_large_reason(len(raw))
    try:
        text = raw.decode("utf-8-sig")  # a byte-order mark some editors add is not part of the document
    except UnicodeDecodeError:
        return None, "it is not valid JSON (it is not UTF-8 text)"
    # Fewer opening brackets than the limit cannot nest past it: most files skip the scan.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH and nesting_depth(raw) > MAX_DEPTH:
        return None, f"it is nested too deeply (more than {MAX_DEPTH} levels of brackets)"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"it is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
    except ValueError:  # int() refuses a number longer than sys.get_int_max_str_digits()
        return None, "it holds a number with too many digits to read"
    except RecursionError:  # the depth scan should prevent this; kept so nesting can never stop the app
        return None, "it is nested too deeply to read"
    except MemoryError:
        return None, "it is too large to read into memory"
    if _SURROGATE_ESCAPE_RE.search(text) and has_lone_surrogate(data):
        return None, "it holds text that is not valid Unicode (a lone surrogate escape such as \\ud800)"
    return data, ""


def too_large_reason(size: int) -> str:
    """Why a file of `size` bytes is refused."""
    return f"it is {size / MIB:.1f} MiB, larger than a state file can be ({MAX_FILE_BYTES // MIB} MiB at most)"


def read_capped(path: Path) -> bytes:
    """A regular file's bytes; raises FileNotFoundError, OSError, or FileTooLargeError (not read)."""
    info = path.stat()  # before opening: opening a named pipe would wait for a writer
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "it is not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise FileTooLargeError(errno.EFBIG, too_large_reason(info.st_size))
    with path.open("rb") as handle:
        raw = handle.read(MAX_FILE_BYTES + 1)  # a file that grew meanwhile is still capped
    if len(raw) > MAX_FILE_BYTES:
        raise FileTooLargeError(errno.EFBIG, too_large_reason(len(raw)))
    return raw


def os_reason(exc: OSError) -> str:
    """The system's words for an OSError, e.g. 'Permission denied'."""
    return exc.strerror or str(exc)


def read_json_file(
    path: Path, tag: str, shape_problem: Callable[[Any], str] | None = None,
    *, stale_temp_age_s: float = STALE_TEMP_AGE_S, move_aside: bool = True,
) -> JsonRead:
    """Read path as JSON, first removing temp files of saves that died.

    A file that is not valid JSON (or otherwise unusable, see the module's notes), or whose
    document shape_problem() finds unusable (it returns why, '' when fine), is moved to
    <name>.<tag>-<UTC stamp> beside it; with move_aside=False it is left where it is (LEFT).
    """
    remove_stale_temp_files(path, stale_temp_age_s)
    raw: bytes | None = None
    try:
        raw = read_capped(path)
    except FileNotFoundError:
        return JsonRead(MISSING)
    except FileTooLargeError as exc:
        why = os_reason(exc)
    except OSError as exc:
        return JsonRead(UNREADABLE, why=os_reason(exc))
    else:
        data, why = decode_json(raw)
        if not why and shape_problem is not None:
            why = shape_problem(data)
        if not why:
            return JsonRead(READ, data, raw)
    if not move_aside:
        return JsonRead(LEFT, raw=raw, why=why)
    try:
        kept = set_aside(path, tag)
    except OSError as exc:
        return JsonRead(STUCK, raw=raw, why=why, move_error=os_reason(exc))
    return JsonRead(SET_ASIDE, raw=raw, why=why, kept=kept)


__all__ = ["FileTooLargeError", "JsonRead", "LEFT", "MAX_DEPTH", "MAX_FILE_BYTES", "MISSING", "READ", "SET_ASIDE", "STUCK",
           "UNREADABLE", "decode_json", "has_lone_surrogate", "nesting_depth", "os_reason", "read_capped",
           "read_json_file", "too_large_reason"]
