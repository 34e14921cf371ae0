"""Pick the setting to apply from a finished sweep, and say why in one paragraph with the numbers.

Points measured while something else competed for the device (PointResult.contention), and points
during which the server did something that skews the figures (PointResult.spoiled_by: layers on the
CPU, a cold load, a restart, the GPU slowing down, ...), are left out: their numbers are not their
setting's. When every measured point was left out there is no recommendation, and the text says why.

Rule: among the points that ran and met the targets (TTFT p95 and TPOT p95 within them, at
least `min_success` of requests succeeded), the highest aggregate output tokens/s wins; a tie
goes to the cheaper point (fewer parallel slots, then less VRAM, then fewer clients). Flags:
- plateau: a cheaper qualifying point reaches within PLATEAU_GAIN of the winner's throughput;
- edge: the winner sits at the top (or bottom) of a varied axis's range, so the range may be
  too narrow (a failed point beyond it closes that edge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

from app.core.bench.outcome import FailureKind, PointStatus
from app.core.bench.stats import LatencyTargets, PointStats, meets_targets
from app.core.bench.sweep import PointResult

PLATEAU_GAIN = 0.05


@dataclass(frozen=True)
class Recommendation:
    """The chosen point (by index into the sweep's points) and the explanation."""

    index: int | None
    text: str
    meets_targets: bool = False
    plateau: bool = False
    plateau_index: int | None = None
    edge: str = ""  # "upper", "lower" or ""
    output_tokens_per_s: float | None = None
    contended: tuple[int, ...] = ()  # points left out because something else competed for the device
    spoiled: tuple[int, ...] = ()  # points left out because the server did something that skews their figures

    def to_json(self) -> dict[str, Any]:
        """Plain dict ("spoiled" only where a point was left out for its events, as documents before it was)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if not self.spoiled:
            del data["spoiled"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Recommendation | None:
        """Inverse of to_json (None stays None)."""
        if not data:
            return None
        values = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        values["contended"] = tuple(values.get("contended") or ())
        values["spoiled"] = tuple(values.get("spoiled") or ())
        return cls(**values)


def _cost(r: PointResult) -> tuple[int, float, int]:
    # The server's own memory ranks points; where it is not known, the card's does (the same other programs
    # hold the same memory at every point of a run).
    vram = r.gpu.server_peak_mib if r.gpu.server_peak_mib is not None else r.gpu.card_peak_mib
    return (r.point.parallel or 0, vram if vram is not None else 0.0, r.point.concurrency)


def _gib(mib: float | None) -> str:
    return "n/a" if mib is None else f"{mib / 1024:.1f} GiB"


def _vram_saved(cheaper: PointResult, best: PointResult) -> str:
    """"1.2 GiB less VRAM" by the server's own peaks (by the card's where neither server's is known: the same other
    programs count in both), "" where they cannot be compared."""
    low, high = cheaper.gpu, best.gpu
    if low.server_peak_mib is not None and high.server_peak_mib is not None:
        return f"{_gib(high.server_peak_mib - low.server_peak_mib)} less VRAM"
    if low.server_peak_mib is None and high.server_peak_mib is None and low.card_peak_mib is not None \
            and high.card_peak_mib is not None:
        return f"{_gib(high.card_peak_mib - low.card_peak_mib)} less VRAM on the card"
    return ""


def _name(r: PointResult, varying: Sequence[str]) -> str:
    return r.point.label(varying)


@dataclass(frozen=True)
class MeasuredPoint:
    """A point that ran and measured requests that succeeded: its result, and the statistics it then has."""

    result: PointResult
    stats: PointStats


def measured_points(results: Sequence[PointResult]) -> list[MeasuredPoint]:
    """The points with a measurement (ok or unstable, at least one request succeeded), in their order."""
    return [MeasuredPoint(r, r.stats) for r in results if r.ran and r.stats is not None and r.stats.requests_ok]


def _figures(m: MeasuredPoint) -> str:
    r, s = m.result, m.stats
    parts = [f"{s.output_tokens_per_s:.1f} output tokens/s in aggregate",
             f"TTFT p95 {s.ttft_ms.p95:.0f} ms (mean {s.ttft_ms.mean:.0f} ms)"]
    if s.tpot_ms.n:
        parts.append(f"TPOT p95 {s.tpot_ms.p95:.1f} ms")
    parts.append(f"{s.requests_ok} of {s.requests} requests succeeded")
    if r.gpu.server_peak_mib is not None:
        parts.append(f"peak VRAM {_gib(r.gpu.server_peak_mib)} (the server's own)")
    elif r.gpu.server_unknown is not None and r.gpu.card_peak_mib is not None:
        parts.append(f"the server's own VRAM not known ({r.gpu.server_unknown.words}; the card's peak "
                     f"{_gib(r.gpu.card_peak_mib)} counts other programs too)")
    return ", ".join(parts)


def _misses(m: MeasuredPoint, targets: LatencyTargets) -> str:
    s = m.stats
    out = []
    if s.requests and s.success_rate < targets.min_success:
        out.append(f"only {s.success_rate * 100:.0f} % of requests succeeded")
    if targets.ttft_p95_ms is not None and not s.ttft_ms.p95 <= targets.ttft_p95_ms:
        out.append(f"TTFT p95 {s.ttft_ms.p95:.0f} ms is above {targets.ttft_p95_ms:g} ms")
    if targets.tpot_p95_ms is not None and s.tpot_ms.n and not s.tpot_ms.p95 <= targets.tpot_p95_ms:
        out.append(f"TPOT p95 {s.tpot_ms.p95:.1f} ms is above {targets.tpot_p95_ms:g} ms")
    return " and ".join(out) or "it missed the targets"


def _edge(best: PointResult, results: Sequence[PointResult], varying: Sequence[str]) -> tuple[str, str]:
    """("upper"|"lower"|"", sentence) for the axis that varies most visibly."""
    axis = "parallel" if "parallel" in varying else "concurrency" if "concurrency" in varying else ""
    if not axis:
        return "", ""

    def value(r: PointResult) -> int:
        return (r.point.parallel or 0) if axis == "parallel" else r.point.concurrency

    # Only points sharing the winner's other settings form its range.
    same = [r for r in results if _others(r, axis) == _others(best, axis)]
    values = sorted({value(r) for r in same})
    if len(values) < 2:
        return "", ""
    word = "parallel" if axis == "parallel" else "concurrency"
    if value(best) == values[-1]:
        return "upper", (f"It is the highest {word} tried, so throughput may still rise beyond "
                         f"{values[-1]}: extend the sweep upwards to be sure.")
    if value(best) == values[0]:
        return "lower", (f"It is the lowest {word} tried: more {word} did not pay off within your targets.")
    return "", ""


def _others(r: PointResult, axis: str) -> tuple[object, ...]:
    s = r.point.settings
    shared = (s.kv_cache_type, s.context_length, s.flash_attention)
    return shared if axis == "parallel" else (*shared, s.num_parallel)


def recommend(results: Sequence[PointResult], targets: LatencyTargets,
              varying: Sequence[str] = ("parallel",)) -> Recommendation:
    """The best point under the targets, with flags and a one-paragraph explanation."""
    measured = measured_points(results)
    spoiled = [m.result for m in measured if m.result.spoiled]
    contended = [m.result for m in measured if m.result.contention.contended and not m.result.spoiled]
    excluded = tuple(r.point.index for r in contended)
    spoiled_ids = tuple(r.point.index for r in spoiled)
    ran = [m for m in measured if not m.result.contention.contended and not m.result.spoiled]
    cut = _cut_words(results, varying)
    if not measured:
        reasons = "; ".join(f"{_name(r, varying)}: {r.stable_text()}" for r in results) or "no points"
        text = f"No point produced a measurement, so there is nothing to recommend ({reasons})."
        return Recommendation(None, f"{text} {cut}" if cut else text)
    if not ran and not spoiled:
        return Recommendation(None, "Every measured point shared its device with other programs, so their numbers "
                              f"are not the settings' own and nothing is recommended ({_contended_words(contended, varying)}). "
                              "Close what competes and run the sweep again.", contended=excluded)
    if not ran:
        others = f"; other programs shared the device at {_contended_words(contended, varying)}" if contended else ""
        return Recommendation(None, "No measured point's numbers are its settings' own, so nothing is recommended "
                              f"(the server did something that skews the figures at {_spoiled_words(spoiled, varying)}"
                              f"{others}). Deal with what the server's events say and run the sweep again.",
                              contended=excluded, spoiled=spoiled_ids)
    left_out = " ".join(x for x in (
        f"Left out, measured while other programs competed for the device: {_contended_words(contended, varying)}."
        if contended else "",
        f"Left out, not stable because of what the server did meanwhile: {_spoiled_words(spoiled, varying)}."
        if spoiled else "") if x)
    qualifying = [m for m in ran if meets_targets(m.stats, targets)]
    if not qualifying:
        fastest = max(ran, key=lambda m: m.stats.output_tokens_per_s)
        quickest = min(ran, key=lambda m: m.stats.ttft_ms.p95)
        text = (f"No point met your targets ({targets.describe()}). The fastest, {_name(fastest.result, varying)}, "
                f"reached {fastest.stats.output_tokens_per_s:.1f} tokens/s but {_misses(fastest, targets)}; "
                f"the lowest TTFT p95 was {quickest.stats.ttft_ms.p95:.0f} ms at {_name(quickest.result, varying)}. "
                "Relax the targets, shorten the output, or lower parallel requests and context.")
        return Recommendation(None, " ".join(x for x in (text, left_out) if x), contended=excluded,
                              spoiled=spoiled_ids)

    best = max(qualifying, key=lambda m: (m.stats.output_tokens_per_s, tuple(-c for c in _cost(m.result))))
    best_tps = best.stats.output_tokens_per_s
    sentences = [f"Recommended: {_name(best.result, varying)}. It gives the highest throughput that meets your "
                 f"targets ({targets.describe()}): {_figures(best)}."]
    baseline = min(ran, key=lambda m: _cost(m.result))
    if baseline is not best and baseline.stats.output_tokens_per_s > 0:
        gain = best_tps / baseline.stats.output_tokens_per_s - 1
        sentences.append(f"That is {gain * 100:+.0f} % against {_name(baseline.result, varying)} "
                         f"({baseline.stats.output_tokens_per_s:.1f} tokens/s, TTFT p95 "
                         f"{baseline.stats.ttft_ms.p95:.0f} ms).")
    faster = [m for m in ran if m not in qualifying and m.stats.output_tokens_per_s > best_tps]
    if faster:
        top = max(faster, key=lambda m: m.stats.output_tokens_per_s)
        sentences.append(f"{_name(top.result, varying)} was faster ({top.stats.output_tokens_per_s:.1f} tokens/s) "
                         f"but {_misses(top, targets)}.")
    if left_out:
        sentences.append(left_out)
    broken = [r for r in results if not r.ran and r.status is not PointStatus.CANCELLED]
    if broken:
        sentences.append("Not usable: " + "; ".join(f"{_name(r, varying)} ({r.reason or r.status})" for r in broken) + ".")
    if cut:
        sentences.append(cut)
    cheaper = sorted((m for m in qualifying if m is not best and _cost(m.result) < _cost(best.result)
                      and best_tps < m.stats.output_tokens_per_s * (1 + PLATEAU_GAIN)), key=lambda m: _cost(m.result))
    plateau = cheaper[0] if cheaper else None
    if plateau is not None:
        share = plateau.stats.output_tokens_per_s / best_tps
        extra = ""
        saved = _vram_saved(plateau.result, best.result)
        if saved:
            extra = f" with {saved} and"
        sentences.append(f"Plateau: {_name(plateau.result, varying)} reaches {share * 100:.0f} % of that "
                         f"({plateau.stats.output_tokens_per_s:.1f} tokens/s){extra} a TTFT p95 of "
                         f"{plateau.stats.ttft_ms.p95:.0f} ms, so the last step gains under "
                         f"{PLATEAU_GAIN * 100:.0f} %; prefer it if memory or latency matter more.")
    edge, edge_text = _edge(best.result, results, varying)
    if edge_text:
        sentences.append(edge_text)
    return Recommendation(best.result.point.index, " ".join(sentences), True, plateau is not None,
                          plateau.result.point.index if plateau is not None else None, edge, best_tps, excluded,
                          spoiled_ids)


def _cut_words(results: Sequence[PointResult], varying: Sequence[str]) -> str:
    """For the points whose prompts the server cut or refused (they fail, so they are never recommended): the
    first one's detail, which names the context the prompts need."""
    cut = [r for r in results if r.failure in (FailureKind.TRUNCATED, FailureKind.PROMPT_TOO_LONG) and r.detail]
    if not cut:
        return ""
    return f"At {_name(cut[0], varying)}: {cut[0].detail}"


