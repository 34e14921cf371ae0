"""The settings file: versioned JSON, atomic saves, and nothing a user wrote is ever lost.

Layout on disk (settings.json in the config directory)::

    {"version": 1, "saved_at": "2026-08-01T12:00:00+00:00",
     "settings": {...ServerSettings fields...}, "preferences": {...}}

Version 0 is the flat layout of the first builds: the settings fields at top level, no
"version" key, and a few older names (see _V0_RENAMES).
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field, fields
from datetime import datetime, UTC
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import platformdirs

from app.adapters.storage.atomic_json import STALE_TEMP_AGE_S, free_name, remove_stale_temp_files, utc_stamp, write_atomic
from app.core.errors import DeckError
from app.core.server.settings import SETTINGS_VERSION, FIELD_LABELS, ServerSettings, validate

SETTINGS_FILE_NAME = "settings.json"

# Older names of version 0, and how to turn their values into version 1.
_V0_RENAMES = {
    "parallel": "num_parallel",
    "num_ctx": "context_length",
    "kv_cache": "kv_cache_type",
    "flash_attn": "flash_attention",
    "models_path": "models_dir",
}


class SettingsSaveError(DeckError):
    """The settings file could not be written; the previous file is left as it was."""

    hint = "Your previous settings file is unchanged."


@dataclass(frozen=True)
class LoadResult:
    """What load() found: usable settings, what was wrong (user-readable), and any copy kept aside."""

    settings: ServerSettings
    problems: list[str] = field(default_factory=list)
    backup_path: Path | None = None
    preferences: dict[str, Any] = field(default_factory=dict)


class SettingsStore:
    """Reads and writes settings.json in one directory."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = Path(config_dir) if config_dir is not None else Path(
            platformdirs.user_config_dir("ollama-deck")
        )
        self.path = self.config_dir / SETTINGS_FILE_NAME

    # ---- loading -------------------------------------------------------------------------

    def load(self) -> LoadResult:
        """Read the settings file; anything unusable is reported, kept aside, and replaced by defaults."""
        self._remove_stale_temp_files()
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LoadResult(ServerSettings())
        except OSError as exc:
            return LoadResult(
                ServerSettings(),
                [f"Could not read {self.path}: {exc.strerror or exc}. Using default settings; "
                 "check the file's permissions."],
            )
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return self._set_aside_corrupt(f"it is not valid JSON ({_json_reason(exc)})")
        if not isinstance(data, dict):
            return self._set_aside_corrupt(f"it holds a JSON {type(data).__name__}, not an object")

        # A file that lost only its "version" key still has the versioned shape; do not treat it as v0.
        version = data.get("version", 1 if isinstance(data.get("settings"), dict) else 0)
        if not _is_int(version) or version < 0:
            return self._set_aside_corrupt(f"its version {version!r} is not a whole number")
        if version == 0:
            return self._load_v0(data, raw)
        body = data.get("settings", {})
        if not isinstance(body, dict):
            return self._set_aside_corrupt("its \"settings\" entry is not an object")
        preferences = data.get("preferences", {})
        problems: list[str] = []
        if not isinstance(preferences, dict):
            problems.append("The saved preferences were not an object; using defaults for them.")
            preferences = {}
        if version > SETTINGS_VERSION:
            return self._load_newer(version, body, preferences, raw, problems)
        settings, field_problems = _settings_from(body)
        problems += field_problems
        backup = None
        if field_problems:
            backup = self._keep_copy(raw, "invalid-backup")
            problems.append(_kept_note(backup, "the file as it was"))
        return LoadResult(settings, problems, backup, preferences)

    def _load_v0(self, data: dict[str, Any], raw: bytes) -> LoadResult:
        migrated, notes = _migrate_v0(data)
        settings, field_problems = _settings_from(migrated)
        problems = [
            f"{self.path} was in the old format (version 0); converted it to version "
            f"{SETTINGS_VERSION}." + (" " + " ".join(notes) if notes else "")
        ] + field_problems
        backup = self._keep_copy(raw, "v0-backup")
        if backup is None:
            problems.append(
                f"Could not keep a copy of the old file in {self.config_dir}, so it is left "
                "unchanged and will be converted again next time."
            )
            return LoadResult(settings, problems, None, {})
        problems.append(f"The original is kept at {backup}.")
        try:
            self.save(settings)
        except SettingsSaveError as exc:
            problems.append(f"The converted settings could not be written yet: {exc.message}")
        return LoadResult(settings, problems, backup, {})

    def _load_newer(
        self, version: int, body: dict[str, Any], preferences: dict[str, Any], raw: bytes,
        problems: list[str],
    ) -> LoadResult:
        known = {f.name for f in fields(ServerSettings)}
        ignored = sorted(set(body) - known)
        settings, field_problems = _settings_from({k: v for k, v in body.items() if k in known})
        backup = self._keep_copy(raw, f"v{version}-backup")
        text = (
            f"{self.path} was written by a newer ollama-deck (format version {version}; this build "
            f"reads version {SETTINGS_VERSION}). Read the settings this build knows"
            + (f"; ignored {', '.join(ignored)}." if ignored else ".")
        )
        if backup is not None:
            text += f" Saving will write version {SETTINGS_VERSION}; the newer file is kept at {backup}."
        else:
            text += " Could not keep a copy of it, so saving will first try again and stop if it cannot."
        return LoadResult(settings, [text] + problems + field_problems, backup, preferences)

    def _set_aside_corrupt(self, why: str) -> LoadResult:
        target = free_name(self.config_dir / f"{SETTINGS_FILE_NAME}.corrupt-{utc_stamp()}")
        try:
            os.replace(self.path, target)
        except OSError as exc:
            return LoadResult(ServerSettings(), [
                f"{self.path} could not be read because {why}, and could not be moved aside "
                f"({_os_reason(exc)}). Using default settings; saving will keep a copy first."
            ])
        return LoadResult(ServerSettings(), [
            f"{self.path} could not be read because {why}. It was moved to {target}; "
            "using default settings."
        ], target)

    def _keep_copy(self, raw: bytes, tag: str) -> Path | None:
        """Copy raw bytes to settings.json.<tag>[-N] unless an identical copy exists; None if impossible."""
        base = self.config_dir / f"{SETTINGS_FILE_NAME}.{tag}"
        for candidate in [base, *sorted(self.config_dir.glob(f"{SETTINGS_FILE_NAME}.{tag}-*"))]:
            try:
                if candidate.read_bytes() == raw:
                    return candidate
            except OSError:
                continue
        target = free_name(base)
        try:
            _write_atomic(target, raw)
        except SettingsSaveError:
            return None
        return target

    def _remove_stale_temp_files(self) -> None:
        remove_stale_temp_files(self.path, STALE_TEMP_AGE_S)

    # ---- saving --------------------------------------------------------------------------

    def save(self, settings: ServerSettings, preferences: Mapping[str, Any] | None = None) -> Path | None:
        """Write settings and preferences (None keeps the saved ones) atomically.

        Returns where a copy of the replaced file is kept when it had to be kept (a newer
        version or an unreadable file), else None. Raises SettingsSaveError, leaving the old file.
        """
        raw, existing = self._read_existing()
        if preferences is None:
            saved = existing.get("preferences") if isinstance(existing, dict) else None
            preferences = saved if isinstance(saved, dict) else {}
        document = {
            "version": SETTINGS_VERSION,
            "saved_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "settings": settings.to_json(),
            "preferences": dict(preferences),
        }
        payload = (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
        backup = self._protect_existing(raw, existing)
        try:
            self.config_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _save_error(self.path, exc) from exc
        _write_atomic(self.path, payload)
        return backup

    def _read_existing(self) -> tuple[bytes | None, Any]:
        """The current file's bytes and JSON (None when absent or not valid JSON)."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            raise _save_error(self.path, exc) from exc
        try:
            return raw, json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return raw, None

    def _protect_existing(self, raw: bytes | None, existing: Any) -> Path | None:
        """Copy aside a file this build must not overwrite (unreadable, malformed, or a newer version)."""
        if raw is None:
            return None
        version = existing.get("version") if isinstance(existing, dict) else None
        ours = _is_int(version) and 1 <= version <= SETTINGS_VERSION
        if ours and isinstance(existing.get("settings"), dict):
            return None
        if _is_int(version) and version > SETTINGS_VERSION:
            tag = f"v{version}-backup"
        elif isinstance(existing, dict) and "version" not in existing:
            tag = "v0-backup"  # load() normally kept this copy already; _keep_copy finds it
        else:
            tag = f"corrupt-{utc_stamp()}"
        backup = self._keep_copy(raw, tag)
        if backup is None:
            raise SettingsSaveError(
                f"Did not save settings: {self.path} holds data this build cannot read, and a copy "
                f"could not be kept in {self.config_dir}.",
                hint="Free some space or fix the folder's permissions, then save again.",
            )
        return backup


def _settings_from(body: dict[str, Any]) -> tuple[ServerSettings, list[str]]:
    """Settings from a dict, with wrong types and values that fail validation replaced by defaults."""
    settings, problems = ServerSettings.from_json(body)
    defaults = ServerSettings()
    result = validate(settings)
    if result.errors:
        for name, reason in sorted(result.errors.items()):
            value = getattr(settings, name)
            problems.append(
                f"{FIELD_LABELS.get(name, name)} ({name}): the saved value {value!r} was refused: "
                f"{reason} Using the default {getattr(defaults, name)!r}."
            )
        settings = settings.replace(**{name: getattr(defaults, name) for name in result.errors})
    return settings, problems


def _migrate_v0(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Version 0's flat dict in version 1's names and units."""
    migrated: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in data.items():
        new_key = _V0_RENAMES.get(key, key)
        if new_key != key:
            notes.append(f"Renamed '{key}' to '{new_key}'.")
        if new_key == "flash_attention" and isinstance(value, bool):
            value = "on" if value else "off"
        if new_key == "context_length" and value == 0:
            value = None  # version 0 wrote 0 for "Ollama decides"
        migrated[new_key] = value
    return migrated, notes


def _write_atomic(path: Path, payload: bytes) -> None:
    """Write payload to path so that a reader sees the old or the new file, never a part."""
    try:
        write_atomic(path, payload)
    except OSError as exc:
        raise _save_error(path, exc) from exc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _save_error(path: Path, exc: OSError) -> SettingsSaveError:
    hints = {
        errno.EACCES: f"You may not write to {path.parent}; fix its permissions or choose another folder.",
        errno.EPERM: f"You may not write to {path.parent}; fix its permissions or choose another folder.",
        errno.EROFS: f"{path.parent} is on a read-only file system.",
        errno.ENOSPC: "The disk is full; free some space and save again.",
        errno.EDQUOT: "Your disk quota is used up; free some space and save again.",
    }
    hint = hints.get(exc.errno or 0, "") + " Your previous settings file is unchanged."
    return SettingsSaveError(f"Could not save settings to {path}: {_os_reason(exc)}.", hint=hint.strip())


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _json_reason(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg}, line {exc.lineno} column {exc.colno}"
    return "it is not UTF-8 text"


def _kept_note(backup: Path | None, what: str) -> str:
    if backup is None:
        return f"Could not keep a copy of {what}; save only when the values above are right."
    return f"A copy of {what} is kept at {backup}."
