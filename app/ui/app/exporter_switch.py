"""The header's "Export to Prometheus" switch: serves what the window already samples (the sampler's GPU and host
readings, the server-telemetry poller's samples) as the app's Prometheus exporter on 127.0.0.1:PORT.

Binding and unbinding run on the app's loop thread (in a worker thread there), never on the GUI thread; the
outcome comes back as a queued signal and the switch shows the URL to scrape, or why it could not listen (and
turns itself off). The window listens on loopback only; `ollama-deck exporter --allow-network` is the way to
serve others."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QSpinBox, QWidget

from app import __version__
from app.adapters.aio import LoopThread
from app.adapters.prometheus.exporter import (DEFAULT_PORT, BindError, ExporterFeed, ExporterServer, ListenAddress,
                                              ServerTarget, make_registry)
from app.core.errors import DeckError
from app.core.telemetry import GpuInfo, Sample
from app.ui.app.telemetry_poller import ServerTelemetryPoller
from app.ui.server.controller import ServerController
from app.ui.widgets.elided_label import ElidedLabel

LOOPBACK = "127.0.0.1"
SWITCH_TEXT = "Prometheus"  # short: the header is one line at 1280 px and --scale 1.5; the tooltip says the rest
OFF_TEXT = "off"
TOOLTIP = ("Export to Prometheus: serve the GPU, host and server figures this window samples as a Prometheus exporter on "
           f"{LOOPBACK}:PORT (this machine only), for a Prometheus to scrape. To serve other machines, run "
           "`ollama-deck exporter --listen HOST:PORT --allow-network`.")


class ExporterSwitch(QWidget):
    """A check box, its port and a status line; `state_changed` carries the URL being served ('' when off)."""

    state_changed = Signal(str)
    _started = Signal(object, object)  # (the server, None or the DeckError), from the loop's worker thread
    _stopped = Signal()

    def __init__(self, loop: LoopThread, feed: ExporterFeed, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._loop = loop
        self.feed = feed
        self._registry = make_registry(feed, __version__)
        self.server: ExporterServer | None = None
        self._pending: ExporterServer | None = None
        self._busy: concurrent.futures.Future[None] | None = None
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        self.button = QCheckBox(SWITCH_TEXT)
        self.button.setObjectName("exporter_switch")
        self.button.setToolTip(TOOLTIP)
        self.port = QSpinBox()
        self.port.setObjectName("exporter_port")
        self.port.setRange(1024, 65535)
        self.port.setValue(DEFAULT_PORT)
        self.port.setMaximumWidth(self.port.fontMetrics().horizontalAdvance("65535") * 2 + 24)
        self.port.setToolTip(f"The port on {LOOPBACK} Prometheus scrapes")
        self.status = ElidedLabel(OFF_TEXT, min_width_px=self.fontMetrics().horizontalAdvance("off") + 8)
        self.status.setObjectName("HeaderDim")
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        for widget in (self.button, self.port, self.status):
            lay.addWidget(widget)
        self.button.toggled.connect(self._on_toggled)
        self._started.connect(self._on_started)
        self._stopped.connect(self._on_stopped)

    @property
    def url(self) -> str:
        """The URL being served ('' when off)."""
        return self.server.url if self.server is not None and self.server.running else ""

    @property
    def busy(self) -> bool:
        """True while a start or stop runs on the loop."""
        return self._busy is not None and not self._busy.done()

    def set_on(self, on: bool, port: int | None = None) -> None:
        """Turn the exporter on (on `port`, else the one shown) or off, as a click would."""
        if port is not None:
            self.port.setValue(port)
        self.button.setChecked(on)

    def close_now(self, timeout_s: float = 5.0) -> None:
        """Stop serving at once (on quit: the loop is about to stop), a start still under way included."""
        if self._busy is not None:
            with contextlib.suppress(concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                self._busy.result(timeout_s)
        for server in {id(s): s for s in (self.server, self._pending) if s is not None}.values():
            server.stop()
        self.server = self._pending = None

    # ---- GUI thread ---------------------------------------------------------------------------------------------
    def _on_toggled(self, on: bool) -> None:
        self.port.setEnabled(False)
        self.button.setEnabled(False)  # until this start or stop is done: one at a time
        if on:
            server = ExporterServer(self._registry, ListenAddress(LOOPBACK, self.port.value()))
            self._pending = server  # until its start is known (close_now stops it either way)
            self.status.setText(f"starting on {server.address.text}…")
            self._busy = self._loop.submit(self._start(server))
        else:
            running, self.server = self.server, None
            self.status.setText("stopping…")
            self._busy = self._loop.submit(self._stop(running))

    def _on_started(self, server: ExporterServer, error: DeckError | None) -> None:
        self._pending = None
        self.button.setEnabled(True)
        if error is None:
            self.server = server
            self.status.setText(server.url)
            self.status.setToolTip(f"Prometheus scrapes {server.url}")
            self.state_changed.emit(server.url)
            return
        self.status.setText(f"not exporting: {error.message}")  # what to do is in the tooltip: the header is one line
        self.status.setToolTip(error.user_text())
        self.port.setEnabled(True)
        self.button.blockSignals(True)
        self.button.setChecked(False)
        self.button.blockSignals(False)
        self.state_changed.emit("")

    def _on_stopped(self) -> None:
        self.button.setEnabled(True)
        self.port.setEnabled(True)
        self.status.setText(OFF_TEXT)
        self.status.setToolTip("")
        self.state_changed.emit("")

    # ---- loop thread ----------------------------------------------------------------------------------------------
    async def _start(self, server: ExporterServer) -> None:
        try:
            await asyncio.to_thread(server.start)
        except BindError as exc:
            self._started.emit(server, exc)
        else:
            self._started.emit(server, None)

    async def _stop(self, server: ExporterServer | None) -> None:
        if server is not None:
            await asyncio.to_thread(server.stop)
        self._stopped.emit()


def install(header: QWidget, loop: LoopThread, backend: str, gpu_info: GpuInfo | None,
            latest_sample: Callable[[], Sample | None], controller: ServerController,
            poller: ServerTelemetryPoller) -> ExporterSwitch:
    """The switch at the end of the window's header, over a feed of what the window samples: the sampler's newest
    reading (`latest_sample`), the poller's server samples, and the server the applied settings name."""
    feed = ExporterFeed(gpu_info, latest_sample, target=ServerTarget(backend, controller.settings.base_url))
    switch = ExporterSwitch(loop, feed, parent=header)
    poller.tap(feed.server_read)  # on the loop thread, as each sample is read
    poller.stopped.connect(lambda _state: feed.server_down())
    controller.settings_applied.connect(
        lambda settings: feed.set_target(ServerTarget(backend, settings.base_url)))
    layout = header.layout()
    if layout is not None:
        layout.addWidget(switch)
    return switch


__all__ = ["ExporterSwitch", "OFF_TEXT", "SWITCH_TEXT", "install"]
