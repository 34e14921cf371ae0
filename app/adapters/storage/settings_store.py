"""The settings file: versioned JSON, atomic saves, and nothing a user wrote is ever lost.

Layout on disk (settings.json in the config directory), format 2::

    {"version": 2, "saved_at": "2026-08-01T12:00:00+00:00", "backend": "ollama",
     "settings": {...the ServerSettings fields every server shares...},
     "backends": {"ollama": {...that backend's own options...}, ...},
     "preferences": {...},
     "extra_settings_by_backend": {"ollama": "OLLAMA_DEBUG=1", "llama_server": "--no-warmup"}}

Every backend's options and extra settings are kept, not only the chosen one's, so switching servers
loses nothing: "settings"."extra_settings" is the saved backend's (as every build of format 2 reads
and writes it, so the file stays readable by them), the others' ride beside it in a key those builds
carry through their saves; a store reads the options and extra settings of its own backend (its
mapping's kind). So are top-level keys this version does not write (a later version's additions).
A save refuses once to replace a file that changed on disk since this store read or wrote it (another
window's Apply), as the presets do. What the file
holds is judged by the one reader (json_file: size, nesting, encoding, numbers, text) and then field
by field; whenever a value is refused or misplaced, the file as it was is copied beside it first.
Format 1 (the first releases) was Ollama-only and had the same keys but no "backend(s)": its
"settings" held every field, Ollama's own knobs among them, and "extra_env" for the extra
settings. A reader of the shared fields (settings.num_parallel, …) reads either format. Format 0 is the flat
layout of the first builds: the settings fields at top level, no "version" key, and a few older
names (see _V0_RENAMES). Older formats are converted on load, with the original kept beside.
"""

from __future__ import annotations

import errno
import math
import threading
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
from collections.abc import Mapping


from app.adapters.storage import paths as storage_paths
from app.adapters.storage import settings_format as fmt
from app.adapters.storage.atomic_json import free_name, json_bytes, set_aside, utc_stamp, write_atomic
from app.adapters.storage.json_file import (LEFT, MISSING, READ, SET_ASIDE, STUCK, UNREADABLE, FileTooLargeError, decode_json,
                                            os_reason, read_capped, read_json_file)
from app.core.errors import DeckError
from app.core.server.mapping import NeutralTuning, TuningMapping, option_default
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.core.server.settings import SETTINGS_VERSION, ServerSettings

SETTINGS_FILE_NAME = "settings.json"
_V0_RENAMES = fmt.V0_RENAMES
_FIELDS = frozenset(f.name for f in fields(ServerSettings))
DEFAULT_BACKEND, LEGACY_OPTION_FIELDS = fmt.DEFAULT_BACKEND, fmt.LEGACY_OPTION_FIELDS


class SettingsSaveError(DeckError):
    """The settings file could not be written; the previous file is left as it was."""

    hint = "Your previous settings file is unchanged."


class SettingsChangedError(SettingsSaveError):
    """The settings file changed on disk since this store read it (another window, another program): saving
    would overwrite that change unseen, so it was not saved."""

    hint = "Apply again to replace it with these settings, or restart ollama-deck to use the saved ones."


@dataclass(frozen=True)
class LoadResult:
    """What load() found: usable settings, what was wrong (user-readable), and any copy kept aside."""

    settings: ServerSettings
    problems: list[str] = field(default_factory=list)
    backup_path: Path | None = None
    preferences: dict[str, Any] = field(default_factory=dict)
    unusable: bool = False  # nothing of the file could be used (unreadable, damaged): the settings are defaults


