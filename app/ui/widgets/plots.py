"""Plot styling shared by every page: a dark, high-contrast look that survives a projector.

Colours are module constants so other pages (sweeps, prompt console) draw with the same
vocabulary: cyan is "ours/used", green is "the server's share", grey dashed is a limit, yellow
dashed is a prediction.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QPen

# Surfaces and text
PLOT_BACKGROUND = "#1e1f24"
PLOT_BORDER = "#30323b"
GRID_LINE = "#2e3039"  # opaque: blending translucent grid lines costs more than the curves
AXIS_TEXT = "#d4d6dd"
AXIS_LINE = "#5a5d69"
TITLE_TEXT = "#f2f3f5"

# Series colours: bright, mutually distinct, readable on PLOT_BACKGROUND
CYAN = "#4cc2ff"
GREEN = "#3ddc84"
ORANGE = "#ff9f40"
RED = "#ff6b6b"
YELLOW = "#ffd23f"
VIOLET = "#b69cff"
MAGENTA = "#ff6ad5"
LIMIT_GREY = "#a3a7b3"

# Type and strokes
PEN_WIDTH = 2.0  # px; whole pixels draw through Qt's fast wide-line path
AXIS_FONT_PT = 12
TITLE_FONT_PT = 13
LEGEND_FONT_PT = 11  # labels drawn inside a plot (the estimate line's)
AXIS_WIDTH_PX = 64  # fixed left/right axis width so stacked plots line up

# Colour per quantity, for pages that show the same numbers
VRAM_USED_COLOR = CYAN
VRAM_SERVER_COLOR = GREEN
VRAM_TOTAL_COLOR = LIMIT_GREY
VRAM_ESTIMATE_COLOR = YELLOW
GPU_UTIL_COLOR = VIOLET
POWER_COLOR = ORANGE
TEMPERATURE_COLOR = RED
TOKENS_COLOR = YELLOW
IN_FLIGHT_COLOR = LIMIT_GREY
RAM_COLOR = CYAN
RSS_COLOR = GREEN
CPU_COLOR = MAGENTA


def pen(color: str, width: float = PEN_WIDTH, dashed: bool = False) -> QPen:
    """A cosmetic pen (width in screen px whatever the zoom), solid or dashed."""
    p = QPen(QColor(color))
    p.setWidthF(width)
    p.setCosmetic(True)
    if dashed:
        p.setStyle(Qt.PenStyle.CustomDashLine)
        p.setDashPattern([4.0, 3.0])
    return p


def _font(point_size: int, bold: bool = False) -> QFont:
    f = QFont()
    f.setPointSize(point_size)
    f.setBold(bold)
    return f


def style_axis(axis: pg.AxisItem, label: str) -> None:
    """Readable ticks and a label carrying its unit; no SI prefixes on unit labels."""
    axis.setPen(pen(AXIS_LINE, 1.0))
    axis.setTextPen(pen(AXIS_TEXT, 1.0))
    axis.setTickFont(_font(AXIS_FONT_PT))
    axis.enableAutoSIPrefix(False)
    axis.setLabel(label, color=AXIS_TEXT, **{"font-size": f"{AXIS_FONT_PT}pt"})
    if axis.orientation in ("left", "right"):
        axis.setWidth(AXIS_WIDTH_PX)


def title_with_legend(title: str, entries: list[tuple[str, str, bool]]) -> str:
    """Rich text for a plot title followed by its legend: (name, colour, dashed) per series.

    The legend lives in the title row rather than over the data, so no curve ever hides
    behind it, however small the plot gets.
    """
    parts = [f"<span style='color:{TITLE_TEXT}; font-weight:700'>{title}</span>"]
    for name, color, dashed in entries:
        swatch = "&#x254D;&#x254D;" if dashed else "&#x2501;&#x2501;"
        parts.append(
            f"<span style='color:{color}; font-weight:700'>{swatch}</span>"
            f"<span style='color:{AXIS_TEXT}; font-weight:400'>&nbsp;{name}</span>"
        )
    return "&nbsp;&nbsp;&nbsp;&nbsp;".join(parts)


def make_static_plot(y_label: str, x_label: str = "", *, title: str | None = None, min_height: int = 180,
                     grid: bool = False, right_margin: int = 12) -> pg.PlotWidget:
    """A styled PlotWidget with no mouse zoom, menu or buttons: the base of every chart in the app."""
    widget = pg.PlotWidget(background=PLOT_BACKGROUND)
    widget.setMinimumHeight(min_height)
    item = widget.getPlotItem()
    if title is not None:
        item.setTitle(title_with_legend(title, []), size=f"{TITLE_FONT_PT}pt")
    item.hideButtons()
    item.setMenuEnabled(False)
    item.setMouseEnabled(x=False, y=False)
    style_axis(item.getAxis("left"), y_label)
    style_axis(item.getAxis("bottom"), x_label)
    if grid:
        item.showGrid(x=True, y=True, alpha=0.18)
    item.layout.setContentsMargins(4, 6, right_margin, 4)
    return widget


def make_time_plot(title: str, y_label: str, x_label: str = "time (s, 0 = now)") -> pg.PlotWidget:
    """A PlotWidget for a time series ending at 0 s: styled and static (no mouse zoom)."""
    widget = make_static_plot(y_label, x_label, title=title)
    widget.setObjectName("TimePlot")
    widget.getPlotItem().getViewBox().disableAutoRange()
    return widget


def add_series(widget: pg.PlotWidget, color: str, dashed: bool = False) -> pg.PlotDataItem:
    """A curve on the plot's main axes; NaN values draw as gaps."""
    curve = widget.getPlotItem().plot([], [], pen=pen(color, dashed=dashed), connect="finite")
    style_curve(curve)
    return curve


