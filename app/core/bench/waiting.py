"""Where a point's requests waited before their first token: the two-level queue of a front end's concurrency
cap in front of the server's parallel slots.

A request's TTFT is split (see stats.py) into the client queue (held back by the front end's cap on requests in
flight), the server wait (sent, not yet in prefill: the server's queue, a free slot, loading), the prefill and the
rest (the first token's decoding and transfer). Raising the cap above the slots moves waiting from the front end
into the server; lowering it below moves it back. The server's slot readings (requests seen deferred for a free
slot) say whether its wait was for a slot. Pure: numbers in, cells and words out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.core.bench.stats import Distribution, PointStats
from app.core.bench.sweep import PointResult


class WaitPlace(StrEnum):
    """The part of TTFT before the first token where a point's requests spent the most time on average."""

    FRONT_END = "front_end"  # the client queue, behind the front end's concurrency cap
    SERVER = "server"  # sent, waiting in the server before its prefill (its queue, a slot, loading)
    PREFILL = "prefill"  # the server reading the prompt


PARTS_LEGEND = ("Client queue: arrival to sent, held back by the front end's cap on requests in flight. Server wait: "
                "sent to the server's prefill start (its queue, a free slot, loading). Prefill: the server's prompt "
                "time. Rest: the first token's decoding and transfer.")
LEGEND = (f"{PARTS_LEGEND} Prefill tok/s: prompt tokens evaluated, those from the cache left out; — where the server "
          "does not say which came from its cache.")
PLACE_WORDS = {WaitPlace.FRONT_END: "front-end queue", WaitPlace.SERVER: "server queue/slot",
               WaitPlace.PREFILL: "prefill"}


@dataclass(frozen=True)
class WaitSplit:
    """One point's TTFT parts (ms), where requests waited most, and whether the server said they waited for a slot."""

    client_queue_ms: Distribution
    server_wait_ms: Distribution
    prefill_ms: Distribution
    rest_ms: Distribution
    slot_wait: bool | None  # requests seen deferred for a free slot (None: the server did not say)
    most: WaitPlace | None  # None: no part was measured

    @property
    def most_words(self) -> str:
        """e.g. "server queue/slot (waiting for a slot)", "—" when nothing was measured."""
        if self.most is None:
            return "—"
        words = PLACE_WORDS[self.most]
        if self.most is WaitPlace.SERVER and self.slot_wait is not None:
            words = "server: waiting for a slot" if self.slot_wait else "server queue (no slot wait seen)"
        return words

    def to_json(self) -> dict[str, Any]:
        """The place and the slot reading, for a point's JSON (the parts are in its statistics already)."""
        return {"waited_most": None if self.most is None else self.most.value, "waited_for_slot": self.slot_wait}


def wait_split(stats: PointStats, requests_deferred_max: int | None = None) -> WaitSplit:
    """A point's split; `requests_deferred_max` is the server's slot reading over the window (None: not read)."""
    means = {WaitPlace.FRONT_END: stats.queue_ms.mean, WaitPlace.SERVER: stats.server_wait_ms.mean,
             WaitPlace.PREFILL: stats.prefill_ms.mean}
    known = {place: value for place, value in means.items() if math.isfinite(value)}
    most = max(known, key=lambda p: known[p]) if known else None
    return WaitSplit(stats.queue_ms, stats.server_wait_ms, stats.prefill_ms, stats.first_token_rest_ms,
                     None if requests_deferred_max is None else requests_deferred_max > 0, most)


def axes_title(varying: Sequence[str], closed: bool) -> str:
    """The table's title: the article's two axes named where both vary."""
    if not closed and "parallel" in varying and "concurrency" in varying:
        return "Where requests waited before their first token — front-end concurrency cap × server parallel slots"
    return "Where requests waited before their first token"


def waits_header(closed: bool) -> tuple[str, ...]:
    """The columns: the two axes, then average / P95 of each part, the prefill rate, cache hits, the place."""
    return ("Parallel slots", "Clients" if closed else "Front-end cap", "Client queue avg/p95 (ms)",
            "Server wait avg/p95 (ms)", "Prefill avg/p95 (ms)", "Rest avg (ms)", "Prefill tok/s", "Cache hits",
            "Waited most in")


