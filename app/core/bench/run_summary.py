"""One run of the bench history as its list shows it (pure value type)."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.bench.outcome import RunStatus


@dataclass(frozen=True)
class RunSummary:
    """One row of the history list."""

    run_id: int
    title: str
    started_at: str
    finished_at: str
    status: RunStatus  # RunStatus.UNREADABLE for a run whose row is damaged
    model: str
    gpu_name: str
    points_planned: int
    points_done: int
    best_tokens_per_s: float | None
    recommended: str
    backend_kind: str = ""  # the server kind that measured it
    server_version: str = ""
    events: int = 0  # the server events its points saw (see PointResult.events)
    spoiled_points: int = 0  # its points that saw one that spoils a measurement
