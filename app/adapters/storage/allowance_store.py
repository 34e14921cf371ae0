"""The runtime allowances learnt per GPU model and driver (runtime_allowance.json in the user config folder,
written atomically). Losing it costs nothing but learning again from the next load, so a file that cannot be
read is moved aside and reported (`problem`), and the app goes on with the default figure.

Each card's entry is checked on its own: one that is not a well-formed record (a name that is not text, a
figure that is not a whole number of bytes within the allowance's bounds) is left out, the others kept."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from app.adapters.storage import paths as storage_paths
from app.adapters.storage.atomic_json import write_json_atomic
from app.adapters.storage.json_file import MISSING, SET_ASIDE, STUCK, UNREADABLE, read_json_file
from app.core.memory.allowance_learning import MAX_ALLOWANCE_BYTES, RECENT_LOADS, LearnedAllowance

ALLOWANCE_FILE_NAME = "runtime_allowance.json"
FORMAT_VERSION = 1
MAX_TEXT = 256  # a GPU name or driver version is short

log = logging.getLogger(__name__)


def _record(data: Any) -> LearnedAllowance | None:
    """One card's entry, or None when it is not a well-formed one."""
    if not isinstance(data, dict):
        return None
    name, driver, recent = data.get("gpu_name"), data.get("driver"), data.get("recent_bytes")
    loads, at = data.get("loads"), data.get("learned_at", "")
    if not (isinstance(name, str) and isinstance(driver, str) and 0 < len(name) <= MAX_TEXT
            and len(driver) <= MAX_TEXT and isinstance(at, str) and len(at) <= MAX_TEXT):
        return None
    if not isinstance(recent, list) or not 0 < len(recent) <= RECENT_LOADS or not all(
            type(v) is int and 0 <= v <= MAX_ALLOWANCE_BYTES for v in recent):
        return None
    if type(loads) is not int or loads < len(recent):
        return None
    return LearnedAllowance(name, driver, tuple(recent), loads, at)


def _shape_problem(data: Any) -> str:
    if not isinstance(data, dict):
        return "not a JSON object"
    if not isinstance(data.get("cards"), list):
        return "it has no list of cards"
    return ""


class AllowanceStore:
    """Reads and writes runtime_allowance.json in one folder; thread-safe."""

    def __init__(self, config_dir: Path | None = None) -> None:
        self.config_dir = storage_paths.config_dir(config_dir)
        self.path = self.config_dir / ALLOWANCE_FILE_NAME
        self.problem = ""  # what went wrong reading or writing the file ('' when nothing did)
        self._lock = threading.Lock()

    def load(self) -> list[LearnedAllowance]:
        """Every card's allowance kept; [] when there is no file or it cannot be read (`problem` says why)."""
        with self._lock:
            found = read_json_file(self.path, "unreadable", _shape_problem)
            if found.ok:
                cards = [r for r in map(_record, found.data["cards"]) if r is not None]
                if len(cards) != len(found.data["cards"]):
                    self._report(f"{self.path.name}: {len(found.data['cards']) - len(cards)} damaged entries were "
                                 "left out")
                return cards
            if found.outcome == UNREADABLE:
                self._report(f"could not read {self.path} ({found.why}); the runtime allowance is learnt again")
            elif found.outcome == SET_ASIDE:
                kept = found.kept.name if found.kept else "?"
                self._report(f"{self.path.name} was damaged ({found.why}); moved to {kept}, the runtime allowance is "
                             "learnt again")
            elif found.outcome == STUCK:
                self._report(f"{self.path} is damaged ({found.why}) and could not be moved aside "
                             f"({found.move_error}); the runtime allowance is learnt again")
            elif found.outcome != MISSING:
                self._report(f"{self.path} cannot be used ({found.why})")
            return []

    def save(self, cards: list[LearnedAllowance]) -> bool:
        """Write every card's allowance atomically; False (reported) when the folder cannot be written."""
        document = {"version": FORMAT_VERSION, "cards": [
            {"gpu_name": c.gpu_name, "driver": c.driver, "recent_bytes": list(c.recent_bytes), "loads": c.loads,
             "learned_at": c.learned_at} for c in cards]}
        with self._lock:
            try:
                self.config_dir.mkdir(parents=True, exist_ok=True)
                write_json_atomic(self.path, document)
            except OSError as exc:
                self._report(f"could not save the runtime allowance to {self.path}: {exc}")
                return False
            return True

    def _report(self, problem: str) -> None:
        self.problem = problem
        log.warning("%s", problem)


__all__ = ["ALLOWANCE_FILE_NAME", "AllowanceStore"]
