"""Where ollama-deck keeps its files: settings, presets and window state in the user config folder
(e.g. ~/.config/ollama-deck), histories in the user data folder (e.g. ~/.local/share/ollama-deck)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "ollama-deck"


def config_dir(explicit: Path | str | None = None) -> Path:
    """The folder given (--config-dir), else the user config folder."""
    return Path(explicit) if explicit is not None else Path(platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    """The user data folder, for the SQLite histories."""
    return Path(platformdirs.user_data_dir(APP_NAME))


def runtime_dir(config_override: Path | str | None = None) -> Path:
    """Where records of the servers the app started live: <--config-dir>/run when one is given,
    else run/ in the user state folder (e.g. ~/.local/state/ollama-deck/run). Not the runtime
    folder (/run/user/UID): logging out empties it while a left-behind server may keep running."""
    if config_override is not None:
        return Path(config_override) / "run"
    return Path(platformdirs.user_state_dir(APP_NAME)) / "run"


def folder_problem(folder: Path) -> str:
    """Why files cannot be written in folder (made if missing), e.g. 'Permission denied'; '' when they can."""
    try:
        blocker = next((p for p in (folder, *folder.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            return f"{blocker} is a file, not a folder"
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not os.access(folder, os.W_OK | os.X_OK):
        return "it is read-only"
    return ""


__all__ = ["APP_NAME", "config_dir", "data_dir", "folder_problem", "runtime_dir"]
