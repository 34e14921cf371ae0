"""Where the window was left: its geometry, the page on show and the console's Markdown switch
(window.json in the user config folder, written atomically). Losing it costs nothing but a
default window, so a file that cannot be read is moved aside, logged and replaced on the next save.

Each field is checked on its own and a bad one falls back to its default: a page name that is not
short text, a geometry that is not base64 or is far longer than Qt's (a ~66-byte blob; Qt itself
refuses a malformed one and moves a window that would land off-screen back onto it), a Markdown
switch that is not true or false. Unknown keys and a newer "version" are ignored: the next save
writes this version's file.
"""

from __future__ import annotations

import base64
import binascii
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


from app.adapters.storage import paths as storage_paths
from app.adapters.storage.atomic_json import write_json_atomic
from app.adapters.storage.json_file import SET_ASIDE, STUCK, UNREADABLE, read_json_file

UI_STATE_FILE_NAME = "window.json"
FORMAT_VERSION = 1
MAX_GEOMETRY_BYTES = 4096  # QWidget.saveGeometry() writes well under 100 bytes
MAX_PAGE_NAME = 64  # characters; page names are short words such as "server"
MAX_RECENT_FILES = 10
MAX_PATH_CHARS = 4096  # a path longer than Linux's PATH_MAX is not one

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UiState:
    """What the next start restores; None where nothing was saved."""

    page: str | None = None
    geometry: bytes | None = None  # QWidget.saveGeometry(): screen, position, size, maximised
    markdown: bool = True
    recent_files: tuple[str, ...] = ()  # model files served lately, newest first (the file fields' Recent menu)
    notify_severe: bool = True  # a desktop notification for each severe event the watchdog raises
    exporter_port: int | None = None  # the Prometheus exporter's port while it was on at quit; None: off

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["recent_files"] = list(self.recent_files)
        data["geometry"] = base64.b64encode(self.geometry).decode("ascii") if self.geometry else None
        if self.notify_severe:  # the default is not written: a file of an earlier release is saved unchanged
            del data["notify_severe"]
        if self.exporter_port is None:  # likewise: off is the default
            del data["exporter_port"]
        return {"version": FORMAT_VERSION, **data}

    @classmethod
    def from_json(cls, data: Any) -> UiState:
        """Every field checked on its own: a bad one falls back to its default, the rest is kept."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        page = data.get("page")
        if not isinstance(page, str) or not 0 < len(page) <= MAX_PAGE_NAME:
            page = None
        geometry = None
        encoded = data.get("geometry")
        if isinstance(encoded, str) and len(encoded) <= 2 * MAX_GEOMETRY_BYTES:
            try:
                geometry = base64.b64decode(encoded, validate=True) or None
            except (binascii.Error, ValueError):
                geometry = None
        if geometry is not None and len(geometry) > MAX_GEOMETRY_BYTES:
            geometry = None
        stored_markdown = data.get("markdown")
        markdown = stored_markdown if isinstance(stored_markdown, bool) else True
        stored_recent = data.get("recent_files")
        recent = tuple(dict.fromkeys(
            p for p in (stored_recent if isinstance(stored_recent, list) else [])
            if isinstance(p, str) and 0 < len(p) <= MAX_PATH_CHARS and "\0" not in p))[:MAX_RECENT_FILES]
        stored_notify = data.get("notify_severe")
        notify = stored_notify if isinstance(stored_notify, bool) else True
        port = data.get("exporter_port")
        exporter_port = port if type(port) is int and 1024 <= port <= 65535 else None
        return cls(page, geometry, markdown, recent, notify, exporter_port)


def with_recent(recent: tuple[str, ...], path: str) -> tuple[str, ...]:
    """`recent` with `path` first (once), at most MAX_RECENT_FILES long; unchanged for an empty path."""
    path = path.strip()
    if not path:
        return recent
    return (path, *(p for p in recent if p != path))[:MAX_RECENT_FILES]


def _shape_problem(data: Any) -> str:
    """Why a decoded window.json cannot be used ('' when it can: bad fields fall back one by one)."""
    return "" if isinstance(data, dict) else "not a JSON object"


class UiStateStore:
    """Reads and writes window.json in one folder."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = storage_paths.config_dir(config_dir)
        self.path = self.config_dir / UI_STATE_FILE_NAME

    def load(self) -> UiState:
        """The saved state, or the defaults (a file that cannot be read is moved aside and logged)."""
        found = read_json_file(self.path, "unreadable", _shape_problem)
        if found.ok:
            return UiState.from_json(found.data)
        if found.outcome == UNREADABLE:
            log.warning("could not read %s (%s); the window opens with its defaults", self.path, found.why)
        elif found.outcome == SET_ASIDE:
            log.warning("%s was unreadable (%s); moved to %s, the window opens with its defaults",
                        self.path, found.why, found.kept.name if found.kept else "?")
        elif found.outcome == STUCK:
            log.warning("%s is unreadable (%s) and could not be moved aside (%s)", self.path, found.why,
                        found.move_error)
        return UiState()

    def save(self, state: UiState) -> bool:
        """Write the state atomically; False (logged) when the folder cannot be written."""
        try:
            self.config_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.path, state.to_json())
        except OSError as exc:
            log.warning("could not save the window state to %s: %s", self.path, exc)
            return False
        return True