def _ms(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x:.0f}"


def _pair(d: Distribution) -> str:
    return "—" if not d.n else f"{_ms(d.mean)} / {_ms(d.p95)}"


def waits_cells(parallel: int | None, concurrency: int, stats: PointStats, split: WaitSplit,
                closed: bool) -> list[str]:
    """One point's row (a cap of 0 is no cap)."""
    cap = str(concurrency) if closed or concurrency else "none"
    rate = stats.prefill_tokens_per_s
    share = stats.cache_hit_share
    return ["—" if parallel is None else str(parallel), cap, _pair(split.client_queue_ms), _pair(split.server_wait_ms),
            _pair(split.prefill_ms), _ms(split.rest_ms.mean) if split.rest_ms.n else "—",
            f"{rate.mean:.0f}" if rate.n else "—", f"{share * 100:.0f} %" if math.isfinite(share) else "—",
            split.most_words]




def waits_table(results: Sequence[PointResult], closed: bool) -> list[list[str]]:
    """The rows of the measured points, in the order given."""
    return [waits_cells(r.point.parallel, r.point.concurrency, r.stats,
                        wait_split(r.stats, r.server.requests_deferred_max), closed)
            for r in results if r.stats is not None and r.stats.requests_ok]


PARTS = ("client queue", "server wait", "prefill", "rest")  # the parts of TTFT, in the order they happen


@dataclass(frozen=True)
class WaitBar:
    """One measured point as a stacked bar: its two axes in words, the average of each part of TTFT (ms, PARTS'
    order; 0 where a part was not measured) and where its requests waited most."""

    parallel: str  # the server's parallel slots ("—" where unknown)
    cap: str  # the front end's cap on requests in flight ("none"), or the clients of a closed loop
    means_ms: tuple[float, float, float, float]
    most_words: str
    closed: bool = False  # a closed loop: `cap` counts its clients

    @property
    def label(self) -> str:
        """e.g. "2 slots · cap 4", "2 slots · 4 clients"."""
        cap = f"{self.cap} client{'s' * (self.cap != '1')}" if self.closed else f"cap {self.cap}"
        return f"{self.parallel} slot{'s' * (self.parallel != '1')} · {cap}"


def wait_bars(results: Sequence[PointResult], closed: bool) -> list[WaitBar]:
    """The measured points' stacked bars, in the order given (as waits_table's rows)."""
    bars = []
    for r in results:
        if r.stats is None or not r.stats.requests_ok:
            continue
        split = wait_split(r.stats, r.server.requests_deferred_max)
        cells = waits_cells(r.point.parallel, r.point.concurrency, r.stats, split, closed)
        means = tuple(d.mean if d.n and math.isfinite(d.mean) else 0.0 for d in
                      (split.client_queue_ms, split.server_wait_ms, split.prefill_ms, split.rest_ms))
        bars.append(WaitBar(cells[0], cells[1], (means[0], means[1], means[2], means[3]), split.most_words, closed))
    return bars


def waits_lines(results: Sequence[PointResult], varying: Sequence[str], closed: bool) -> list[str]:
    """The table as aligned text lines under its title ([] when no point was measured)."""
    rows = waits_table(results, closed)
    if not rows:
        return []
    rows = [list(waits_header(closed)), *rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [axes_title(varying, closed), *("  " + "  ".join([*(row[i].rjust(widths[i]) for i in range(len(widths))),
                                                           row[-1]]) for row in rows), LEGEND]


def waits_markdown(results: Sequence[PointResult], varying: Sequence[str], closed: bool) -> list[str]:
    """The table as a Markdown section ([] when no point was measured)."""
    rows = waits_table(results, closed)
    if not rows:
        return []
    header = waits_header(closed)
    return ["", f"## {axes_title(varying, closed)}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(rows_) + " |" for rows_ in rows), "", LEGEND]


__all__ = ["LEGEND", "PARTS", "PARTS_LEGEND", "PLACE_WORDS", "WaitBar", "WaitPlace", "WaitSplit", "wait_bars", "axes_title", "wait_split", "waits_cells", "waits_header",
           "waits_lines", "waits_markdown", "waits_table"]
