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


__all__ = ["APP_NAME", "config_dir", "data_dir", "folder_problem"]
