"""The header strip: server state, the server's name and version, loaded models and the GPU, always visible."""

from __future__ import annotations

import os

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QWidget

from app.core.models import RunningModel
from app.core.server.state import ServerState, ServerStatus
from app.core.telemetry import GpuInfo
from app.ui.widgets.elided_label import ElidedLabel
from app.ui.widgets.theme import STATE_COLOURS
from app.core.units import GIB

# The narrowest the server's name, the loaded models and the GPU get on a narrow window (a few characters each side of "…").
VERSION_MIN_WIDTH_PX = 90
MODELS_MIN_WIDTH_PX = 40
MODELS_READABLE_PX = 200  # the room the loaded models' line keeps before the title gives way
GPU_MIN_WIDTH_PX = 120  # "No NVIDIA GPU" whole


def format_running_model(m: RunningModel) -> str:
    """One loaded model as 'name · 9.8 GiB · 100% GPU · ctx 32768' (sizes the server does not report left out)."""
    parts = [m.name, *([f"{m.size_bytes / GIB:.1f} GiB"] if m.size_bytes is not None else []),
             *([m.processor] if m.processor else [])]
    if getattr(m, "context_length", None):
        parts.append(f"ctx {m.context_length}")
    return " · ".join(parts)


class Header(QFrame):
    """Shows a ServerStatus, the loaded models and the GPU in one line."""

    def __init__(self, server_name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._server_name = server_name  # the backend's display name
        self._serving = ""  # the model file a one-model server serves
        self._running: list[RunningModel] = []
        self.setObjectName("Header")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(16, 10, 16, 10)
        lay.setSpacing(14)
        # On a narrow window (1280x720 at --scale 1.5) the title goes first (the window's title bar says it too),
        # then the server's name and the GPU are cut in the middle (whole in their tooltips); the state stays whole.
        self.title = QLabel("ollama-deck")
        self.title.setObjectName("HeaderTitle")
        self.state_pill = QLabel()
        self.state_pill.setObjectName("StatePill")
        self.state_pill.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.version_label = ElidedLabel(f"{server_name} —", min_width_px=VERSION_MIN_WIDTH_PX,
                                         whole_first=True)
        self.version_label.setObjectName("HeaderField")
        self.models_label = ElidedLabel("no model loaded", min_width_px=MODELS_MIN_WIDTH_PX, whole_first=True)
        self.models_label.setObjectName("HeaderField")
        self.gpu_label = ElidedLabel(min_width_px=GPU_MIN_WIDTH_PX, whole_first=True)
        self.gpu_label.setObjectName("HeaderDim")
        for w in (self.title, self.state_pill, self.version_label):
            lay.addWidget(w)
        lay.addWidget(_separator())
        lay.addWidget(self.models_label, 1)
        lay.addWidget(self.gpu_label)
        self.set_status(ServerStatus(ServerState.STOPPED))
        self.set_gpu(None, "")

    def title_fits(self, width: int) -> bool:
        """Whether `width` holds the title beside everything else at its full width."""
        layout = self.layout()
        if layout is None:
            return True
        # the loaded models' line, however long, is cut before the title goes, but not to fewer than a few words
        models = min(self.models_label.sizeHint().width(), MODELS_READABLE_PX)
        hint = layout.sizeHint().width() - self.models_label.sizeHint().width() + models
        if self.title.isHidden():
            hint += self.title.sizeHint().width() + layout.spacing()
        return width >= hint

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """Without the title, which gives way first: it never holds the window wider."""
        hint = super().minimumSizeHint()
        layout = self.layout()
        if layout is not None and not self.title.isHidden():
            hint.setWidth(hint.width() - self.title.minimumSizeHint().width() - layout.spacing())
        return hint

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self.title.setVisible(self.title_fits(event.size().width()))

    def event(self, event: QEvent) -> bool:
        """A longer server name or another part added to the header may leave no room for the title."""
        if event.type() == QEvent.Type.LayoutRequest:
            self.title.setVisible(self.title_fits(self.width()))
        return super().event(event)

    def set_server_name(self, server_name: str) -> None:
        """Name another server (the window switched to it); its version comes with its next status."""
        self._server_name = server_name
        self.version_label.setText(f"{server_name} —")

    def set_status(self, status: ServerStatus) -> None:
        """Show the server state (colour-coded) and its message as a tooltip, and the model a one-model
        server serves."""
        colour = STATE_COLOURS.get(status.state, "#9a9da8")
        self.state_pill.setText(status.state.value)
        self.state_pill.setStyleSheet(f"background: {colour};")
        self.state_pill.setToolTip(status.message or status.state.value)
        if status.version:
            self.version_label.setText(f"{self._server_name} {status.version}")
        elif not status.state.is_running:
            self.version_label.setText(f"{self._server_name} —")
        serving = status.serving if status.state.is_running else ""
        if not status.state.is_running:
            self._running = []  # a stopped server holds no model
        if serving != self._serving:
            self._serving = serving
            self.set_running_models(self._running)

    def set_running_models(self, models: list[RunningModel]) -> None:
        """Show what the server reports as loaded."""
        self._running = list(models)
        if self._serving and all(m.size_bytes is None for m in models):
            # A one-model server (llama-server) names its file, not how much of it sits in VRAM.
            ctx = next((m.context_length for m in models if m.context_length), None)
            self.models_label.setText(f"serving {os.path.basename(self._serving)}" + (f" · ctx {ctx}" if ctx else ""))
            self.models_label.setToolTip(self._serving)
            return
        if not models:
            self.models_label.setText("no model loaded")
            self.models_label.setToolTip("")
            return
        text = "   ".join(format_running_model(m) for m in models)
        self.models_label.setText(text)
        self.models_label.setToolTip("\n".join(format_running_model(m) for m in models))

    def set_gpu(self, info: GpuInfo | None, unavailable_reason: str) -> None:
        """Show the GPU name and memory, or why there is none."""
        if info is None:
            self.gpu_label.setText("No NVIDIA GPU")
            self.gpu_label.setToolTip(unavailable_reason)
        else:
            self.gpu_label.setText(f"{info.name} · {info.memory_total_mib / 1024:.0f} GiB")
            self.gpu_label.setToolTip(f"{info.name}\nDriver {info.driver}\n{info.memory_total_mib:.0f} MiB")


def _separator() -> QFrame:
    line = QFrame()
    line.setFrameShape(QFrame.Shape.VLine)
    line.setStyleSheet("color: #34363f;")
    return line
