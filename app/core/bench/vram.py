"""A point's VRAM for people: the server's own peak (its processes' memory, what the estimate prices, the tables'
"Peak VRAM"), the whole card's (other programs included, its own column), and the estimate against the server's.

Where the card was read but the server's own memory was not (a driver that does not say what each process holds,
a server on another machine), the server's figure is "n/a" and a note says why: the card's figure never stands in
for it."""

from __future__ import annotations

from collections.abc import Sequence

from app.core.bench.sweep import PointResult, ServerPeakUnknown

NOT_KNOWN = "n/a"  # the server's own figure where the card was read but it could not be
NO_READING = "—"  # no GPU readings at all


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f}"


def peak_cell(r: PointResult) -> str:
    """The Peak VRAM cell (GiB): the server's own peak, "n/a" where only the card was read, "—" without readings."""
    if r.gpu.server_peak_mib is not None:
        return _gib(r.gpu.server_peak_mib)
    return NOT_KNOWN if r.gpu.server_unknown is not None else NO_READING


def card_cell(r: PointResult) -> str:
    """The Card VRAM cell (GiB): everything on the card at its peak, other programs included."""
    return NO_READING if r.gpu.card_peak_mib is None else _gib(r.gpu.card_peak_mib)


def error_words(r: PointResult) -> str:
    """The estimate against the server's own peak, e.g. "estimated 15.2 GiB, the server's own peak 15.5 GiB:
    0.3 GiB (1.9 %) low"; "" where the point was not priced, or says why the server's figure is missing."""
    if r.estimate_peak_mib is None:
        return ""
    estimated = f"estimated {r.estimate_peak_mib / 1024:.2f} GiB"
    peak = r.gpu.server_peak_mib
    error, share = r.estimate_error_mib, r.estimate_error_pct
    if peak is not None and error is not None:
        side = "high" if error > 0 else "low"
        off = "exact" if round(error) == 0 else f"{abs(error):,.0f} MiB ({abs(share or 0.0):.1f} %) {side}"
        return f"{estimated}, the server's own peak {peak / 1024:.2f} GiB: {off}"
    if r.gpu.server_unknown is not None:
        return f"{estimated}, the server's own peak not known ({r.gpu.server_unknown.words})"
    return ""


def estimate_lines(results: Sequence[PointResult], varying: Sequence[str]) -> list[str]:
    """One line per priced point that the GPU was read at: the estimate against the server's own peak, and the
    card's (e.g. "parallel 4: estimated 15.20 GiB, the server's own peak 15.51 GiB: 317 MiB (2.0 %) low; card
    131.6 GiB"); [] when no point has both."""
    out = []
    for r in results:
        words = error_words(r)
        if not words or not r.gpu.read:
            continue
        card = f"; card {_gib(r.gpu.card_peak_mib)} GiB" if r.gpu.card_peak_mib is not None else ""
        out.append(f"{r.point.label(varying)}: {words}{card}")
    return out


def unknown_note(results: Sequence[PointResult]) -> str:
    """Why Peak VRAM is n/a where it is (one sentence per reason met), "" where every read point knew it."""
    reasons = list(dict.fromkeys(r.gpu.server_unknown for r in results if r.gpu.server_unknown is not None))
    if not reasons:
        return ""
    why = "; ".join(reason.words for reason in reasons)
    return (f"Peak VRAM is the server's own memory; it is {NOT_KNOWN} where it could not be read ({why}). Card VRAM "
            "is the whole card, other programs included.")


__all__ = ["NOT_KNOWN", "NO_READING", "ServerPeakUnknown", "card_cell", "error_words", "estimate_lines", "peak_cell",
           "unknown_note"]
