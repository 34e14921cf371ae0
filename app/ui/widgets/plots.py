"""Plot styling shared by every page: a dark, high-contrast look that survives a projector.

Colours are module constants so other pages (sweeps, prompt console) draw with the same
vocabulary: cyan is "ours/used", green is "the server's share", grey dashed is a limit, yellow
dashed is a prediction.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt.internals import PrimitiveArray
from PySide6.QtCore import QLineF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QPainter, QPen, QTransform
from PySide6.QtWidgets import QGraphicsItem

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
    # An axis reaches a few pixels into the view (its ticks), so every curve update used to
    # repaint it; cached as a pixmap it is redrawn only when its ticks or size change.
    axis.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


def title_with_legend(title: str, entries: list[tuple[str, str, bool]]) -> str:
    """Rich text for a plot title followed by its legend: (name, colour, dashed) per series.

    The legend lives in the title row rather than over the data, so no curve ever hides
    behind it, however small the plot gets. A line may break between entries (never inside one),
    so a narrow plot can wrap its legend onto more lines, and between the title's words.
    """
    heading = f"<span style='color:{TITLE_TEXT}; font-weight:700'>{title}</span>"
    parts = []
    for name, color, dashed in entries:
        swatch = "&#x254D;&#x254D;" if dashed else "&#x2501;&#x2501;"
        parts.append(
            f"<span style='color:{color}; font-weight:700'>{swatch}</span>"
            f"<span style='color:{AXIS_TEXT}; font-weight:400'>&nbsp;{name}</span>"
        )
    # The title itself may break between its words, should a plot be narrower than it alone.
    return "&nbsp;&nbsp;&nbsp; ".join([heading] + [f"<span style='white-space:nowrap'>{part}</span>" for part in parts])


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


def add_series(widget: pg.PlotWidget, color: str, dashed: bool = False) -> LiveCurve:
    """A live curve on the plot's main axes; NaN values draw as gaps."""
    curve = LiveCurve(pen(color, dashed=dashed))
    widget.getPlotItem().addItem(curve, ignoreBounds=True)
    return curve


class LiveCurve(pg.GraphicsObject):
    """A curve for data that changes every frame, drawn cheaply: the points are mapped to pixels
    with numpy and stroked without the painter's scaling, because Qt strokes a 2 px pen under a
    scaling transform several times slower. It draws exactly the points it is given (the caller
    decimates, see app.core.decimate); NaN breaks the line, like pyqtgraph's connect="finite".
    Its bounds are the view it lives in, which clips it anyway."""

    def __init__(self, curve_pen: QPen) -> None:
        super().__init__()
        self.opts = {"connect": "finite", "pen": curve_pen}
        self.xData = np.zeros(0)
        self.yData = np.zeros(0)
        self._bounds = QRectF()
        self._data_segments = np.zeros((0, 4))  # (x0, y0, x1, y1) per segment, data units
        self._segments = PrimitiveArray(QLineF, 4)  # the same in device pixels, handed to Qt without copies
        # Dashes drawn as three 1 px passes (the cosmetic stroker's fast path) one pixel apart: as
        # thick as the 2 px pen, dash lengths in the same pixels, without the slow wide-dash stroker.
        self._thin = QPen(curve_pen)
        self._thin.setWidthF(1.0)
        if curve_pen.style() != Qt.PenStyle.SolidLine:
            self._thin.setDashPattern([d * curve_pen.widthF() for d in curve_pen.dashPattern()])

    def setData(self, x: np.ndarray, y: np.ndarray) -> bool:  # noqa: N802 - pyqtgraph's spelling
        """Draw these points (x, y in data units); returns False when they equal what is drawn."""
        if len(x) == len(self.xData) and np.array_equal(x, self.xData) and np.array_equal(y, self.yData,
                                                                                          equal_nan=True):
            return False
        blank = not np.isfinite(self.yData).any() and not np.isfinite(y).any()
        self.xData, self.yData = x, y
        if blank:  # all N/A before and after: nothing was drawn and nothing will be
            return False
        # The segments between neighbouring finite points, found once per data change rather than per paint.
        finite = np.isfinite(x) & np.isfinite(y)
        joined = finite[:-1] & finite[1:]
        segments = np.empty((int(np.count_nonzero(joined)), 4))
        segments[:, 0], segments[:, 1] = x[:-1][joined], y[:-1][joined]
        segments[:, 2], segments[:, 3] = x[1:][joined], y[1:][joined]
        self._data_segments = segments
        self.update()
        return True

    def getData(self) -> tuple[np.ndarray, np.ndarray]:  # noqa: N802 - pyqtgraph's spelling
        """The points drawn (data units)."""
        return self.xData, self.yData

    def viewRangeChanged(self) -> None:  # noqa: N802 - pyqtgraph hook
        """Follow the view's rect, the bounds of this curve."""
        view = self.getViewBox()
        rect = view.viewRect() if view is not None else QRectF()
        if rect != self._bounds:
            self.prepareGeometryChange()
            self._bounds = rect

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        """The view's rect in data units (set when the view range changes)."""
        return self._bounds

    def paint(self, painter: QPainter, *_: object) -> None:
        """Map the points to device pixels and stroke them with an untransformed pen."""
        if len(self.xData) < 2:
            return
        t = painter.transform()
        painter.resetTransform()
        if self._thin.style() == Qt.PenStyle.SolidLine:
            self._stroke_segments(painter, t)
        else:
            x, y = self.xData, self.yData
            if t.isRotating():  # a time plot never is; kept general all the same
                px, py = t.m11() * x + t.m21() * y + t.m31(), t.m12() * x + t.m22() * y + t.m32()
            else:
                px, py = t.m11() * x + t.m31(), t.m22() * y + t.m32()
            path = pg.arrayToQPath(px, py, connect="finite")
            painter.setPen(self._thin)
            for dx, dy in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0)):
                painter.setTransform(QTransform.fromTranslate(dx, dy))
                painter.drawPath(path)
        painter.setTransform(t)

    def _stroke_segments(self, painter: QPainter, t: QTransform) -> None:
        """One drawLines call for every pair of neighbouring finite points, mapped to pixels by `t`."""
        data = self._data_segments
        if not len(data):
            return
        self._segments.resize(len(data))
        lines = self._segments.ndarray()
        if t.isRotating():  # a time plot never is; kept general all the same
            xs, ys = data[:, 0::2], data[:, 1::2]
            lines[:, 0::2] = t.m11() * xs + t.m21() * ys + t.m31()
            lines[:, 1::2] = t.m12() * xs + t.m22() * ys + t.m32()
        else:
            np.multiply(data, (t.m11(), t.m22(), t.m11(), t.m22()), out=lines)
            lines += (t.m31(), t.m32(), t.m31(), t.m32())
        painter.setPen(self.opts["pen"])
        painter.drawLines(*self._segments.drawargs())