def style_curve(curve: pg.PlotDataItem) -> None:
    """Draw only what is in view, about one point per pixel column (the min and max of every
    two columns, so spikes survive): a 15-minute history costs little more than a 1-minute one.
    Wide pens are stroked point by point, so points drawn are what a frame costs."""
    curve.setClipToView(True)
    curve.opts["autoDownsampleFactor"] = 0.5
    curve.setDownsampling(auto=True, method="peak")


class TickGrid:
    """Grid lines at the major ticks of a plot's axes, drawn as plain lines in the view.

    pyqtgraph's own grid is painted by the axis items over the whole view, so every curve
    update repaints the axes and their text too; these lines cost one stroke each.
    """

    def __init__(self, item: pg.PlotItem, lines_per_axis: int = 12) -> None:
        self._item = item
        self._pools: dict[str, list[pg.InfiniteLine]] = {}
        grid_pen = pen(GRID_LINE, 1.0)
        for axis, angle in (("left", 0), ("bottom", 90)):
            pool = []
            for _ in range(lines_per_axis):
                line = pg.InfiniteLine(angle=angle, movable=False, pen=grid_pen)
                line.setZValue(-100)
                line.hide()
                item.addItem(line, ignoreBounds=True)
                pool.append(line)
            self._pools[axis] = pool
        item.getViewBox().sigResized.connect(self.refresh)
        item.getViewBox().sigRangeChanged.connect(self.refresh)

    def refresh(self, *_: object) -> None:
        """Move the lines to the axes' current major ticks."""
        vb = self._item.getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        for axis, lo, hi, size in (("left", y0, y1, vb.height()), ("bottom", x0, x1, vb.width())):
            ticks = self._item.getAxis(axis).tickValues(lo, hi, max(size, 1.0))
            values = list(ticks[0][1]) if ticks else []
            for i, line in enumerate(self._pools[axis]):
                if i < len(values):
                    line.setValue(values[i])
                    line.show()
                else:
                    line.hide()
