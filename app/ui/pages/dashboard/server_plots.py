"""The dashboard's plots of what the server reports itself (ServerTelemetryRing rows): slots busy of
total, requests waiting, KV-cache fill on its own axis, and the server-wide token rates."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout

from app.core.server_telemetry import ServerColumn
from app.ui.pages.dashboard.plots import TimePlot, WindowRows
from app.ui.widgets import plots
from app.ui.widgets.plots import LiveCurve, pen

SLOTS_BUSY_COLOR = plots.GREEN
SLOTS_TOTAL_COLOR = plots.LIMIT_GREY
DEFERRED_COLOR = plots.ORANGE
KV_FILL_COLOR = plots.VIOLET
GENERATION_COLOR = plots.TOKENS_COLOR
PROMPT_COLOR = plots.CYAN
SERVER_WIDE_TITLE = "Server-wide throughput (from /metrics)"


class ServerSlotsPlot(TimePlot):
    """Slots busy and requests waiting on the left axis (count), KV-cache fill on the right (%, 0-100)."""

    def __init__(self, capacity: int) -> None:
        super().__init__("server_slots", "Server slots & queue", "slots · requests", capacity)
        self.y_floor_max = 2.0
        self.add("busy", ServerColumn.SLOTS_BUSY, SLOTS_BUSY_COLOR)
        self.add_limit("total", ServerColumn.SLOTS_TOTAL, SLOTS_TOTAL_COLOR)
        self.add("waiting", ServerColumn.REQUESTS_DEFERRED, DEFERRED_COLOR)
        self.kv_view = pg.ViewBox(enableMouse=False)
        self.kv_view.setMouseEnabled(x=False, y=False)
        self.item.showAxis("right")
        right = self.item.getAxis("right")
        plots.style_axis(right, "KV cache (%)")
        self.item.scene().addItem(self.kv_view)
        right.linkToView(self.kv_view)
        self.kv_view.setXLink(self.item)
        self.kv_view.setYRange(-5.0, 105.0, padding=0.0)
        kv_curve = LiveCurve(pen(KV_FILL_COLOR, dashed=True))
        self.kv_view.addItem(kv_curve, ignoreBounds=True)
        self.add("KV fill % (right)", ServerColumn.KV_FILL_PCT, KV_FILL_COLOR, dashed=True, curve=kv_curve)
        self._kv_series = self.series[-1]
        self.item.getViewBox().sigResized.connect(self._sync_geometry)

    def _sync_geometry(self) -> None:
        self.kv_view.setGeometry(self.item.getViewBox().sceneBoundingRect())

    def update(self, data: WindowRows) -> None:
        """Like TimePlot.update, but the KV fill has its own fixed axis and leaves the counts' range alone."""
        top = self._update_series(data, [s for s in self.series if s is not self._kv_series])
        self._fit_y(max(top, self._update_limits(data.rows)))

    def _fit_y(self, data_max: float) -> None:
        # Whole counts: the axis ends one above the highest, so a full house is not drawn on the frame.
        hi = float(np.ceil(data_max)) + 1.0
        if self._y_range != (-0.1 * hi, hi):
            self._y_range = (-0.1 * hi, hi)
            self.item.setYRange(-0.1 * hi, hi, padding=0.0)


def build_server_throughput_plot(capacity: int) -> TimePlot:
    """Generation and prompt tokens/s of every client of the server, from its counters."""
    tokens = TimePlot("tokens", SERVER_WIDE_TITLE, "tokens/s", capacity)
    tokens.add("generation (all clients)", ServerColumn.GENERATION_TOKENS_PER_S, GENERATION_COLOR)
    tokens.add("prompt", ServerColumn.PROMPT_TOKENS_PER_S, PROMPT_COLOR, dashed=True)
    tokens.y_floor_max = 20.0
    return tokens


def build_reason_panel(title: str, reason: str) -> tuple[QFrame, QLabel]:
    """An empty state in the plot's place: what is missing and why, in the backend's words."""
    panel = QFrame()
    panel.setObjectName("ServerTelemetryOff")
    panel.setStyleSheet("#ServerTelemetryOff { background: #1e1f24; border: 1px solid #30323b; border-radius: 10px; }"
                        "#ServerTelemetryOff QLabel { background: transparent; }")
    layout = QVBoxLayout(panel)
    layout.setContentsMargins(20, 12, 16, 12)
    heading = QLabel(title)
    heading.setStyleSheet("color: #f2f3f5; font-size: 13pt; font-weight: 700;")
    text = QLabel(reason)
    text.setObjectName("ServerTelemetryReason")
    text.setWordWrap(True)
    text.setStyleSheet("color: #c3c6cf; font-size: 11pt;")
    text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    layout.addWidget(heading)
    layout.addWidget(text)
    layout.addStretch(1)
    return panel, text


__all__ = ["SERVER_WIDE_TITLE", "ServerSlotsPlot", "build_reason_panel", "build_server_throughput_plot"]