class SettingsStore:
    """Reads and writes settings.json in one directory.

    `mapping` is the backend's (see app.core.server.mapping): it judges the saved values, so a
    value its server would refuse is reported and replaced by the default at load. Without one
    only the shared rules apply.
    """

    def __init__(self, config_dir: Path | None = None, mapping: TuningMapping | None = None) -> None:
        self.config_dir = storage_paths.config_dir(config_dir)
        self.path = self.config_dir / SETTINGS_FILE_NAME
        self.mapping: TuningMapping = mapping if mapping is not None else NeutralTuning()
        # The file's bytes as last read or written here (None: there was none), to see another writer's change
        # before a save replaces it, as the presets do; _looked is False until a load could see the file.
        self._known: bytes | None = None
        self._looked = False
        self._saving = threading.Lock()
        self._change_nothing = False  # this load only reads: no move aside, no conversion, no copies

    def defaults(self) -> ServerSettings:
        """The settings of a start without a usable file: the defaults, for this store's backend (a store that
        knows none reads as the first format did, for the saved format's default server)."""
        return ServerSettings(backend=self.mapping.kind or DEFAULT_BACKEND)

    # ---- loading -------------------------------------------------------------------------

    def load(self, *, change_nothing: bool = False) -> LoadResult:
        """Read the settings file; anything unusable is reported, kept aside, and replaced by defaults.

        change_nothing: only read (the headless commands): an unusable file is left where it is, an older format
        is read without being converted, and no copy is written; the problems still say what was found."""
        self._change_nothing = change_nothing
        found = read_json_file(self.path, "corrupt", fmt.shape_problem, move_aside=not change_nothing)
        self._looked = found.outcome not in (UNREADABLE, STUCK, LEFT)
        self._known = found.raw if found.outcome == READ else None
        if found.outcome == MISSING:
            return LoadResult(self.defaults())
        if found.outcome == UNREADABLE:
            return LoadResult(self.defaults(), [
                f"Could not read {self.path}: {found.why}. Using default settings; check the file's permissions."],
                unusable=True)
        if found.outcome == STUCK:
            return LoadResult(self.defaults(), [
                f"{self.path} could not be read because {found.why}, and could not be moved aside "
                f"({found.move_error}). Using default settings; saving will keep a copy first."], unusable=True)
        if found.outcome == LEFT:
            return LoadResult(self.defaults(), [
                f"{self.path} could not be read because {found.why}; using default settings. It was left as it "
                "is: the ollama-deck window moves it aside, keeping it, and says so when it next starts."],
                unusable=True)
        if found.outcome == SET_ASIDE:
            return LoadResult(self.defaults(), [
                f"{self.path} could not be read because {found.why}. It was moved to {found.kept}; "
                "using default settings."], found.kept, unusable=True)
        raw = found.raw or b""
        try:
            return self._load_document(found.data, raw)
        except (ValueError, TypeError, LookupError, RecursionError, MemoryError) as exc:
            # The reader and the checks below should leave nothing to fail; if a value still trips
            # one, the start must go on: keep the file's bytes and use the defaults.
            if self._change_nothing:
                return LoadResult(self.defaults(), [
                    f"{self.path} could not be read because a value in it could not be handled "
                    f"({type(exc).__name__}). Using default settings; the file was left as it is."], unusable=True)
            backup = self._keep_copy(raw, f"corrupt-{utc_stamp()}")
            return LoadResult(self.defaults(), [
                f"{self.path} could not be read because a value in it could not be handled "
                f"({type(exc).__name__}). Using default settings. {_kept_note(backup, 'the file')}"], backup,
                unusable=True)

    def _load_document(self, data: dict[str, Any], raw: bytes) -> LoadResult:
        version = fmt.version_of(data)
        if version == 0:
            return self._load_v0(data, raw)
        body = data.get("settings", {})
        preferences = data.get("preferences", {})
        problems: list[str] = []
        if not isinstance(preferences, dict):
            problems.append("The saved preferences were not an object; using defaults for them.")
            preferences = {}
        if version > SETTINGS_VERSION:
            return self._load_newer(version, data, body, preferences, raw, problems)
        if version == 1:
            return self._load_v1(body, preferences, raw, problems)
        return self._load_current(data, body, preferences, raw, problems)

    def _load_current(self, data: dict[str, Any], body: dict[str, Any], preferences: dict[str, Any], raw: bytes,
                      problems: list[str], backup: Path | None = None, converted: bool = False) -> LoadResult:
        """The settings of this store's backend from a format-2 document (another backend's are left as saved)."""
        wanted, shape_problems = fmt.settings_json(data, body, self.mapping.kind)
        settings, field_problems = self._settings_from(wanted)
        problems += shape_problems + field_problems
        if problems and not converted and not self._change_nothing:
            # The next save rewrites what was wrong: keep the file as it was (a converted one is kept already).
            backup = self._keep_copy(raw, "invalid-backup")
            problems.append(_kept_note(backup, "the file as it was"))
        return LoadResult(settings, problems, backup, preferences)

    def _load_v0(self, data: dict[str, Any], raw: bytes) -> LoadResult:
        migrated, notes = fmt.migrate_v0(data)
        saved, field_problems = ServerSettings.from_json(migrated, SAVED_FORMAT)
        note = (f"{self.path} was in the old format (version 0); converted it to version {SETTINGS_VERSION}."
                + (" " + " ".join(notes) if notes else ""))
        return self._convert(saved, note, field_problems, raw, "v0-backup", {})

    def _load_v1(self, body: dict[str, Any], preferences: dict[str, Any], raw: bytes,
                 problems: list[str]) -> LoadResult:
        saved, field_problems = ServerSettings.from_json(body, SAVED_FORMAT)
        moved = sorted(name for name in LEGACY_OPTION_FIELDS if name in body)
        text = (f"{self.path} was in format version 1; converted it to version {SETTINGS_VERSION}, which keeps "
                "the settings every server shares apart from each server's own")
        text += f" ({', '.join(moved)} are now {saved.backend}'s own)." if moved else "."
        return self._convert(saved, text, problems + field_problems, raw, "v1-backup", preferences)

    def _convert(self, saved: ServerSettings, note: str, problems: list[str], raw: bytes, tag: str,
                 preferences: dict[str, Any]) -> LoadResult:
        """Keep the old file's bytes beside it, then write what it held, in this format, whichever backend this
        store reads (its own checks come after, on the converted document): nothing is lost. `note` says it was
        converted (not said when this load changes nothing: then it is only read as it is)."""
        document = fmt.document(saved, preferences, {}, {}, {})
        if self._change_nothing:
            return self._load_current(document, document["settings"], preferences, raw, problems, None,
                                      converted=True)
        problems = [note, *problems]
        backup = self._keep_copy(raw, tag)
        if backup is None:
            problems.append(
                f"Could not keep a copy of the old file in {self.config_dir}, so it is left "
                "unchanged and will be converted again next time."
            )
        else:
            problems.append(f"The original is kept at {backup}.")
            try:
                converted = json_bytes(document)
                _write_atomic(self.path, converted)
                self._known = converted
            except SettingsSaveError as exc:
                problems.append(f"The converted settings could not be written yet: {exc.message}")
        return self._load_current(document, document["settings"], preferences, raw, problems, backup, converted=True)

    def _load_newer(
        self, version: int, data: dict[str, Any], body: dict[str, Any], preferences: dict[str, Any], raw: bytes,
        problems: list[str],
    ) -> LoadResult:
        known = _FIELDS | set(LEGACY_OPTION_FIELDS) | {"extra_env"}
        ignored = sorted(set(body) - known)
        wanted, shape_problems = fmt.settings_json(data, {k: v for k, v in body.items() if k in known},
                                                   self.mapping.kind)
        settings, field_problems = self._settings_from(wanted)
        backup = None if self._change_nothing else self._keep_copy(raw, f"v{version}-backup")
        text = (
            f"{self.path} was written by a newer ollama-deck (format version {version}; this build "
            f"reads version {SETTINGS_VERSION}). Read the settings this build knows"
            + (f"; ignored {', '.join(ignored)}." if ignored else ".")
        )
        if self._change_nothing:
            pass  # nothing is saved from here
        elif backup is not None:
            text += f" Saving will write version {SETTINGS_VERSION}; the newer file is kept at {backup}."
        else:
            text += " Could not keep a copy of it, so saving will first try again and stop if it cannot."
        return LoadResult(settings, [text] + problems + shape_problems + field_problems, backup, preferences)

    def _settings_from(self, data: dict[str, Any]) -> tuple[ServerSettings, list[str]]:
        """Settings from a dict, with wrong types and values the backend refuses replaced by defaults."""
        settings, problems = ServerSettings.from_json(data, SAVED_FORMAT)
        settings, number_problems = _finite_options(settings)
        problems += number_problems
        if not settings.backend:  # format 0 and 1 carry the name in the settings, unchecked by the format
            problems.append(f"The saved server '' is not a name; using {DEFAULT_BACKEND}.")
            settings = settings.replace(backend=DEFAULT_BACKEND)
        result = self.mapping.validate(settings)
        if not result.errors:
            return settings, problems
        defaults = ServerSettings()
        fixed: dict[str, Any] = {}
        dropped: dict[str, None] = {}
        saved_options = dict(settings.options)
        for name, reason in sorted(result.errors.items()):
            if name not in _FIELDS and name not in saved_options:
                continue  # an option the file does not hold (one the server needs, unset): no saved value refused
            if name in _FIELDS:
                value, default = getattr(settings, name), getattr(defaults, name)
                fixed[name] = default
            else:  # one of the backend's options: removing it gives the backend's default
                value, default = settings.option(name), option_default(self.mapping, name)
                dropped[name] = None
            problems.append(
                f"{self.mapping.label(name)} ({name}): the saved value {fmt.short_repr(value)} was refused: "
                f"{reason} Using the default {default!r}."
            )
        return settings.replace(**fixed).with_options(**dropped), problems

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

    # ---- saving --------------------------------------------------------------------------

    def save(self, settings: ServerSettings, preferences: Mapping[str, Any] | None = None) -> Path | None:
        """Write settings and preferences (None keeps the saved ones) atomically.

        Other backends' saved options are kept. Returns where a copy of the replaced file is
        kept when it had to be kept (an older or newer version, or an unreadable file), else
        None. Raises SettingsSaveError, leaving the old file; SettingsChangedError when the file changed on disk
        since this store read or wrote it (the next save then replaces it: the user was told).
        """
        with self._saving:
            return self._save(settings, preferences)

    def _save(self, settings: ServerSettings, preferences: Mapping[str, Any] | None) -> Path | None:
        raw, existing = self._read_existing()
        if self._looked and raw != self._known:
            self._known = raw  # said once: applying again replaces it, on purpose
            raise SettingsChangedError(
                f"Not applied: {self.path} was changed since this window read it (by another ollama-deck window "
                "or another program), and applying would overwrite that change.")
        if preferences is None:
            saved = existing.get("preferences") if isinstance(existing, dict) else None
            preferences = saved if isinstance(saved, dict) else {}
        payload = json_bytes(fmt.document(settings, preferences, fmt.saved_backends(existing),
                                          fmt.saved_extras(existing), fmt.saved_extra_settings(existing)))
        backup = self._protect_existing(raw, existing)
        try:
            self.config_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _save_error(self.path, exc) from exc
        _write_atomic(self.path, payload)
        self._known, self._looked = payload, True
        return backup

    def _read_existing(self) -> tuple[bytes | None, Any]:
        """The current file's bytes and JSON (None when absent or not usable JSON)."""
        try:
            raw = read_capped(self.path)
        except FileNotFoundError:
            return None, None
        except FileTooLargeError:
            # Too large to copy through memory: a rename keeps it whole, out of the way.
            try:
                set_aside(self.path, "corrupt")
            except OSError as exc:
                raise _save_error(self.path, exc) from exc
            return None, None
        except OSError as exc:
            raise _save_error(self.path, exc) from exc
        return raw, decode_json(raw)[0]

    def _protect_existing(self, raw: bytes | None, existing: Any) -> Path | None:
        """Copy aside a file this build must not overwrite unseen (unreadable, malformed, another version)."""
        if raw is None:
            return None
        version = fmt.version_of(existing) if isinstance(existing, dict) else None
        if version == SETTINGS_VERSION and not fmt.shape_problem(existing):
            return None
        if fmt.is_int(version) and not fmt.shape_problem(existing):
            tag = f"v{version}-backup"  # load() normally kept this copy already; _keep_copy finds it
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


