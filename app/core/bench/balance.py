"""Each backend's share of a point's work behind a balancer, read from that backend's own counters, and
whether the balancer spread it evenly.

A sweep or scenario measured at a balancer's URL (nginx in front of two servers) says nothing of where the
requests went; each backend's own counters do. Every figure carries its source: the backend's counter, its
slots, or unavailable with the reason (a server that keeps no request counter;
a backend that did not answer). Nothing here is derived from what the client saw."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Deviation from an even split (percentage points of the judged figure) above which a spread is UNEVEN. Wide
# enough for the rounding of a small point (5 of 8 requests on one of two backends is 12.5 points off), narrow
# enough for a 3:1 weighting (25 points off).
UNEVEN_POINTS = 15.0


class FigureSource(StrEnum):
    """Where a backend's figure comes from."""

    SERVER_COUNTER = "server_counter"  # the increase of the backend's own counter over the point's window
    SLOTS = "slots"  # what the backend's /slots showed over the window
    UNAVAILABLE = "unavailable"  # not known: `why` says why


class BalanceVerdict(StrEnum):
    """How evenly the balancer spread a point's work over its backends."""

    EVEN = "even"  # every backend within UNEVEN_POINTS of an even split
    UNEVEN = "uneven"  # some backend further off than that
    ONE_BACKEND_IDLE = "one_backend_idle"  # a backend did none of the work while others did
    UNKNOWN = "unknown"  # a backend's figure is not known, or no backend saw any work

    @property
    def label(self) -> str:
        """Words for a table cell or a warning."""
        return _VERDICT_LABELS[self]


_VERDICT_LABELS = {BalanceVerdict.EVEN: "even", BalanceVerdict.UNEVEN: "UNEVEN",
                   BalanceVerdict.ONE_BACKEND_IDLE: "a backend idle", BalanceVerdict.UNKNOWN: "not known"}


class Measure(StrEnum):
    """The figure a spread is judged on."""

    REQUESTS = "requests"
    GENERATED_TOKENS = "generated_tokens"
    PROMPT_TOKENS = "prompt_tokens"

    @property
    def words(self) -> str:
        """The figure in words."""
        return self.value.replace("_", " ")


@dataclass(frozen=True)
class Figure:
    """One backend's figure over a point's window, where it comes from and its share of all backends' (%)."""

    value: float | None = None
    source: FigureSource = FigureSource.UNAVAILABLE
    why: str = ""  # why it is unavailable
    share_pct: float | None = None  # None unless every backend's figure is known and their sum is not 0

    @classmethod
    def unavailable(cls, why: str) -> Figure:
        """A figure not known, and why."""
        return cls(None, FigureSource.UNAVAILABLE, why)

    @property
    def known(self) -> bool:
        """True when the figure has a value."""
        return self.value is not None and self.source is not FigureSource.UNAVAILABLE

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"value": self.value, "source": self.source.value, "why": self.why, "share_pct": self.share_pct}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Figure:
        """Inverse of to_json; an unreadable entry reads as unavailable."""
        if not isinstance(data, Mapping):
            return cls.unavailable("not recorded")
        try:
            source = FigureSource(str(data.get("source")))
        except ValueError:
            return cls.unavailable("not recorded")
        value, share = data.get("value"), data.get("share_pct")
        return cls(float(value) if isinstance(value, (int, float)) else None, source, str(data.get("why") or ""),
                   float(share) if isinstance(share, (int, float)) else None)


@dataclass(frozen=True)
class BackendShare:
    """One backend behind the balancer: its requests, prompt and generated tokens over a point's window."""

    name: str
    url: str
    requests: Figure = field(default_factory=Figure)
    prompt_tokens: Figure = field(default_factory=Figure)
    generated_tokens: Figure = field(default_factory=Figure)

    def figure(self, measure: Measure) -> Figure:
        """The figure `measure` names."""
        return {Measure.REQUESTS: self.requests, Measure.PROMPT_TOKENS: self.prompt_tokens,
                Measure.GENERATED_TOKENS: self.generated_tokens}[measure]

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"name": self.name, "url": self.url, "requests": self.requests.to_json(),
                "prompt_tokens": self.prompt_tokens.to_json(), "generated_tokens": self.generated_tokens.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackendShare:
        """Inverse of to_json."""
        return cls(str(data.get("name", "")), str(data.get("url", "")), Figure.from_json(data.get("requests")),
                   Figure.from_json(data.get("prompt_tokens")), Figure.from_json(data.get("generated_tokens")))