def _spoiled_words(points: Sequence[PointResult], varying: Sequence[str]) -> str:
    """"parallel 4 (layers on the CPU, cold load)" for each point."""
    return "; ".join(f"{_name(r, varying)} ({', '.join(k.label for k in r.spoiled_by)})" for r in points)


def _contended_words(points: Sequence[PointResult], varying: Sequence[str]) -> str:
    """"parallel 1 (CPU contended 31 % by stress (pid 42))" for each point."""
    words = []
    for r in points:
        by = f" by {r.contention.top_text}" if r.contention.top_text else ""
        words.append(f"{_name(r, varying)} ({r.contention.short_text()}{by})")
    return "; ".join(words)




def pareto_front(results: Sequence[PointResult]) -> list[int]:
    """Point indexes on the throughput/latency Pareto front: no other measured point has both more
    output tokens/s and a lower TTFT p95. Ordered by throughput, lowest first. Points measured while
    others competed for the device, or while the server did something that skews the figures, are not on
    it: their figures are not their settings'."""
    ran = [m for m in measured_points(results) if not m.result.contention.contended and not m.result.spoiled]
    ran.sort(key=lambda m: (-m.stats.output_tokens_per_s, m.stats.ttft_ms.p95))
    front: list[int] = []
    best_ttft = float("inf")
    for m in ran:
        ttft = m.stats.ttft_ms.p95
        if ttft < best_ttft:
            front.append(m.result.point.index)
            best_ttft = ttft
    return front[::-1]


__all__ = ["MeasuredPoint", "PLATEAU_GAIN", "Recommendation", "measured_points", "pareto_front", "recommend"]
