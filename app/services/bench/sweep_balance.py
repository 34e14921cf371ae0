"""Each backend's share of a point's work when the sweep measures a balancer's URL: every backend behind it is
read through its own backend's telemetry right before the counted window opens, while it runs and right after it
(until its slots are idle), and its counters' increases are its share. A backend that does not answer at the end
is a gap with its reason, never a failed point: the balancer's other backends carry the run."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.bench.balance import Balance, BackendShare, Figure, FigureSource, judge
from app.core.bench.sweep import ServerFigures
from app.core.ports.telemetry import ServerTelemetryFactory
from app.services.bench.sweep_server import ServerWindow

NO_REQUEST_COUNTER = "not counted by this server (it keeps no request counter)"
NO_TELEMETRY = "this backend reports no counters of its own"


@dataclass(frozen=True)
class Behind:
    """A backend behind the balancer: its name, its own URL and its backend's telemetry (None: it has none)."""

    name: str
    url: str
    telemetry: ServerTelemetryFactory | None


def _figure(value: float | None, why: str) -> Figure:
    return Figure(value, FigureSource.SERVER_COUNTER) if value is not None else Figure.unavailable(why)


def backend_share(backend: Behind, window: ServerWindow, figures: ServerFigures) -> BackendShare:
    """One backend's figures over the window: its counters' increases, or why each is not known."""
    if backend.telemetry is None:
        missing = Figure.unavailable(NO_TELEMETRY)
        return BackendShare(backend.name, backend.url, missing, missing, missing)
    if not window.answered or len(window.samples) < 2:
        when = "after" if window.samples else "before"
        why = f"it did not answer {when} the point ({window.last_error or 'no reply'})"
        down = Figure.unavailable(why)
        return BackendShare(backend.name, backend.url, down, down, down)
    first, last = window.samples[0], window.samples[-1]
    requests = None if first.requests_finished_total is None or last.requests_finished_total is None \
        else max(0.0, last.requests_finished_total - first.requests_finished_total)
    counters_why = figures.reason or "the server did not report this counter"
    return BackendShare(backend.name, backend.url, _figure(requests, NO_REQUEST_COUNTER),
                        _figure(figures.prompt_tokens, counters_why), _figure(figures.generated_tokens, counters_why))


class BalanceWindow:
    """Reads every backend behind the balancer over one point's counted window."""

    def __init__(self, backends: Sequence[Behind], interval_s: float = 0.25) -> None:
        self._backends = tuple(backends)
        self._windows = [ServerWindow(b.telemetry, b.url, interval_s) for b in self._backends]

    @property
    def enabled(self) -> bool:
        """True when the sweep measures a balancer with backends named behind it."""
        return bool(self._backends)

    def start(self) -> None:
        """Take each backend's first reading now and read on while the workload runs."""
        for window in self._windows:
            window.start()

    async def stop(self) -> Balance | None:
        """Each backend's last reading (after its slots went idle) and the shares; None without backends."""
        if not self._backends:
            return None
        figures = await asyncio.gather(*(w.stop() for w in self._windows))
        return judge([backend_share(b, w, f) for b, w, f in zip(self._backends, self._windows, figures)])


__all__ = ["NO_REQUEST_COUNTER", "BalanceWindow", "Behind", "backend_share"]
