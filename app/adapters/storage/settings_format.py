"""The settings file's formats, 0 to 2, as plain dicts: which one a document is, what makes it
unusable, how each older one reads, and the document format 2 writes (see settings_store)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, UTC
from typing import Any

from app.adapters.storage.saved_format import SAVED_FORMAT
from app.core.server.settings import SETTINGS_VERSION, ServerSettings

# The server of a document that names none, and the knobs of its own that format 1 kept in "settings".
DEFAULT_BACKEND = SAVED_FORMAT.default_backend
LEGACY_OPTION_FIELDS = SAVED_FORMAT.option_fields

# Older names of version 0, and how to turn their values into version 1.
V0_RENAMES = {
    "parallel": "num_parallel",
    "num_ctx": "context_length",
    "kv_cache": "kv_cache_type",
    "flash_attn": "flash_attention",
    "models_path": "models_dir",
}


# Every backend's own extra settings, by backend name: "settings"."extra_settings" holds only the saved backend's
# (as every release of format 2 reads and writes it), so the others' are kept beside, in a key those releases carry
# through their saves unchanged.
EXTRA_SETTINGS_KEY = "extra_settings_by_backend"
# The top-level keys format 2 writes; others in a format-2 file are carried through saves.
DOCUMENT_KEYS = frozenset({"version", "saved_at", "backend", "settings", "backends", "preferences",
                           EXTRA_SETTINGS_KEY})
# Keys a format-2 "settings" object should not hold: the backend, its options, format 1's names of them.
MISPLACED_IN_BODY = frozenset({"backend", "options", "extra_env", *LEGACY_OPTION_FIELDS})

# Far above any format this app will reach; a larger "version" is damage, not a newer file.
MAX_VERSION = 10_000


def short_repr(value: Any, limit: int = 40) -> str:
    """repr() cut to `limit` characters, for messages about values of any size."""
    if is_int(value) and abs(value) >= 10**limit:
        return f"<a whole number of {len(str(abs(value)))} digits>"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def is_int(value: Any) -> bool:
    """True for a whole number that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def version_of(data: dict[str, Any]) -> Any:
    """The document's format version; a file that lost only its "version" key keeps its shape's.

    A float equal to a whole number (1.0, as some editors and tools write numbers) is that number.
    """
    if "version" in data:
        version = data["version"]
        if isinstance(version, float) and version.is_integer() and abs(version) <= MAX_VERSION:
            return int(version)
        return version
    if not isinstance(data.get("settings"), dict):
        return 0
    return 2 if "backends" in data or "backend" in data else 1


def shape_problem(data: Any) -> str:
    """Why a decoded document cannot be read at all ('' when it can)."""
    if not isinstance(data, dict):
        return f"it holds a JSON {type(data).__name__}, not an object"
    version = version_of(data)
    if not is_int(version) or version < 0:
        return f"its version {short_repr(version)} is not a whole number"
    if version > MAX_VERSION:
        return f"its version {short_repr(version)} is not one any ollama-deck wrote (at most {MAX_VERSION})"
    if version == 0:
        return ""
    if not isinstance(data.get("settings", {}), dict):
        return "its \"settings\" entry is not an object"
    return ""


def settings_json(data: dict[str, Any], body: Mapping[str, Any], backend_for: str = "") -> tuple[dict[str, Any],
                                                                                              list[str]]:
    """ServerSettings.from_json input from a format-2 document: the shared fields, and the options and extra
    settings of `backend_for` (default: the saved backend); what is malformed around them is reported."""
    problems: list[str] = []
    for name in sorted(set(body) & MISPLACED_IN_BODY):
        # Format 2 keeps these beside "settings" or in the server's options; where both places hold
        # one, only one can be used, so the file is reported (and kept as it was) rather than merged.
        problems.append(f"'{name}' inside \"settings\" is not where format {SETTINGS_VERSION} keeps it; "
                        "where the file also has it in its place, that one is used.")
    backend = data.get("backend", DEFAULT_BACKEND)
    if not isinstance(backend, str) or not backend:
        problems.append(f"The saved server {backend!r} is not a name; using {DEFAULT_BACKEND}.")
        backend = DEFAULT_BACKEND
    backends = data.get("backends", {})
    if not isinstance(backends, dict):
        problems.append("The saved server options were not an object; using the server's defaults.")
        backends = {}
    wanted = {**body, "backend": backend_for or backend, "options": backends.get(backend_for or backend, {})}
    extras = data.get(EXTRA_SETTINGS_KEY, {})
    if not isinstance(extras, dict):
        problems.append("The saved extra settings of each server were not an object; those of the servers not "
                        "saved last are empty.")
        extras = {}
    if backend_for and backend_for != backend:  # the body's extra settings are the saved backend's, not these
        wanted["extra_settings"] = extras.get(backend_for, "")
    return wanted, problems


