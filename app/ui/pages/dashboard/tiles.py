"""Stat tiles for the dashboard: a label, one big number and a detail line, plus the
formatting of readings into the words a tile shows (N/A for what the driver does not report)."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QResizeEvent
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

NOT_AVAILABLE = "N/A"
NO_DATA = "—"
TILE_MIN_WIDTH_PX = 200
VALUE_FONT_PT = 22  # the big number; shrinks to fit a narrow tile, never below VALUE_MIN_FONT_PT
VALUE_MIN_FONT_PT = 14

TILE_STYLE = """
#StatTile { background: #1e1f24; border: 1px solid #30323b; border-radius: 10px; }
#StatTile QLabel { background: transparent; }
#TileTitle { color: #a9acb8; font-size: 10pt; font-weight: 600; letter-spacing: 1px; }
#TileValue { color: #ffffff; font-weight: 700; }
#TileDetail { color: #c3c6cf; font-size: 11pt; }
#GpuOffPanel { background: #1e1f24; border: 1px solid #5b4a1c; border-left: 6px solid #f0b429;
               border-radius: 10px; }
#GpuOffPanel QLabel { background: transparent; }
#GpuOffTitle { color: #ffe08a; font-size: 15pt; font-weight: 700; }
#GpuOffReason { color: #e6e7eb; font-size: 12pt; }
#GpuOffHint { color: #a9acb8; font-size: 11pt; }
#GpuLostBanner { background: #3a2f12; border: 1px solid #f0b429; border-radius: 6px; color: #ffe8b0;
                 font-size: 12pt; padding: 8px 12px; }
#WindowButton { background: #262831; border: 1px solid #3a3d49; padding: 6px 16px; color: #d4d6dd;
                font-size: 11pt; border-radius: 0px; min-width: 64px; }
#WindowButton[segment="first"] { border-top-left-radius: 6px; border-bottom-left-radius: 6px; }
#WindowButton[segment="last"] { border-top-right-radius: 6px; border-bottom-right-radius: 6px; }
#WindowButton:checked { background: #1f6fa8; border-color: #4cc2ff; color: #ffffff; font-weight: 700; }
#WindowButton:hover:!checked { background: #2e313b; }
#DashTitle { color: #ffffff; font-size: 16pt; font-weight: 700; }
#DashDim { color: #8b8e99; font-size: 11pt; }
"""


def finite(value: float | None) -> bool:
    """True for a real reading (not None, not NaN)."""
    return value is not None and not math.isnan(value)


def gib(mib: float) -> float:
    """MiB to GiB."""
    return mib / 1024.0


def fmt_number(value: float | None, unit: str, digits: int = 0) -> str:
    """`value unit` with the given decimals, or N/A for a missing reading."""
    if not finite(value):
        return NOT_AVAILABLE
    return f"{value:,.{digits}f} {unit}".strip()


def fmt_used_of_total_gib(used_mib: float | None, total_mib: float | None) -> str:
    """'15.2 / 24.0 GiB'; N/A when the used part is missing."""
    if used_mib is None or not finite(used_mib):
        return NOT_AVAILABLE
    if total_mib is None or not finite(total_mib):
        return f"{gib(used_mib):.1f} GiB"
    return f"{gib(used_mib):.1f} / {gib(total_mib):.1f} GiB"


def short_gpu_name(name: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX 4090' (vendor words add nothing on a tile)."""
    for prefix in ("NVIDIA GeForce ", "NVIDIA ", "GeForce "):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


TILE_BACKGROUND = "#1e1f24"  # #StatTile's background in TILE_STYLE


class OpaqueLabel(QLabel):
    """A label that paints its own background, so new text repaints the label alone.

    A transparent label makes Qt repaint the style-sheet tile and page under it first, which
    cost more than the text when every tile changes at the sampling rate.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._fill = QColor(TILE_BACKGROUND)

    def event(self, event: QEvent) -> bool:
        """After every (re-)polish, mark the label opaque again: a style sheet's polish clears it."""
        handled = super().event(event)
        if event.type() in (QEvent.Type.Polish, QEvent.Type.StyleChange):
            self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent, True)
        return handled

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.fillRect(self.rect(), self._fill)
        painter.end()
        super().paintEvent(event)


