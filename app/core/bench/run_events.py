"""What the server did without saying so during a sweep, for people: each point's events, the run's
summary by kind, and a point's short mark ("2 · severe") for a table cell.

A point whose events include one that spoils a measurement is not stable (PointResult.spoiled_by); the
words here say which, and the summary says what to do once per kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.bench.run import SweepRun
from app.core.bench.sweep import PointResult
from app.core.watch.events import EventKind, Severity, WatchEvent, event_lines, worst


@dataclass(frozen=True)
class KindCount:
    """How often one kind of event was seen in a run, its worst severity, and what to do (its first advice)."""

    kind: EventKind
    count: int
    severity: Severity
    advice: str
    points: tuple[int, ...]  # the indexes of the points that saw it (capacity steps not counted)


def run_events(run: SweepRun) -> tuple[WatchEvent, ...]:
    """Every event of the run (its points', then its rate sweeps' steps'), oldest first, each once."""
    seen: dict[tuple[object, ...], WatchEvent] = {}
    steps = [s for c in (run.capacity, run.default_capacity) if c is not None for s in c.steps]
    for event in [e for r in run.results for e in r.events] + [e for s in steps for e in s.events]:
        seen.setdefault((event.kind, event.at, event.subject, event.summary), event)
    return tuple(sorted(seen.values(), key=lambda e: e.at))


def kind_counts(run: SweepRun) -> list[KindCount]:
    """The run's events by kind, worst first (then the most frequent)."""
    counts: dict[EventKind, KindCount] = {}
    for event in run_events(run):
        points = tuple(r.point.index for r in run.results if event in r.events)
        known = counts.get(event.kind)
        if known is None:
            counts[event.kind] = KindCount(event.kind, 1, event.severity, event.advice, points)
        else:
            counts[event.kind] = KindCount(event.kind, known.count + 1, max(known.severity, event.severity),
                                           known.advice or event.advice,
                                           tuple(dict.fromkeys(known.points + points)))
    return sorted(counts.values(), key=lambda c: (-c.severity, -c.count, c.kind.value))


def point_mark(r: PointResult) -> str:
    """A table cell: "" without events, else the count and the worst severity ("2 · severe")."""
    severity = worst(r.events)
    return "" if severity is None else f"{len(r.events)} · {severity.label}"


def point_event_lines(run: SweepRun) -> list[str]:
    """For a terminal: each point with events, whether they make it not stable, and its events (compact: one
    line each with its evidence)."""
    lines: list[str] = []
    for r in run.results:
        if not r.events:
            continue
        spoiled = f"; not stable ({', '.join(k.label for k in r.spoiled_by)})" if r.spoiled else ""
        lines.append(f"{r.point.label(run.varying)}: {_count(len(r.events))}{spoiled}")
        lines += [f"  {line}" for line in event_lines(r.events, advice=False)]
    return lines


def summary_lines(run: SweepRun) -> list[str]:
    """For a terminal: the run's events by kind, with the points that saw them and what to do, once each."""
    counts = kind_counts(run)
    if not counts:
        return []
    total = sum(c.count for c in counts)
    lines = [f"Server events in this run: {_count(total)}"]
    for c in counts:
        where = ""
        if c.points:
            names = [r.point.label(run.varying) for r in run.results if r.point.index in c.points]
            where = f" at {', '.join(names)}"
        spoils = ", not stable" if c.kind.spoils_measurement else ""
        lines.append(f"  {c.count} × {c.kind.label} ({c.severity.label}{spoils}){where}")
        if c.advice:
            lines.append(f"    what to do: {c.advice}")
    return lines


def tooltip_text(r: PointResult, limit: int = 8) -> str:
    """A point's events for a tooltip: whether they make it not stable, then one line per event (the first
    `limit`), each with what it was read from."""
    if not r.events:
        return ""
    head = (f"Not stable: {', '.join(k.label for k in r.spoiled_by)}." if r.spoiled
            else "Seen while it ran (its figures are still its own).")
    lines = [head]
    for e in r.events[:limit]:
        lines.append(f"{e.clock} {e.severity.label} — {e.kind.label}: {e.summary}")
        lines += [f"    {ev.source.label}: {ev.text}" for ev in e.evidence[:1]]
    if len(r.events) > limit:
        lines.append(f"… and {len(r.events) - limit} more")
    return "\n".join(lines)


def _count(n: int) -> str:
    return f"{n} event{'s' if n != 1 else ''}"


def events_of(results: Sequence[PointResult]) -> tuple[WatchEvent, ...]:
    """The events of these points, oldest first."""
    return tuple(sorted((e for r in results for e in r.events), key=lambda e: e.at))


__all__ = ["KindCount", "events_of", "kind_counts", "point_event_lines", "point_mark", "run_events",
           "summary_lines", "tooltip_text"]
