"""The console's presets file (presets.json in the user config folder): atomic saves, and nothing
a user or another version wrote is lost unseen.

- A file that cannot be read as a whole (not valid JSON, nested too deeply, not an object with a
  "presets" list, a "version" that is not a whole number) is moved to presets.json.corrupt-<stamp>
  and reported; the built-in presets are shown.
- Entries this version cannot use (a wrong type, an unknown think value, a duplicated key) are
  reported and written back as they were on every save, after which the file still holds them;
  so are the fields of readable entries and the top-level keys this version does not know.
- A file a newer version wrote (a higher "version") is read as far as this version understands.
  Its bytes are kept at presets.json.v<N>-backup when it is read, before anything can write over
  it; saving then writes this version's format with everything it did not understand carried
  through, so the newer version finds its entries in the file and the exact original in the copy.
  A save that cannot keep that copy does not happen (PresetSaveError).
- A save that would still drop something (the unknown fields of a preset deleted since it was
  read, or a file changed on disk since it was read) first copies the file to presets.json.backup-<stamp>
  and returns a notice naming the copy.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from app.adapters.storage import paths as storage_paths
from app.adapters.storage.atomic_json import json_bytes, keep_copy, set_aside, utc_stamp, write_atomic
from app.adapters.storage.json_file import (MISSING, READ, STUCK, UNREADABLE, FileTooLargeError, os_reason,
                                            read_capped, read_json_file)
from app.core.console.presets import (PRESETS_VERSION, Preset, PresetLoad, SavedPresets, dropped_extras, read_user_data,
                                      user_data)
from app.core.errors import DeckError

PRESETS_FILE_NAME = "presets.json"
MAX_VERSION = 10_000  # a larger "version" is damage, not a newer file


class PresetSaveError(DeckError):
    """The presets could not be written; the previous file is unchanged."""

    hint = "Your previous presets file is unchanged; check the folder's permissions and free space."


def shape_problem(data: Any) -> str:
    """Why a decoded presets document cannot be read at all ('' when it can)."""
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a JSON {type(data).__name__}"
        return f"it holds {kind}, not an object with a \"presets\" list"
    version = data.get("version", PRESETS_VERSION)
    if isinstance(version, float) and version.is_integer() and abs(version) <= MAX_VERSION:
        version = int(version)
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        text = repr(version) if len(repr(version)) <= 40 else "<a value too long to show>"
        return f"its version {text} is not a whole number from 0 to {MAX_VERSION}"
    if not isinstance(data.get("presets", []), list):
        return "its \"presets\" entry is not a list"
    return ""


class PresetStore:
    """Reads and writes presets.json in one folder; `notices` collects what load and save reported."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = storage_paths.config_dir(config_dir)
        self.path = self.config_dir / PRESETS_FILE_NAME
        self.notices: list[str] = []
        self._saved: SavedPresets | None = None  # what the file held, carried into each save
        self._known: bytes | None = None  # the file's bytes as last read or written here
        self._owed_copy: tuple[bytes, str] | None = None  # bytes to keep before the next save, and their tag
        self._looked = False  # whether _known says what is on disk (False: never loaded, or the file was unreadable)
        self._saving = threading.Lock()

    def load(self) -> PresetLoad:
        """The built-in presets with the saved edits applied; problems are reported, not raised."""
        self._saved, self._known, self._owed_copy = None, None, None
        found = read_json_file(self.path, "corrupt", shape_problem)
        self._looked = found.outcome not in (UNREADABLE, STUCK)
        if found.outcome == READ:
            return self._loaded(found.data, found.raw or b"")
        builtins = read_user_data(None).presets
        if found.outcome == MISSING:
            problems = []
        elif found.outcome == UNREADABLE:
            problems = [f"Could not read {self.path}: {found.why}; showing the built-in presets. Saving will not "
                        "replace it until it can be read."]
        elif found.outcome == STUCK:
            problems = [f"{self.path} could not be read because {found.why}, and could not be moved aside "
                        f"({found.move_error}); showing the built-in presets. Saving keeps a copy of it first."]
        else:
            problems = [f"{self.path} could not be read because {found.why}; it was moved to {found.kept}. "
                        "Showing the built-in presets."]
        self.notices += problems
        return PresetLoad(builtins, problems)

    def _loaded(self, data: Any, raw: bytes) -> PresetLoad:
        saved = read_user_data(data)
        self._saved, self._known = saved, raw
        problems = list(saved.problems)
        if saved.unread:
            one = len(saved.unread) == 1
            problems.append(f"{'The skipped entry stays' if one else f'The {len(saved.unread)} skipped entries stay'}"
                            f" in {self.path} as written when presets are saved; fix or delete "
                            f"{'it' if one else 'them'} there.")
        if saved.newer:
            tag = f"v{saved.version}-backup"
            try:
                copy = keep_copy(self.path, raw, tag)
            except OSError as exc:
                self._owed_copy = (raw, tag)
                problems.append(f"Could not keep a copy of the newer file ({os_reason(exc)}); saving will try "
                                "again first and not save if it cannot.")
            else:
                problems.append(f"Saving will write format {PRESETS_VERSION} and keep what this version does not "
                                f"understand in it; the newer file is kept as it was at {copy}.")
        self.notices += problems
        return PresetLoad(saved.presets, problems)

    def save(self, presets: list[Preset]) -> list[str]:
        """Write the user's edits and own presets atomically, with everything carried (see the module's
        notes); returns notices of copies it kept. Raises PresetSaveError, leaving the old file."""
        with self._saving:  # the console saves from worker threads; one save at a time keeps _known true
            return self._save(presets)

    def _save(self, presets: list[Preset]) -> list[str]:
        notes: list[str] = []
        current = self._current_bytes(notes)
        if self._owed_copy is not None:
            raw, tag = self._owed_copy
            copy = self._copy(raw, tag)
            notes.append(f"The newer presets file is kept as it was at {copy}.")
            self._owed_copy = None
        saved = self._saved
        if current is not None and current != self._known:
            copy = self._copy(current, f"backup-{utc_stamp()}")
            how = "was changed since the presets were read" if self._looked else "had not been read"
            notes.append(f"{self.path} {how}; saving replaced it, and what it held is kept at {copy}.")
        elif current is not None and saved is not None and dropped_extras(presets, saved):
            keys = dropped_extras(presets, saved)
            copy = self._copy(current, f"backup-{utc_stamp()}")
            notes.append(f"The deleted presets {', '.join(map(repr, keys))} had fields this version does not know; "
                         f"they are no longer in {self.path}, and the file as it was is kept at {copy}.")
        if saved is not None:
            saved = dataclasses.replace(saved, extras={k: v for k, v in saved.extras.items()
                                                       if k not in dropped_extras(presets, saved)})
        payload = json_bytes(user_data(presets, saved))
        try:
            self.config_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, payload)
        except OSError as exc:
            raise PresetSaveError(f"Could not save presets to {self.path}: {os_reason(exc)}.") from exc
        self._saved, self._known, self._looked = saved, payload, True
        self.notices += notes
        return notes

    def _current_bytes(self, notes: list[str]) -> bytes | None:
        """The file's bytes now (None when there is none); a file too large to copy is renamed aside."""
        try:
            return read_capped(self.path)
        except FileNotFoundError:
            return None
        except FileTooLargeError:
            try:
                kept = set_aside(self.path, "corrupt")
            except OSError as exc:
                raise PresetSaveError(f"Did not save presets: {self.path} is too large to keep a copy of, and "
                                      f"could not be moved aside ({os_reason(exc)}).") from exc
            notes.append(f"{self.path} was too large to be a presets file; it was moved to {kept}.")
            return None
        except OSError as exc:
            raise PresetSaveError(f"Did not save presets: {self.path} exists but could not be read "
                                  f"({os_reason(exc)}), and saving would replace it unseen.",
                                  hint="Fix the file's permissions, then save again.") from exc

    def _copy(self, raw: bytes, tag: str) -> Path:
        try:
            return keep_copy(self.path, raw, tag)
        except OSError as exc:
            raise PresetSaveError(f"Did not save presets: a copy of {self.path} could not be kept in "
                                  f"{self.config_dir} ({os_reason(exc)}), and saving would lose what it holds.",
                                  hint="Free some space or fix the folder's permissions, then save again.") from exc


__all__ = ["MAX_VERSION", "PRESETS_FILE_NAME", "PresetLoad", "PresetSaveError", "PresetStore", "shape_problem"]
