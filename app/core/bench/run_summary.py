"""One run of the bench history as its list shows it (pure value type)."""

from __future__ import annotations

from dataclasses import dataclass

UNREADABLE = "unreadable"  # the status of a run whose row is damaged


@dataclass(frozen=True)
class RunSummary:
    """One row of the history list."""

    run_id: int
    title: str
    started_at: str
    finished_at: str
    status: str
    model: str
    gpu_name: str
    ollama_version: str
    points_planned: int
    points_done: int
    best_tokens_per_s: float | None
    recommended: str
    backend_kind: str = "ollama"
    server_version: str = ""
