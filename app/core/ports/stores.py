"""The storage seams: where benchmark runs, apply checks, server settings and presets are kept.

Every method blocks on disk (SQLite or a JSON file): callers on the asyncio loop run them in a
worker thread, and the GUI thread never calls them directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from app.core.bench.run import SweepRun
from app.core.bench.run_summary import RunSummary
from app.core.bench.sweep import PointResult
from app.core.console.presets import Preset, PresetLoad
from app.core.server.settings import ServerSettings


class SweepRecorder(Protocol):
    """Keeps a sweep as it runs: a row when it begins, each point as it ends, the closing state."""

    def begin(self, run: SweepRun) -> int:
        """Store a run that has just started; returns its id."""
        ...

    def add_point(self, run_id: int, result: PointResult) -> None:
        """Store one finished point of run `run_id`."""
        ...

    def finish(self, run_id: int, run: SweepRun) -> None:
        """Store the run's final status and times, with any of its points not stored yet."""
        ...

    def save(self, run: SweepRun) -> int:
        """Store a whole run at once (when its beginning could not be stored); returns its id."""
        ...


class ApplyRecorder(Protocol):
    """Keeps one record per guarded apply (settings tried, prediction, measurement, outcome)."""

    def add(self, record: dict[str, Any]) -> int:
        """Store a JSON-ready record; returns its id."""
        ...


class SettingsSaver(Protocol):
    """Saves the server settings the user applied."""

    def save(self, settings: ServerSettings, /) -> Path | None:
        """Write the settings; returns the file written (None when nothing was written)."""
        ...


class PresetStorage(Protocol):
    """Reads and writes the prompt presets."""

    def load(self) -> PresetLoad:
        """The presets to offer (the built-ins where the file has none) and what was wrong with the file."""
        ...

    def save(self, presets: list[Preset]) -> list[str]:
        """Write every preset; returns notices for the user (e.g. a copy it kept), raises DeckError on failure."""
        ...


class BenchHistoryStore(SweepRecorder, Protocol):
    """The benchmark history as the Benchmark page uses it: the sweep's writes, and the list to open,
    compare, re-judge and delete runs from."""

    @property
    def path(self) -> Path:
        """The history's file."""
        ...

    def open(self) -> list[str]:
        """Check (and create or convert) the file; returns problems found, in words for the user."""
        ...

    def list_runs(self) -> list[RunSummary]:
        """Every run kept, one summary each."""
        ...

    def load(self, run_id: int) -> SweepRun:
        """One run with every point."""
        ...

    def keep_judgement(self, run_id: int, run: SweepRun) -> None:
        """Store how the user last judged the run (its targets and recommendation)."""
        ...

    def delete(self, run_id: int) -> None:
        """Remove a run and its points."""
        ...


__all__ = ["ApplyRecorder", "BenchHistoryStore", "PresetStorage", "SettingsSaver", "SweepRecorder"]
