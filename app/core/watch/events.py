"""Events the watchdog raises about what a server does without saying so: a prompt cut short, layers on
the CPU, fewer slots or a smaller context than asked, a cold load mid-work, a full KV cache, the GPU
slowing itself, VRAM taken by other programs, a restart or a crash.

An event is a fact with its time, a severity, the evidence it was read from (a log line as logged, the
figures an endpoint or the driver gave) and what to do. The kind and the severity are types; the words
are for people. Events are immutable and serialise to plain JSON for the history.
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class Severity(enum.IntEnum):
    """How much an event matters; SEVERE ones are worth a desktop notification."""

    INFO = 1  # worth knowing; nothing is wrong with the answers
    WARNING = 2  # slower or smaller than asked: figures measured now are skewed
    SEVERE = 3  # answers are wrong or the server is gone

    @property
    def label(self) -> str:
        """For people: "info", "warning", "severe"."""
        return self.name.lower()


class EventKind(enum.Enum):
    """What happened. The value is the stable name kept in the history."""

    PROMPT_TRUNCATED = "prompt_truncated"  # the server used fewer prompt tokens than were sent
    LAYERS_ON_CPU = "layers_on_cpu"  # part of the model sits in host memory
    FEWER_SLOTS = "fewer_slots"  # the server runs fewer parallel slots than asked
    SMALLER_CONTEXT = "smaller_context"  # the server's context per slot is smaller than asked
    COLD_LOAD = "cold_load"  # a model was (re)loaded while work was going on
    MODEL_UNLOADED = "model_unloaded"  # a model left memory (keep-alive ran out, evicted, unloaded)
    KV_CACHE_FULL = "kv_cache_full"  # the KV cache is (nearly) full
    CONTEXT_SHIFT = "context_shift"  # the server dropped tokens from a slot's context to go on
    REQUESTS_DEFERRED = "requests_deferred"  # requests wait in the server's queue for a free slot
    GPU_SLOWDOWN = "gpu_slowdown"  # the GPU lowers its clocks (thermal, power cap, hardware slowdown)
    VRAM_FROM_OTHERS = "vram_from_others"  # other processes take GPU memory, free memory runs short
    SERVER_RESTARTED = "server_restarted"  # the server (or its engine) started again behind the app's back
    SERVER_CRASHED = "server_crashed"  # the server (or its engine) ended without being asked to

    @property
    def label(self) -> str:
        """A short name for people."""
        return _LABELS[self]

    @property
    def spoils_measurement(self) -> bool:
        """True when figures measured while it happened are not the setting's own: a sweep point or a reply
        that saw it is not "stable"."""
        return self in _SPOILERS


_LABELS: Mapping[EventKind, str] = {
    EventKind.PROMPT_TRUNCATED: "prompt cut short",
    EventKind.LAYERS_ON_CPU: "layers on the CPU",
    EventKind.FEWER_SLOTS: "fewer slots than asked",
    EventKind.SMALLER_CONTEXT: "smaller context than asked",
    EventKind.COLD_LOAD: "cold load",
    EventKind.MODEL_UNLOADED: "model unloaded",
    EventKind.KV_CACHE_FULL: "KV cache full",
    EventKind.CONTEXT_SHIFT: "context shifted",
    EventKind.REQUESTS_DEFERRED: "requests deferred",
    EventKind.GPU_SLOWDOWN: "GPU slowing down",
    EventKind.VRAM_FROM_OTHERS: "VRAM taken by others",
    EventKind.SERVER_RESTARTED: "server restarted",
    EventKind.SERVER_CRASHED: "server crashed",
}

_SPOILERS = frozenset({
    EventKind.PROMPT_TRUNCATED, EventKind.LAYERS_ON_CPU, EventKind.FEWER_SLOTS, EventKind.SMALLER_CONTEXT,
    EventKind.COLD_LOAD, EventKind.CONTEXT_SHIFT, EventKind.GPU_SLOWDOWN, EventKind.SERVER_RESTARTED,
    EventKind.SERVER_CRASHED,
})


EVIDENCE_CHARS = 1000  # the longest evidence text kept


class Source(enum.Enum):
    """Where the evidence was read."""

    LOG = "log"  # the server's own log (a managed server's output, an attached one's journal or file)
    LOADED = "loaded"  # the server's list of loaded models with their sizes in memory
    METRICS = "metrics"  # the server's counters
    SLOTS = "slots"  # the server's per-slot state
    GPU = "gpu"  # the GPU driver
    REPLY = "reply"  # a reply's own figures
    STATUS = "status"  # the server process as the app supervises it

    @property
    def label(self) -> str:
        """For people."""
        return _SOURCE_LABELS[self]


_SOURCE_LABELS: Mapping[Source, str] = {
    Source.LOG: "server log", Source.LOADED: "loaded models", Source.METRICS: "server metrics",
    Source.SLOTS: "server slots", Source.GPU: "GPU driver", Source.REPLY: "reply", Source.STATUS: "server process",
}


@dataclass(frozen=True)
class Evidence:
    """What an event was read from: the text as the source gave it (a log line, or the figures in words)
    and the figures by name (units in the names)."""

    source: Source
    text: str
    figures: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.text) > EVIDENCE_CHARS:  # a runaway log line is kept as its start, not whole
            object.__setattr__(self, "text", self.text[:EVIDENCE_CHARS - 1] + "…")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (figures that are not finite numbers are left out: strict JSON has no NaN)."""
        return {"source": self.source.value, "text": self.text,
                "figures": {k: v for k, v in self.figures.items() if math.isfinite(v)}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Evidence:
        """Back from to_json; raises ValueError/KeyError/TypeError on a malformed document."""
        figures = data.get("figures") or {}
        if not isinstance(figures, Mapping):
            raise TypeError("figures is not an object")
        return cls(Source(data["source"]), str(data["text"]), {str(k): float(v) for k, v in figures.items()
                                                               if isinstance(v, int | float) and math.isfinite(v)})


@dataclass(frozen=True)
class WatchEvent:
    """One thing the server did without saying so.

    `at` is wall-clock time (time.time() seconds), what a history or a reply is matched against; `mono` is
    the monotonic time it was seen (the live graphs' axis), None for an event read back from storage.
    `subject` names what it concerns (a model, a server address) and, with the kind, which events are one
    episode."""

    kind: EventKind
    severity: Severity
    at: float
    summary: str  # one line for people
    advice: str  # what to do
    evidence: tuple[Evidence, ...] = ()
    subject: str = ""
    mono: float | None = field(default=None, compare=False)

    @property
    def spoils_measurement(self) -> bool:
        """True when a measurement that saw this event is not the setting's own."""
        return self.kind.spoils_measurement

    @property
    def clock(self) -> str:
        """The local time of day, HH:MM:SS."""
        return time.strftime("%H:%M:%S", time.localtime(self.at))

    def line(self) -> str:
        """One line for a terminal or a list: "12:03:04 WARNING layers on the CPU: <summary>"."""
        return f"{self.clock} {self.severity.name} {self.kind.label}: {self.summary}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (no monotonic time: it means nothing after the process ends)."""
        return {"kind": self.kind.value, "severity": self.severity.label, "at": self.at, "summary": self.summary,
                "advice": self.advice, "evidence": [e.to_json() for e in self.evidence], "subject": self.subject}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatchEvent:
        """Back from to_json; raises ValueError/KeyError/TypeError on a malformed document."""
        evidence = data.get("evidence") or []
        if not isinstance(evidence, list):
            raise TypeError("evidence is not a list")
        return cls(kind=EventKind(data["kind"]), severity=Severity[str(data["severity"]).upper()],
                   at=float(data["at"]), summary=str(data["summary"]), advice=str(data.get("advice", "")),
                   evidence=tuple(Evidence.from_json(e) for e in evidence), subject=str(data.get("subject", "")))


def events_from_json(items: object) -> tuple[WatchEvent, ...]:
    """Events from a stored list, skipping any that cannot be read (a newer kind, a damaged entry)."""
    if not isinstance(items, list):
        return ()
    out: list[WatchEvent] = []
    for item in items:
        try:
            out.append(WatchEvent.from_json(item))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return tuple(out)


def between(events: Iterable[WatchEvent], start: float, end: float) -> tuple[WatchEvent, ...]:
    """The events with start <= at <= end (wall-clock seconds), oldest first."""
    return tuple(sorted((e for e in events if start <= e.at <= end), key=lambda e: e.at))


def spoiling(events: Iterable[WatchEvent]) -> tuple[WatchEvent, ...]:
    """The events that make a measurement not the setting's own."""
    return tuple(e for e in events if e.spoils_measurement)


def worst(events: Iterable[WatchEvent]) -> Severity | None:
    """The highest severity among them, None when there are none."""
    return max((e.severity for e in events), default=None)


def event_lines(events: Sequence[WatchEvent], *, evidence: bool = True, advice: bool = True) -> list[str]:
    """Lines for a terminal: each event, then (indented) its evidence and what to do."""
    lines: list[str] = []
    for e in events:
        lines.append(e.line())
        if evidence:
            lines.extend(f"    {ev.source.label}: {ev.text}" for ev in e.evidence)
        if advice and e.advice:
            lines.append(f"    what to do: {e.advice}")
    return lines


def events_markdown(events: Sequence[WatchEvent]) -> list[str]:
    """A Markdown table of the events (time, severity, kind, what happened, evidence, what to do)."""
    if not events:
        return []
    rows = ["| Time | Severity | Event | What happened | Evidence | What to do |", "|---|---|---|---|---|---|"]
    for e in events:
        evidence = "<br>".join(f"{ev.source.label}: `{_cell(ev.text)}`" for ev in e.evidence)
        rows.append(f"| {e.clock} | {e.severity.label} | {e.kind.label} | {_cell(e.summary)} | {evidence} | "
                    f"{_cell(e.advice)} |")
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


__all__ = ["EventKind", "Evidence", "Severity", "Source", "WatchEvent", "between", "event_lines",
           "events_from_json", "events_markdown", "spoiling", "worst"]