class StatTile(QFrame):
    """One reading: a small upper-case title, a big value, and a detail line. A coloured bar on
    the left matches the plot line that shows the same quantity."""

    def __init__(self, title: str, accent: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("StatTile")
        self.setMinimumWidth(TILE_MIN_WIDTH_PX)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setStyleSheet(f"#StatTile {{ border-left: 5px solid {accent}; }}")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 10, 12, 10)
        layout.setSpacing(2)
        self.title = title
        self.title_label = QLabel(title.upper())
        self._title_full = title.upper()
        self.title_label.setObjectName("TileTitle")
        self.value_label = OpaqueLabel(NO_DATA)
        self.value_label.setObjectName("TileValue")
        self.value_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail_label = OpaqueLabel(" ")
        self.detail_label.setObjectName("TileDetail")
        self._detail_full = " "
        for label in (self.title_label, self.value_label, self.detail_label):
            layout.addWidget(label)
        self._value_pt = 0
        self._fitted_for: tuple[int, int] = (-1, -1)
        self._fit_value()
        # Every tile keeps the big-number line at full height, so a shrunk value never makes
        # its tile shorter than its neighbours.
        big = QFont(self.value_label.font())
        big.setPointSize(VALUE_FONT_PT)
        big.setBold(True)
        self.value_label.setFixedHeight(QFontMetrics(big).height())

    @property
    def value(self) -> str:
        """The big text as shown."""
        return self.value_label.text()

    @property
    def detail(self) -> str:
        """The full detail line (shown elided when the tile is narrow)."""
        return self._detail_full

    def set_text(self, value: str, detail: str = " ") -> None:
        """Show new text; labels are only touched when the text changed (no relayout churn)."""
        if self.value_label.text() != value:
            self.value_label.setText(value)
            self._fit_value()
        detail = detail or " "
        if self._detail_full != detail:
            self._detail_full = detail
            self._fit_detail()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_title()
        self._fit_value()
        self._fit_detail()

    def _fit_title(self) -> None:
        """Elide the title to the tile's width (a narrow tile would cut it mid-letter); the tooltip keeps
        the whole title. The label's own metrics are used: its style sheet spaces the letters out."""
        width = self.contentsRect().width() - 30  # the layout's side margins
        shown = self.title_label.fontMetrics().elidedText(self._title_full, Qt.TextElideMode.ElideRight,
                                                          max(width, 20))
        if self.title_label.text() != shown:
            self.title_label.setText(shown)
        self.title_label.setToolTip(self._title_full if shown != self._title_full else "")

    def _fit_detail(self) -> None:
        """Elide the detail line to the tile's width; the tooltip keeps the whole text."""
        width = self.contentsRect().width() - 30
        metrics = self.detail_label.fontMetrics()
        shown = metrics.elidedText(self._detail_full, Qt.TextElideMode.ElideRight, max(width, 20))
        if self.detail_label.text() != shown:
            self.detail_label.setText(shown)
        self.detail_label.setToolTip(self._detail_full if shown != self._detail_full else "")

    def _fit_value(self) -> None:
        """Largest value font (pt) whose text fits the tile; rechecked when width or length change."""
        text = self.value_label.text()
        width = self.contentsRect().width() - 30  # the layout's side margins
        key = (len(text), width)
        if key == self._fitted_for:
            return
        self._fitted_for = key
        font = QFont(self.value_label.font())
        font.setBold(True)
        pt = VALUE_FONT_PT
        while pt > VALUE_MIN_FONT_PT:
            font.setPointSize(pt)
            if QFontMetrics(font).horizontalAdvance(text) <= width:
                break
            pt -= 1
        if pt != self._value_pt:
            self._value_pt = pt
            # A stylesheet font beats setFont(), and the app styles every QWidget's font.
            self.value_label.setStyleSheet(f"font-size: {pt}pt;")
