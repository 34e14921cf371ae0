"""Keeps one sweep in the history from a worker thread, without ever costing the sweep its results.

The history's writes (SQLite) run on one thread, in order, so the loop driving the workload never
waits on the disk. A write that fails (another program holds the file locked past the busy
timeout, a full disk) is noted, never raised into the sweep: what was measured is printed and
exported all the same, and `close` says what the history kept. The end of the run stores the
points that could not be stored as they came (the history's `finish`), or the whole run when
even its start could not be stored, so a lock that goes away during the sweep costs nothing.
"""

from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from collections.abc import Callable

from app.core.bench.run import SweepRun
from app.core.bench.sweep import PointResult
from app.core.errors import DeckError
from app.core.ports.stores import SweepRecorder


@dataclass(frozen=True)
class HistoryOutcome:
    """What the history kept of one run: all of it (`saved`), or `points_kept` points under `run_id` (None:
    nothing) after `error`, the last write that failed."""

    saved: bool
    run_id: int | None = None
    points_kept: int = 0
    points: int = 0
    error: str = ""


class QueuedRecorder:
    """Writes a sweep to `history` on one worker thread; failures are noted for `close`, not raised, and each is
    also passed to `on_problem` (on the writer thread) as it happens, for a window that says so at once."""

    def __init__(self, history: SweepRecorder, on_problem: Callable[[str], None] | None = None) -> None:
        self._history = history
        self._on_problem = on_problem
        self._writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-history")
        self._lock = threading.Lock()
        self._run_id: int | None = None
        self._points_kept = 0
        self._error = ""

    # ---- the sweep's callbacks (loop thread) --------------------------------------------------
    def started(self, run: SweepRun) -> None:
        """The run began: store its row."""
        self._writer.submit(self._attempt, lambda: self._begin(run))

    def point_done(self, _run: SweepRun, result: PointResult) -> None:
        """One point was measured: store it."""
        self._writer.submit(self._attempt, lambda: self._add_point(result))

    # ---- the end (any thread but the writer's) ------------------------------------------------
    def drain(self) -> None:
        """Wait until every write queued so far has been tried (blocks on the disk)."""
        self._writer.submit(lambda: None).result()

    def close(self, run: SweepRun | None) -> HistoryOutcome:
        """Store the end of `run` (None: the sweep ended in an error; only what was queued is written), wait for
        every write, and say what the history kept. Blocks on the disk: run it off the event loop."""
        if run is not None:
            self._writer.submit(self._attempt, lambda: self._finish(run))
        self._writer.shutdown(wait=True)
        with self._lock:
            saved = run is not None and not self._error
            return HistoryOutcome(saved, self._run_id, self._points_kept, len(run.results) if run else 0,
                                  self._error)

    # ---- the writer thread --------------------------------------------------------------------
    def _attempt(self, write: Callable[[], None]) -> None:
        try:
            write()
        except DeckError as exc:
            self._failed(exc.user_text())
        except Exception as exc:  # noqa: BLE001 - on the writer thread nothing else would see it: the run is not kept
            self._failed(f"the history could not be written ({type(exc).__name__}: {exc})")

    def _failed(self, error: str) -> None:
        with self._lock:
            self._error = error
        if self._on_problem is not None:
            self._on_problem(error)

    def _begin(self, run: SweepRun) -> None:
        self._run_id = self._history.begin(run)

    def _add_point(self, result: PointResult) -> None:
        if self._run_id is None:
            return  # the start could not be stored: the whole run is stored at the end
        self._history.add_point(self._run_id, result)
        self._points_kept += 1

    def _finish(self, run: SweepRun) -> None:
        with self._lock:
            self._error = ""  # the end stores everything earlier writes missed: only its own failure counts
        if self._run_id is None:
            self._run_id = self._history.save(run)
        else:
            self._history.finish(self._run_id, run)
        self._points_kept = len(run.results)


__all__ = ["HistoryOutcome", "QueuedRecorder"]
