"""The dashboard's part fed by the server's own telemetry: the slots & queue plot, the server-wide
throughput plot and their tiles, shown only where the backend's capabilities say it reports them."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.core.ports.backend import BackendSpec
from app.core.server_telemetry import ServerTelemetryRing
from app.ui.pages.dashboard import server_plots
from app.ui.pages.dashboard.plots import TimePlot, WindowRows, on_screen
from app.ui.pages.dashboard.tiles import NO_DATA, StatTile, finite, fmt_number

NOTICE_STYLE = "color: #ffe08a; font-size: 11pt; background: #2a2616; border-radius: 6px; padding: 4px 8px;"


class ServerSection:
    """Plots and tiles drawn from a ServerTelemetryRing. `slots_plot` is None on a backend that reports
    neither slots nor metrics (then `reason` says why); `tokens_plot` is None unless it has server metrics."""

    def __init__(self, backend: BackendSpec | None, ring: ServerTelemetryRing | None, capacity: int) -> None:
        self.ring = ring
        self.reason = ""
        self.slots_plot: server_plots.ServerSlotsPlot | None = None
        self.tokens_plot: TimePlot | None = None
        self.panel: QWidget | None = None
        self.slots_tile: StatTile | None = None
        reports = backend is not None and (backend.can("reports_slots") or backend.can("server_metrics"))
        if backend is not None and not reports:
            self.reason = backend.why_not("reports_slots")
        elif backend is not None and not backend.can("server_metrics"):
            self.reason = backend.why_not("server_metrics")  # slots, but the throughput counts this app's requests
        if ring is None or not reports:
            return
        assert backend is not None
        self.server_wide = backend.can("server_metrics")
        self.slots_plot = server_plots.ServerSlotsPlot(capacity)
        self.panel = QWidget()
        self.panel.setObjectName("ServerSlotsPanel")
        layout = QVBoxLayout(self.panel)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.slots_plot.widget, 1)
        self.notice = QLabel()
        self.notice.setObjectName("ServerTelemetryNotice")
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet(NOTICE_STYLE)
        self.notice.hide()
        layout.addWidget(self.notice)
        self.slots_tile = StatTile("Server slots", server_plots.SLOTS_BUSY_COLOR)
        if self.server_wide:
            self.tokens_plot = server_plots.build_server_throughput_plot(capacity)

    @property
    def plots(self) -> list[TimePlot]:
        """The time plots this section draws."""
        return [p for p in (self.slots_plot, self.tokens_plot) if p is not None]

    @property
    def version(self) -> int:
        """The ring's version (-1 without one), for the page's redraw check."""
        return self.ring.version if self.ring is not None and self.slots_plot is not None else -1

    def set_notice(self, text: str) -> None:
        """Say why telemetry is missing ("" hides the line)."""
        if self.slots_plot is None:
            return
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    def set_window(self, window_s: float) -> None:
        """Show the last window_s seconds on this section's plots."""
        for p in self.plots:
            p.set_window(window_s)

    def newest_t(self) -> float | None:
        """The time of the newest row (s, monotonic), None when empty."""
        if self.ring is None or not len(self.ring):
            return None
        t, _ = self.ring.view()
        return float(t[-1])

    def redraw(self, now: float, window_s: float, state: object = None) -> None:
        """Update the plots on screen with the rows of the last window_s seconds before `now`;
        each remembers `state` (what the page's redraw check compares) as drawn."""
        if self.ring is None or self.slots_plot is None:
            return
        shown = [p for p in self.plots if on_screen(p.widget)]
        if not shown:
            return
        t, rows = self.ring.view(since=now - window_s - self.ring.interval_s)
        data = WindowRows(t, t - now, rows)
        for p in shown:
            p.update(data)
            p.drawn = state

    def update_tiles(self, tokens_tile: StatTile) -> None:
        """The slots tile from the newest sample; with server metrics, the throughput tile too."""
        if self.slots_tile is None or self.ring is None:
            return
        sample = self.ring.latest
        if sample is None:
            self.slots_tile.set_text(NO_DATA, "waiting for the server's first report")
            return
        waiting = sample.requests_deferred
        kv = sample.kv_cache_fill
        details = [f"{waiting} waiting" if waiting is not None else "queue N/A",
                   f"KV {kv * 100:.0f} %" if kv is not None else "KV N/A"]
        if sample.slots_busy is not None and sample.slots_total is not None:
            self.slots_tile.set_text(f"{sample.slots_busy} / {sample.slots_total} busy", " · ".join(details))
        else:
            self.slots_tile.set_text(fmt_number(sample.requests_processing, "running"), " · ".join(details))
        if self.tokens_plot is not None:
            rate = sample.generation_tokens_per_s
            value = np.nan if rate is None else rate
            tokens_tile.set_text(fmt_number(value, "tok/s", 1 if finite(value) and value < 10 else 0),
                                 "server-wide, from /metrics (all clients)")


__all__ = ["ServerSection"]
