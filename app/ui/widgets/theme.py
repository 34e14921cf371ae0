"""The dark theme: a Fusion palette plus the stylesheet in app/resources/style.qss."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QApplication

from app.core.server.state import ServerState

# Colours shared by widgets that paint themselves (state pills, banners, plots).
ACCENT = "#4cc2ff"
OK = "#3ddc84"
WARNING = "#f0b429"
ERROR = "#ff6b6b"
DIM = "#8b8e99"
BACKGROUND = "#15161b"
PANEL = "#1b1c22"
TEXT = "#e6e7eb"

# The colour of each server state, in the header's state pill and the Server page.
STATE_COLOURS: dict[ServerState, str] = {
    ServerState.RUNNING_MANAGED: OK,
    ServerState.RUNNING_ATTACHED: ACCENT,
    ServerState.STARTING: WARNING,
    ServerState.STOPPING: WARNING,
    ServerState.CRASHED: ERROR,
    ServerState.PORT_CONFLICT: ERROR,
    ServerState.STOPPED: "#9a9da8",
    ServerState.NOT_INSTALLED: "#9a9da8",
}


def stylesheet() -> str:
    """The application stylesheet text, with @RES@ pointing at the installed resources folder."""
    folder = resources.files("app.resources")
    text = folder.joinpath("style.qss").read_text(encoding="utf-8")
    return text.replace("@RES@", Path(str(folder)).as_posix())


def app_icon_path() -> Path:
    """The application icon (SVG) in the installed resources folder."""
    return Path(str(resources.files("app.resources").joinpath("ollama-deck.svg")))


def apply_theme(app: QApplication, base_point_size: float = 11.0) -> None:
    """Fusion style, a dark palette (for what the stylesheet does not reach) and the stylesheet."""
    app.setStyle("Fusion")
    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: BACKGROUND,
        QPalette.ColorRole.WindowText: TEXT,
        QPalette.ColorRole.Base: "#101115",
        QPalette.ColorRole.AlternateBase: "#17181d",
        QPalette.ColorRole.ToolTipBase: "#2a2c33",
        QPalette.ColorRole.ToolTipText: TEXT,
        QPalette.ColorRole.Text: TEXT,
        QPalette.ColorRole.Button: "#262831",
        QPalette.ColorRole.ButtonText: TEXT,
        QPalette.ColorRole.BrightText: "#ffffff",
        QPalette.ColorRole.Highlight: "#2f6f9a",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: ACCENT,
        QPalette.ColorRole.PlaceholderText: DIM,
    }
    for role, colour in roles.items():
        pal.setColor(role, QColor(colour))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text, QColor("#6c6f79"))
    pal.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.ButtonText, QColor("#6c6f79"))
    app.setPalette(pal)
    font = QFont(app.font())
    font.setPointSizeF(base_point_size)
    app.setFont(font)
    app.setStyleSheet(stylesheet())
