"""The console's presets file (presets.json in the user config folder): atomic saves, and a file
that cannot be read is moved aside, reported and never overwritten unseen."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


from app.adapters.storage import paths as storage_paths
from app.adapters.storage.atomic_json import write_json_atomic
from app.adapters.storage.json_file import MISSING, STUCK, UNREADABLE, read_json_file
from app.core.errors import DeckError
from app.core.console.presets import Preset, apply_user_data, user_data

PRESETS_FILE_NAME = "presets.json"


class PresetSaveError(DeckError):
    """The presets could not be written; the previous file is unchanged."""

    hint = "Your previous presets file is unchanged; check the folder's permissions and free space."


@dataclass(frozen=True)
class PresetLoad:
    """The presets to offer and what was wrong with the file (user-readable)."""

    presets: list[Preset]
    problems: list[str] = field(default_factory=list)


class PresetStore:
    """Reads and writes presets.json in one folder."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = storage_paths.config_dir(config_dir)
        self.path = self.config_dir / PRESETS_FILE_NAME

    def load(self) -> PresetLoad:
        """The built-in presets with the saved edits applied; problems are reported, not raised."""
        found = read_json_file(self.path, "corrupt")
        if found.outcome == MISSING:
            presets, problems = apply_user_data(None)
            return PresetLoad(presets, problems)
        if found.ok:
            presets, problems = apply_user_data(found.data)
            return PresetLoad(presets, problems)
        presets, _ = apply_user_data(None)
        if found.outcome == UNREADABLE:
            return PresetLoad(presets, [f"Could not read {self.path}: {found.why}; showing the built-in presets."])
        if found.outcome == STUCK:
            return PresetLoad(presets, [f"{self.path} could not be read because {found.why}, and could not be "
                                        f"moved aside ({found.move_error}); showing the built-in presets."])
        return PresetLoad(presets, [f"{self.path} could not be read because {found.why}; it was moved to "
                                    f"{found.kept}."])

    def save(self, presets: list[Preset]) -> None:
        """Write the user's edits and own presets atomically; raises PresetSaveError."""
        try:
            write_json_atomic(self.path, user_data(presets))
        except OSError as exc:
            raise PresetSaveError(f"Could not save presets to {self.path}: {exc.strerror or exc}.") from exc


__all__ = ["PRESETS_FILE_NAME", "PresetLoad", "PresetSaveError", "PresetStore"]