@dataclass(frozen=True)
class Balance:
    """Every backend's share of a point's work and the verdict on the spread, judged on `measure` (requests
    where every backend counts them, else generated tokens); `off_points` is the furthest a backend's share is
    from an even split, `ratio` the largest share over the smallest (None where the smallest is 0 or unknown)."""

    backends: tuple[BackendShare, ...]
    verdict: BalanceVerdict
    measure: Measure | None = None
    off_points: float | None = None
    ratio: float | None = None
    reason: str = ""  # why the verdict is UNKNOWN

    @property
    def warns(self) -> bool:
        """True when the spread is worth a warning (uneven, or a backend did nothing)."""
        return self.verdict in (BalanceVerdict.UNEVEN, BalanceVerdict.ONE_BACKEND_IDLE)

    def cell(self) -> str:
        """The compact column: "behind the balancer: a 75% / b 25%" without its prefix ("a 75% / b 25%"), a
        backend whose share is not known as "b ?"; with the verdict where it warns."""
        parts = []
        for b in self.backends:
            share = b.figure(self.measure).share_pct if self.measure is not None else None
            parts.append(f"{b.name} {share:.0f}%" if share is not None else f"{b.name} ?")
        text = " / ".join(parts)
        return f"{text} ({self.verdict.label})" if self.warns else text

    def lines(self) -> list[str]:
        """The figures behind the cell, one line per backend, then the verdict (a tooltip, the report)."""
        out = [f"{b.name} ({b.url}): " + "; ".join(_figure_words(name, b.figure(m)) for name, m in _FIGURES)
               for b in self.backends]
        out.append(self.verdict_words())
        return out

    def verdict_words(self) -> str:
        """The verdict with what it was judged on."""
        if self.verdict is BalanceVerdict.UNKNOWN:
            return f"Spread not known: {self.reason}"
        on = self.measure.words if self.measure is not None else ""
        ratio = f", largest/smallest {self.ratio:.2f}" if self.ratio is not None else ""
        off = f"{self.off_points:.0f} points off an even split" if self.off_points is not None else ""
        return f"Spread {self.verdict.label} on {on}: {off}{ratio}."

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return {"backends": [b.to_json() for b in self.backends], "verdict": self.verdict.value,
                "measure": self.measure.value if self.measure is not None else None, "off_points": self.off_points,
                "ratio": self.ratio, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Balance | None:
        """Inverse of to_json; None for a point measured without backends behind a balancer."""
        if not isinstance(data, Mapping) or not isinstance(data.get("backends"), list):
            return None
        try:
            verdict = BalanceVerdict(str(data.get("verdict")))
        except ValueError:
            verdict = BalanceVerdict.UNKNOWN
        measure = str(data.get("measure"))
        return cls(tuple(BackendShare.from_json(b) for b in data["backends"] if isinstance(b, Mapping)), verdict,
                   Measure(measure) if measure in Measure._value2member_map_ else None,
                   _number(data.get("off_points")), _number(data.get("ratio")), str(data.get("reason") or ""))


_FIGURES = (("requests", Measure.REQUESTS), ("prompt tokens evaluated", Measure.PROMPT_TOKENS),
            ("generated tokens", Measure.GENERATED_TOKENS))
_SOURCE_WORDS = {FigureSource.SERVER_COUNTER: "its counter", FigureSource.SLOTS: "its slots"}


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) else None


def _figure_words(name: str, figure: Figure) -> str:
    if not figure.known:
        return f"{name}: {figure.why or 'not read'}"
    share = f" = {figure.share_pct:.0f}%" if figure.share_pct is not None else ""
    return f"{name} {figure.value:.0f}{share} (from {_SOURCE_WORDS.get(figure.source, figure.source.value)})"


def _with_shares(backends: Sequence[BackendShare], measure: Measure) -> list[Figure] | None:
    """Each backend's `measure` figure with its share, or None unless every one is known."""
    figures = [b.figure(measure) for b in backends]
    if not all(f.known for f in figures):
        return None
    total = sum(f.value or 0.0 for f in figures)
    if total <= 0:
        return figures
    return [Figure(f.value, f.source, f.why, (f.value or 0.0) / total * 100.0) for f in figures]


def judge(backends: Sequence[BackendShare], uneven_points: float = UNEVEN_POINTS) -> Balance:
    """The backends with their shares filled in, and the verdict on the spread: judged on requests where every
    backend counts them, else on generated tokens (then prompt tokens)."""
    filled: list[dict[Measure, Figure]] = [{m: b.figure(m) for m in Measure} for b in backends]
    for measure in Measure:
        shared = _with_shares(backends, measure)
        if shared is not None:
            for slot, figure in zip(filled, shared):
                slot[measure] = figure
    out = tuple(BackendShare(b.name, b.url, f[Measure.REQUESTS], f[Measure.PROMPT_TOKENS], f[Measure.GENERATED_TOKENS])
                for b, f in zip(backends, filled))
    if len(out) < 2:
        return Balance(out, BalanceVerdict.UNKNOWN, reason="a spread needs two backends or more")
    judged = next((m for m in Measure if all(b.figure(m).known for b in out)), None)
    if judged is None:
        missing = next(b for b in out if not b.figure(Measure.GENERATED_TOKENS).known)
        return Balance(out, BalanceVerdict.UNKNOWN,
                       reason=f"{missing.name}: {missing.figure(Measure.GENERATED_TOKENS).why or 'not read'}")
    measure = judged
    shares = [b.figure(measure).share_pct for b in out]
    if any(s is None for s in shares):
        return Balance(out, BalanceVerdict.UNKNOWN, measure, reason=f"no backend counted any {measure.words}")
    known = [s for s in shares if s is not None]
    even = 100.0 / len(known)
    off = max(abs(s - even) for s in known)
    ratio = max(known) / min(known) if min(known) > 0 else None
    if min(known) == 0:
        verdict = BalanceVerdict.ONE_BACKEND_IDLE
    else:
        verdict = BalanceVerdict.UNEVEN if off > uneven_points else BalanceVerdict.EVEN
    return Balance(out, verdict, measure, off, ratio)


__all__ = ["UNEVEN_POINTS", "Balance", "BackendShare", "BalanceVerdict", "Figure", "FigureSource", "Measure", "judge"]