class TickGrid(pg.GraphicsObject):
    """Grid lines at the major ticks of a plot's axes, all drawn by one item in one call.

    pyqtgraph's own grid is painted by the axis items over the whole view, so every curve
    update repaints the axes and their text too; one line item per tick costs a Python paint
    call each. This item strokes every line at once with a 1 px pen in device pixels.
    """

    def __init__(self, item: pg.PlotItem) -> None:
        super().__init__()
        self._item = item
        self._pen = pen(GRID_LINE, 1.0)
        self._xs: list[float] = []
        self._ys: list[float] = []
        self._bounds = QRectF()
        self._mapped: list[QLineF] = []
        self._mapped_for: object = None
        self.setZValue(-100)
        item.addItem(self, ignoreBounds=True)
        item.getViewBox().sigResized.connect(self.refresh)
        item.getViewBox().sigRangeChanged.connect(self.refresh)

    @property
    def values(self) -> tuple[list[float], list[float]]:
        """(x values of the vertical lines, y values of the horizontal lines), data units."""
        return self._xs, self._ys

    def refresh(self, *_: object) -> None:
        """Move the lines to the axes' current major ticks."""
        vb = self._item.getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        found = []
        for axis, lo, hi, size in (("bottom", x0, x1, vb.width()), ("left", y0, y1, vb.height())):
            ticks = self._item.getAxis(axis).tickValues(lo, hi, max(size, 1.0))
            found.append([float(v) for v in ticks[0][1]] if ticks else [])
        self.prepareGeometryChange()
        self._bounds = vb.viewRect()
        self._xs, self._ys = found
        self._mapped_for = None
        self.update()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt override
        """The view's rect in data units."""
        return self._bounds

    def paint(self, painter: QPainter, *_: object) -> None:
        """Every grid line, mapped to device pixels, in one drawLines call."""
        t = painter.transform()
        key = (t, self._bounds, len(self._xs), len(self._ys))
        if key != self._mapped_for:  # the lines move only when the range or the size changes
            r = self._bounds
            lines = [t.map(QLineF(x, r.top(), x, r.bottom())) for x in self._xs]
            self._mapped = lines + [t.map(QLineF(r.left(), y, r.right(), y)) for y in self._ys]
            self._mapped_for = key
        if not self._mapped:
            return
        painter.resetTransform()
        painter.setPen(self._pen)
        painter.drawLines(self._mapped)
        painter.setTransform(t)
