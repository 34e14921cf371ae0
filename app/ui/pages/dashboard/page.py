"""The Dashboard page: stat tiles and live plots of GPU, host and throughput telemetry.

Data rate is not paint rate: the sampler thread fills TelemetryBuffers at 1-4 Hz, and a QTimer
here repaints at most 10 times a second, only when the buffers changed and the page is visible.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.telemetry_buffers import Channel
from app.core.watch.events import WatchEvent
from app.ui.pages.context import PageContext
from app.ui.widgets import plots
from app.ui.pages.dashboard.plots import TimePlot, WindowRows, build_gpu_plots, build_host_plots, estimate_line, on_screen
from app.ui.pages.dashboard.event_marks import EventMarks
from app.ui.pages.dashboard.events_panel import EventsPanel
from app.ui.pages.dashboard.server_section import ServerSection
from app.ui.widgets.elided_label import ElidedLabel
from app.ui.widgets.tile_grid import TileGrid
from app.ui.widgets.watch_bridge import WatchBridge
from app.core.units import MIB_PER_GIB
from app.ui.pages.dashboard.tiles import (
    NO_DATA,
    NOT_AVAILABLE,
    TILE_STYLE,
    StatTile,
    finite,
    fmt_number,
    fmt_used_of_total_gib,
    gib,
    short_gpu_name,
)

WINDOW_CHOICES_S = (60, 300, 900)
DEFAULT_WINDOW_S = 300
REDRAW_INTERVAL_MS = 100  # 10 Hz at most


class DashboardPage(QWidget):
    """Live telemetry from the context's samples. Without a GPU the GPU tiles and plots give way to a
    panel that says why (the GPU backend's reason); everything else works the same. Where the backend
    reports slots or server metrics, the context's server ring feeds a slots & queue plot beside VRAM,
    and with server metrics the throughput plot and tile become server-wide."""

    def __init__(self, context: PageContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        buffers = context.samples
        gpu_info = context.gpu.info()
        server_ring = context.server_ring
        self.setObjectName("DashboardPage")
        self.setStyleSheet(TILE_STYLE)
        self._buffers = buffers
        self._gpu_info = gpu_info
        self._window_s = DEFAULT_WINDOW_S
        self._drawn: tuple[int, ...] | None = None  # what was last drawn (see _state)
        self.server = ServerSection(context.backend, server_ring, server_ring.capacity if server_ring is not None else 2)
        self._estimate_mib: float | None = None
        self._x = np.empty(buffers.capacity)
        self.redraw_count = 0

        root = QVBoxLayout(self)
        root.setContentsMargins(16, 12, 16, 12)
        root.setSpacing(12)
        root.addLayout(self._build_header())

        self.tiles: dict[str, StatTile] = {}
        if gpu_info is not None:
            self.tiles["gpu"] = StatTile("GPU", plots.LIMIT_GREY)
            self.tiles["vram"] = StatTile("VRAM used", plots.VRAM_USED_COLOR)
            self.tiles["util"] = StatTile("GPU utilisation", plots.GPU_UTIL_COLOR)
            self.tiles["power"] = StatTile("Power", plots.POWER_COLOR)
            self.tiles["temp"] = StatTile("Temperature", plots.TEMPERATURE_COLOR)
        self.tiles["ram"] = StatTile("Host RAM", plots.RAM_COLOR)
        self.tiles["server"] = StatTile("Server CPU · RSS", plots.CPU_COLOR)
        server_wide = self.server.tokens_plot is not None
        self.tiles["tokens"] = StatTile("Throughput · server-wide" if server_wide else "Throughput", plots.TOKENS_COLOR)
        if self.server.slots_tile is not None:
            self.tiles["slots"] = self.server.slots_tile
        if self.server.reason:
            self.tiles["tokens"].setToolTip(self.server.reason)

        self.gpu_off_panel: QFrame | None = None
        if gpu_info is None:
            self.gpu_off_panel = self._build_gpu_off_panel(context.gpu.unavailable_reason)
            root.addWidget(self.gpu_off_panel)
        # One row of tiles where they fit at a readable width, else as many rows as it takes.
        self.tile_grid = TileGrid(list(self.tiles.values()), spacing=12)
        root.addWidget(self.tile_grid)

        self.gpu_lost_banner = QLabel()
        self.gpu_lost_banner.setObjectName("GpuLostBanner")
        self.gpu_lost_banner.setWordWrap(True)
        self.gpu_lost_banner.hide()
        root.addWidget(self.gpu_lost_banner)

        capacity = buffers.capacity
        gpu_plots = build_gpu_plots(capacity, gpu_info.memory_total_mib) if gpu_info else []
        self.time_plots: dict[str, TimePlot] = {p.key: p for p in gpu_plots + build_host_plots(capacity)}
        if self.server.tokens_plot is not None:
            del self.time_plots["tokens"]  # the server's counters replace this app's own count
        self.plots = {key: p.widget for key, p in self.time_plots.items()}
        if self.server.panel is not None:
            self.plots["server_slots"] = self.server.panel
        if self.server.tokens_plot is not None:
            self.plots["tokens"] = self.server.tokens_plot.widget
        self._estimate_line = None
        if "vram" in self.time_plots:
            self._estimate_line = estimate_line()
            self.time_plots["vram"].item.addItem(self._estimate_line, ignoreBounds=True)
        # The plots and the watchdog's events share the page's lower part as two tabs.
        plot_area = QWidget()
        plot_area.setObjectName("DashPlots")
        plot_grid = self._build_plot_grid()
        plot_grid.setContentsMargins(0, 8, 0, 0)
        plot_area.setLayout(plot_grid)
        self.events = EventsPanel()
        self.tabs = QTabWidget()
        self.tabs.setObjectName("DashTabs")
        self.tabs.addTab(plot_area, "Plots")
        self.tabs.addTab(self.events, "Events")
        root.addWidget(self.tabs, stretch=1)
        for p in self.time_plots.values():
            p.set_window(self._window_s)
        self.server.set_window(self._window_s)
        self._show_empty_tiles()

        # The watchdog's events: listed, and marked on every time plot at the time they were seen.
        self.marks = [EventMarks(p, on_click=self.show_event) for p in [*self.time_plots.values(), *self.server.plots]]
        self._events_version = 0
        self.events.count_changed.connect(self._on_event_count)
        self.events.filter_combo.currentIndexChanged.connect(lambda _i: self._events_changed())
        self._on_event_count(0)
        self.bridge: WatchBridge | None = None
        if context.watchdog is not None:
            self.events.add(context.watchdog.events())
            self.bridge = WatchBridge(context.watchdog, self)
            self.bridge.event_seen.connect(self.add_event)

        self.redraw_timer = QTimer(self)
        self.redraw_timer.setInterval(REDRAW_INTERVAL_MS)
        self.redraw_timer.timeout.connect(self._redraw_if_changed)
        self.redraw_timer.start()

    # --- public API -----------------------------------------------------------------------
    def add_event(self, event: WatchEvent) -> None:
        """A new event from the watchdog (GUI thread): listed, and marked on the plots."""
        self.events.add([event])

    def show_event(self, event: WatchEvent) -> None:
        """Bring the Events tab forward with `event` selected (its evidence shown)."""
        self.tabs.setCurrentWidget(self.events)
        self.events.select(event)

    def shutdown(self) -> None:
        """Stop taking the watchdog's events (the page is going away)."""
        if self.bridge is not None:
            self.bridge.close()

    @property
    def window_s(self) -> int:
        """Seconds of history on the x axes."""
        return self._window_s

    def set_window_s(self, seconds: int) -> None:
        """Show the last `seconds` (60, 300 or 900) and redraw."""
        if seconds not in WINDOW_CHOICES_S:
            raise ValueError(f"window must be one of {WINDOW_CHOICES_S} s, got {seconds}")
        self._window_s = seconds
        button = self._window_group.button(seconds)
        if not button.isChecked():
            button.setChecked(True)
        for p in self.time_plots.values():
            p.set_window(seconds)
        self.server.set_window(seconds)
        self.redraw_now()

    @property
    def estimate_mib(self) -> float | None:
        """The predicted VRAM (MiB) the dashed line shows; None when there is no estimate."""
        return self._estimate_mib

    def set_estimate_mib(self, mib: float | None) -> None:
        """Draw the predicted VRAM (MiB) as a dashed line on the VRAM plot; None removes it.

        The settings estimator calls this while the user edits, so prediction and reality
        meet on one chart.
        """
        self._estimate_mib = mib
        if self._estimate_line is None:
            return
        if mib is None or not finite(mib):
            self._estimate_line.hide()
        else:
            # Show before moving: pyqtgraph skips re-labelling a hidden line.
            self._estimate_line.show()
            self._estimate_line.setValue(mib / MIB_PER_GIB)
            self._estimate_line.label.valueChanged()

    def set_gpu_unavailable_reason(self, reason: str) -> None:
        """Say why GPU readings stopped (a GPU lost mid-run); empty hides the notice."""
        if self.gpu_off_panel is not None:
            self._gpu_off_reason.setText(reason or "GPU readings are unavailable.")
            return
        self.gpu_lost_banner.setText(reason)
        self.gpu_lost_banner.setVisible(bool(reason))

    def clear(self) -> None:
        """Start empty (a demo's reset): the sampler's and the server's history, the events list and their marks;
        the watchdog keeps its own history, and the next samples arrive on their own."""
        self._buffers.clear()
        if self.server.ring is not None:
            self.server.ring.clear()
        self.events.clear()
        for marks in self.marks:
            marks.clear()
        self._drawn = None
        self.redraw_now()

    def redraw_now(self) -> None:
        """Repaint tiles and visible plots from the buffers at once (also for tests and screenshots)."""
        state = self._state()
        self._drawn = state
        self.redraw_count += 1
        last = self._buffers.last()
        server_now = self.server.newest_t()
        if last is None:
            self._show_empty_tiles()
            if server_now is not None:  # the server reports before the first host sample
                self.server.redraw(server_now, self._window_s, state)
                self._draw_marks(server_now)
                self.server.update_tiles(self.tiles["tokens"])
            return
        now, row = last
        # One x axis for both sources (the same monotonic clock): the newer of the two is "now".
        now = max(now, server_now) if server_now is not None else now
        shown = [p for p in self.time_plots.values() if on_screen(p.widget)]  # none is drawn for nobody
        if shown:
            t, rows = self._buffers.view(since=now - self._window_s - self._buffers.interval_s)
            x = self._x[: len(t)]
            np.subtract(t, now, out=x)
            data = WindowRows(t, x, rows)
            for p in shown:
                p.update(data)
                p.drawn = state
        self.server.redraw(now, self._window_s, state)
        self._draw_marks(now)
        self._update_tiles(row)
        self.server.update_tiles(self.tiles["tokens"])

    # --- Qt events ------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._redraw_if_changed()

    # --- internals ------------------------------------------------------------------------
    def _state(self) -> tuple[int, int, int, int]:
        """What a frame draws from: (buffers version, window, server version, events version)."""
        return (self._buffers.version, self._window_s, self.server.version, self._events_version)

    def _on_event_count(self, count: int) -> None:
        self.tabs.setTabText(self.tabs.indexOf(self.events), f"Events ({count})")
        self._events_changed()

    def _events_changed(self) -> None:
        self._events_version += 1
        self._redraw_if_changed()

    def _draw_marks(self, now: float) -> None:
        """The events the list shows (its filter too), marked on the time plots on screen."""
        floor = self.events.min_severity
        since = now - self._window_s
        events = [e for e in self.events.events if e.severity >= floor and e.mono is not None and e.mono >= since]
        for marks in self.marks:
            if (events or marks.marks) and on_screen(marks.plot.widget):
                marks.show(events, now, self._window_s)

    def _redraw_if_changed(self) -> None:
        if not self.isVisible():
            return
        state = self._state()
        # A plot skipped while scrolled out of view catches up as soon as part of it shows again.
        stale = any(p.drawn != state and on_screen(p.widget) for p in self.time_plots.values())
        stale = stale or any(p.drawn != state and on_screen(p.widget) for p in self.server.plots)
        if self._drawn == state and not stale:
            return
        self.redraw_now()

    def _build_header(self) -> QHBoxLayout:
        header = QHBoxLayout()
        title = QLabel("Live telemetry")
        title.setObjectName("DashTitle")
        # cut to its room (whole in its tooltip) before the window buttons beside it give way
        cadence = ElidedLabel(f"sampled every {self._buffers.interval_s:g} s · tokens/s averaged over 2 s")
        cadence.setObjectName("DashDim")
        header.addWidget(title)
        header.addSpacing(12)
        header.addWidget(cadence, 1, alignment=Qt.AlignmentFlag.AlignBottom)
        shown = QLabel("Show last")
        shown.setObjectName("DashDim")
        header.addWidget(shown)
        header.addSpacing(6)
        self._window_group = QButtonGroup(self)
        self._window_group.setExclusive(True)
        self.window_buttons: dict[int, QPushButton] = {}
        segments = QHBoxLayout()
        segments.setSpacing(0)
        for i, seconds in enumerate(WINDOW_CHOICES_S):
            button = QPushButton(f"{seconds // 60} min")
            button.setObjectName("WindowButton")
            button.setProperty("segment", "first" if i == 0 else "last" if i == len(WINDOW_CHOICES_S) - 1 else "mid")
            button.setCheckable(True)
            button.setChecked(seconds == self._window_s)
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.setToolTip(f"Plot the last {seconds} seconds")
            self._window_group.addButton(button, seconds)
            self.window_buttons[seconds] = button
            segments.addWidget(button)
        self._window_group.idClicked.connect(self.set_window_s)
        header.addLayout(segments)
        return header

    def _build_gpu_off_panel(self, reason: str) -> QFrame:
        panel = QFrame()
        panel.setObjectName("GpuOffPanel")
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(20, 12, 16, 12)
        layout.setSpacing(4)
        title = QLabel("GPU readings are off")
        title.setObjectName("GpuOffTitle")
        self._gpu_off_reason = QLabel(reason or "GPU readings are unavailable.")
        self._gpu_off_reason.setObjectName("GpuOffReason")
        self._gpu_off_reason.setWordWrap(True)
        self._gpu_off_reason.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        hint = QLabel("Host memory, server CPU and throughput below keep updating.")
        hint.setObjectName("GpuOffHint")
        hint.setWordWrap(True)
        for w in (title, self._gpu_off_reason, hint):
            layout.addWidget(w)
        return panel

    def _build_plot_grid(self) -> QGridLayout:
        grid = QGridLayout()
        grid.setSpacing(12)
        w = self.plots
        columns = 2
        if "server_slots" in w and self._gpu_info is not None:
            # Three plots a row, the slots beside VRAM; server CPU gets a low full-width row of its own.
            columns = 3
            placement = [("vram", 0, 0, 1), ("server_slots", 0, 1, 1), ("tokens", 0, 2, 1), ("gpu_util", 1, 0, 1),
                         ("power_temp", 1, 1, 1), ("host_mem", 1, 2, 1), ("server_cpu", 2, 0, 3)]
        elif "server_slots" in w:
            placement = [("tokens", 0, 0, 1), ("server_slots", 0, 1, 1), ("host_mem", 1, 0, 1),
                         ("server_cpu", 1, 1, 1)]
        elif self._gpu_info is not None:
            placement = [("vram", 0, 0, 1), ("tokens", 0, 1, 1), ("gpu_util", 1, 0, 1), ("power_temp", 1, 1, 1),
                         ("host_mem", 2, 0, 1), ("server_cpu", 2, 1, 1)]
        else:
            placement = [("tokens", 0, 0, 2), ("host_mem", 1, 0, 1), ("server_cpu", 1, 1, 1)]
        for key, row, col, span in placement:
            grid.addWidget(w[key], row, col, 1, span)
        for col in range(columns):
            grid.setColumnStretch(col, 1)
        rows = max(r for _, r, _, _ in placement) + 1
        for r in range(rows):
            grid.setRowStretch(r, 1)
        return grid

    def _show_empty_tiles(self) -> None:
        if "gpu" in self.tiles:
            self._show_gpu_identity()
        for key, tile in self.tiles.items():
            if key != "gpu":
                tile.set_text(NO_DATA, "waiting for the first sample")

    def _show_gpu_identity(self) -> None:
        info = self._gpu_info
        assert info is not None
        self.tiles["gpu"].set_text(short_gpu_name(info.name), f"driver {info.driver}")

    def _update_tiles(self, row: np.ndarray) -> None:
        c = Channel
        if self._gpu_info is not None:
            self._show_gpu_identity()
            used, total, server = row[c.GPU_MEM_USED_MIB], row[c.GPU_MEM_TOTAL_MIB], row[c.GPU_MEM_SERVER_MIB]
            if finite(server):
                share = f"server {gib(server):.1f} GiB"
            elif finite(used):
                share = "server share N/A"
            else:
                share = "no reading from the GPU"
            self.tiles["vram"].set_text(fmt_used_of_total_gib(used, total), share)
            reserved = row[c.GPU_MEM_RESERVED_MIB]  # outside "used" where the driver reports it apart
            reserved = reserved if finite(reserved) else 0.0
            free = f"{gib(total - used - reserved):.1f} GiB free" if finite(used) and finite(total) else ""
            util = row[c.GPU_UTIL_PCT]
            self.tiles["util"].set_text(fmt_number(util, "%"), free)
            self.tiles["power"].set_text(fmt_number(row[c.GPU_POWER_W], "W"), "board power draw")
            self.tiles["temp"].set_text(fmt_number(row[c.GPU_TEMP_C], "°C"), "GPU core")
        ram_used, ram_total = row[c.RAM_USED_MIB], row[c.RAM_TOTAL_MIB]
        ram_detail = f"{gib(ram_total - ram_used):.1f} GiB available" if finite(ram_used) and finite(ram_total) else ""
        self.tiles["ram"].set_text(fmt_used_of_total_gib(ram_used, ram_total), ram_detail)
        cpu, rss = row[c.SERVER_CPU_PCT], row[c.SERVER_RSS_MIB]
        if finite(rss):
            self.tiles["server"].set_text(fmt_number(cpu, "%"), f"RSS {gib(rss):.2f} GiB")
        else:
            self.tiles["server"].set_text(NOT_AVAILABLE, "no server process")
        in_flight = row[c.IN_FLIGHT]
        n = int(in_flight) if finite(in_flight) else 0
        self.tiles["tokens"].set_text(fmt_number(row[c.TOKENS_PER_S], "tok/s", 1 if row[c.TOKENS_PER_S] < 10 else 0),
                                      f"{n} request{'s' if n != 1 else ''} from this app in flight")
