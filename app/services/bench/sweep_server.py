"""The server's own readings over a benchmark's measured window: slots busy (or, for a server without
slots such as vLLM, requests running), requests waiting for a slot, KV-cache fill, and its
generated-tokens counter — for a backend whose server reports them (llama-server's /slots and
/metrics, an OpenAI-compatible server's /metrics). They stand next to the client's figures so a reader sees
whether the server agrees: as many busy slots as the point's parallel, the extra clients waiting."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence

from app.core.bench.sweep import ServerFigures
from app.core.errors import DeckError
from app.core.ports.telemetry import ServerTelemetry, ServerTelemetryFactory
from app.core.server_telemetry import ServerSample
from app.services.bench.window import PollingWindow


def _in_flight(sample: ServerSample) -> int:
    """Tokens the busy slots have decoded so far (not yet in the server's counter)."""
    return sum(s.decoded or 0 for s in sample.slots if s.busy)


SETTLE_READINGS = 20  # at most 1 s of readings after the workload, waiting for busy slots to be released
SETTLE_INTERVAL_S = 0.05


def _increase(first: float | None, last: float | None) -> float | None:
    return None if first is None or last is None else max(0.0, last - first)


def server_figures(samples: Sequence[ServerSample], reason: str = "") -> ServerFigures:
    """The window's figures from its readings (the first is the baseline, taken as measuring starts)."""
    if not samples:
        return ServerFigures(reason=reason or "the server reported nothing during the run")
    busy = [s.slots_busy for s in samples if s.slots_busy is not None]
    deferred = [s.requests_deferred for s in samples if s.requests_deferred is not None]
    running = [s.requests_processing for s in samples if s.requests_processing is not None]
    kv = [s.kv_cache_fill for s in samples if s.kv_cache_fill is not None and math.isfinite(s.kv_cache_fill)]
    totals = [s.slots_total for s in samples if s.slots_total is not None]
    first, last = samples[0], samples[-1]
    why = "; ".join(x for x in dict.fromkeys((last.slots_reason, last.metrics_reason)) if x)
    return ServerFigures(
        samples=len(samples),
        slots_total=max(totals) if totals else None,
        slots_busy_max=max(busy) if busy else None,
        slots_busy_mean=sum(busy) / len(busy) if busy else None,
        requests_deferred_max=max(deferred) if deferred else None,
        requests_running_max=max(running) if running else None,
        kv_fill_max_pct=max(kv) * 100.0 if kv else None,
        # The counter counts finished requests only. The window's requests start as it opens (the baseline
        # may already see their first tokens in flight: not counted twice) and have ended by its last
        # reading; anything still decoding then is added.
        generated_tokens=None if (grown := _increase(first.predicted_tokens_total, last.predicted_tokens_total))
        is None else grown + _in_flight(last),
        prompt_tokens=_increase(first.prompt_tokens_total, last.prompt_tokens_total),
        window_s=last.at - first.at if len(samples) > 1 else None,
        reason=reason or why,
    )


class ServerWindow(PollingWindow[ServerSample]):
    """Polls the server's own telemetry every interval_s seconds while a workload runs; a failed
    reading is a gap, never a failed benchmark."""

    def __init__(self, factory: ServerTelemetryFactory | None, base_url: str, interval_s: float = 0.25,
                 on_sample: Callable[[ServerSample], None] | None = None) -> None:
        super().__init__(interval_s, on_sample)
        self._factory = factory
        self._base_url = base_url
        self._reader: ServerTelemetry | None = None
        self.last_error = ""
        self.answered = False  # whether the latest reading was answered

    @property
    def enabled(self) -> bool:
        """True when the backend's server reports its own work."""
        return self._factory is not None

    async def read(self) -> ServerSample | None:
        """One reading now (None without telemetry or when the server did not answer)."""
        if self._factory is None:
            return None
        if self._reader is None:
            self._reader = self._factory(self._base_url)
        try:
            sample = await self._reader.sample()
        except DeckError as exc:
            self.last_error = exc.message
            self.answered = False
            return None
        self.answered = True
        return sample

    async def stop(self) -> ServerFigures:
        """Take a last reading (every request has ended: the counter holds them all), stop, and summarise.
        (The first reading, taken as the window starts, is its baseline.)"""
        if not self.started:
            return ServerFigures(reason="" if self.enabled else "this server does not report its own slots")
        await self.finish()
        # A reply's last bytes can reach the client a moment before its slot is released, and the
        # counter takes it in a moment after that: read again (briefly) until the slots are idle and
        # the counter held still between two readings, so it holds every request.
        for _ in range(SETTLE_READINGS):
            if self._settled():
                break
            await asyncio.sleep(SETTLE_INTERVAL_S)
            last = await self.read()
            if last is not None:
                self.keep(last)
        if self._reader is not None:
            await self._reader.aclose()
            self._reader = None
        return server_figures(self.samples, "" if self.samples else self.last_error)

    def _settled(self) -> bool:
        """No slot busy, and the counter the same in the last two readings (True without readings)."""
        if not self.samples:
            return True
        last = self.samples[-1]
        if last.slots_busy or (last.slots_busy is None and last.requests_processing):
            return False  # a slot, or where the server reports no slots a request, still at work
        if last.predicted_tokens_total is None or len(self.samples) < 2:
            return True
        return self.samples[-2].predicted_tokens_total == last.predicted_tokens_total


__all__ = ["ServerWindow", "server_figures"]