def _write_atomic(path: Path, payload: bytes) -> None:
    """Write payload to path so that a reader sees the old or the new file, never a part."""
    try:
        write_atomic(path, payload)
    except OSError as exc:
        raise _save_error(path, exc) from exc


def _save_error(path: Path, exc: OSError) -> SettingsSaveError:
    hints = {
        errno.EACCES: f"You may not write to {path.parent}; fix its permissions or choose another folder.",
        errno.EPERM: f"You may not write to {path.parent}; fix its permissions or choose another folder.",
        errno.EROFS: f"{path.parent} is on a read-only file system.",
        errno.ENOSPC: "The disk is full; free some space and save again.",
        errno.EDQUOT: "Your disk quota is used up; free some space and save again.",
    }
    hint = hints.get(exc.errno or 0, "") + " Your previous settings file is unchanged."
    return SettingsSaveError(f"Could not save settings to {path}: {os_reason(exc)}.", hint=hint.strip())


def _finite_options(settings: ServerSettings) -> tuple[ServerSettings, list[str]]:
    """settings without options saved as NaN or ±Infinity (JSON has no such numbers; no server takes them)."""
    bad = [name for name, value in settings.options if isinstance(value, float) and not math.isfinite(value)]
    problems = [f"Server option '{name}': the saved value {settings.option(name)!r} is not a finite number; "
                "using the server's default." for name in bad]
    return (settings.with_options(**dict.fromkeys(bad)) if bad else settings), problems


def _kept_note(backup: Path | None, what: str) -> str:
    if backup is None:
        return f"Could not keep a copy of {what}; save only when the values above are right."
    return f"A copy of {what} is kept at {backup}."