def migrate_v0(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Version 0's flat dict in version 1's names and units (ServerSettings.from_json reads those)."""
    migrated: dict[str, Any] = {}
    notes: list[str] = []
    for key, value in data.items():
        new_key = V0_RENAMES.get(key, key)
        if new_key != key:
            notes.append(f"Renamed '{key}' to '{new_key}'.")
        if new_key == "flash_attention" and isinstance(value, bool):
            value = "on" if value else "off"
        if new_key == "context_length" and value == 0:
            value = None  # version 0 wrote 0 for "Ollama decides"
        migrated[new_key] = value
    return migrated, notes


def saved_backends(existing: Any) -> dict[str, Any]:
    """Every backend's options in the file being replaced, so saving one backend keeps the others'
    (as they were, even malformed: they are judged when that backend is chosen)."""
    if not isinstance(existing, dict):
        return {}
    if version_of(existing) == 1 and isinstance(existing.get("settings"), dict):  # format 1: Ollama's, in the body
        body = existing["settings"]
        backend = body.get("backend", DEFAULT_BACKEND)
        own = {name: body[name] for name in LEGACY_OPTION_FIELDS if name in body}
        return {backend: own} if isinstance(backend, str) else {}
    if version_of(existing) != SETTINGS_VERSION:
        return {}
    backends = existing.get("backends")
    if not isinstance(backends, dict):
        return {}
    return dict(backends)


def saved_extra_settings(existing: Any) -> dict[str, Any]:
    """Every backend's extra settings in the file being replaced (format 1's were Ollama's), so saving one
    backend keeps the others'; the saved backend's are those in "settings", which any release writes."""
    if not isinstance(existing, dict) or not isinstance(existing.get("settings"), dict):
        return {}
    version, body = version_of(existing), existing["settings"]
    if version == 1:
        text = body.get("extra_settings", body.get("extra_env"))
        backend = body.get("backend", DEFAULT_BACKEND)
        return {backend: text} if isinstance(text, str) and isinstance(backend, str) else {}
    if version != SETTINGS_VERSION:
        return {}
    extras = existing.get(EXTRA_SETTINGS_KEY)
    found = {name: text for name, text in extras.items() if isinstance(text, str)} if isinstance(extras, dict) else {}
    backend, text = existing.get("backend", DEFAULT_BACKEND), body.get("extra_settings")
    if isinstance(backend, str) and isinstance(text, str):
        found[backend] = text
    return found


def saved_extras(existing: Any) -> dict[str, Any]:
    """The top-level keys of a current-format file this version does not write, to write back unchanged."""
    if not isinstance(existing, dict) or version_of(existing) != SETTINGS_VERSION:
        return {}
    return {name: value for name, value in existing.items() if name not in DOCUMENT_KEYS}


def document(settings: ServerSettings, preferences: Mapping[str, Any], backends: Mapping[str, Any],
             extras: Mapping[str, Any] | None = None,
             extra_settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The format-2 document for settings (the chosen backend's options and extra settings replace its saved
    ones); `extras` are top-level keys carried from the file it replaces, `extra_settings` the other
    backends' extra settings."""
    shared = settings.to_json()
    shared.pop("backend")
    shared.pop("options")
    return {
        "version": SETTINGS_VERSION,
        "saved_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "backend": settings.backend,
        "settings": shared,
        "backends": {**backends, settings.backend: dict(settings.options)},
        "preferences": dict(preferences),
        EXTRA_SETTINGS_KEY: {**(extra_settings or {}), settings.backend: settings.extra_settings},
        **{name: value for name, value in (extras or {}).items() if name not in DOCUMENT_KEYS},
    }


__all__ = ["DOCUMENT_KEYS", "EXTRA_SETTINGS_KEY", "MAX_VERSION", "MISPLACED_IN_BODY", "V0_RENAMES", "document", "is_int", "migrate_v0",
           "saved_backends", "saved_extra_settings", "saved_extras", "settings_json", "shape_problem", "short_repr", "version_of"]
