"""The presenter's pieces that scale with the view: labels whose font is set in pixels from the view's size, and a
figure tile (a title, one big figure with its unit, a detail line) with a dim live graph painted behind it.

Sizes are in the view's logical pixels, computed from its size in resize events, so the same view reads on a
1280×720 projector, at --scale 1.5 (853×480 logical) and at 1920×1080. A font is set through the label's own style
sheet: the app's style sheet sets every widget's font size, which a plain setFont() would not beat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import QApplication, QLabel, QWidget

from app.ui.widgets import plots

NO_DATA = "—"  # a figure without data: never a 0 that was not measured
MIN_TEXT_PX = 10  # no text gets smaller than this, however small the view
TILE_FILL = plots.PLOT_BACKGROUND
TILE_BORDER = plots.PLOT_BORDER
TITLE_COLOUR = "#d4d6dd"
VALUE_COLOUR = "#ffffff"
NO_DATA_COLOUR = "#8b8e99"  # the em dash of a figure without data: there, but quiet
UNIT_COLOUR = "#c3c6cf"
DETAIL_COLOUR = "#d4d6dd"
GRAPH_WINDOW_S = 60.0  # seconds of history behind a figure
_LINE_ALPHA = 150  # the graph behind a figure is dim: its line, and the area under it fainter still
_AREA_ALPHA = 38
_FIT_STEP_PX = 1
_ROOM = QRect(0, 0, 100_000, 100_000)  # room enough to lay out any line
VALUE_SCALE = 14.0  # a figure's largest size: 14 % of the view's readable height


def text_font(px: int, bold: bool = False) -> QFont:
    """The app's font at `px` pixels (what a ScaledLabel at that size draws with), for measuring."""
    font = QFont(QApplication.font())
    font.setPixelSize(max(1, px))
    font.setBold(bold)
    return font


def text_width(font: QFont, text: str) -> int:
    """Pixels a label needs for `text` on one line (the advance, or the ink where a glyph overhangs it)."""
    metrics = QFontMetrics(font)
    laid_out = metrics.boundingRect(_ROOM, 0, text).width()  # as a label measures its size hint
    return max(metrics.horizontalAdvance(text), metrics.boundingRect(text).width(), laid_out) + 1


def fit_px(text: str, width: float, max_px: int, min_px: int, bold: bool = False) -> int:
    """The largest size from max_px down to min_px at which `text` fits `width` on one line (min_px if none)."""
    px = max_px
    while px > min_px and text_width(text_font(px, bold), text) > width:
        px -= _FIT_STEP_PX
    return max(px, min_px)


def line_height_of(px: int, bold: bool = False) -> int:
    """The height of one line of the app's font at `px` pixels."""
    metrics = QFontMetrics(text_font(px, bold))
    # A laid-out line (as a label measures it) can round a pixel taller than the font's height.
    return max(metrics.height(), metrics.boundingRect(_ROOM, 0, "Ag").height())


def wrapped_height(font: QFont, text: str, width: int) -> int:
    """Pixels `text` takes wrapped at word boundaries into `width`."""
    return QFontMetrics(font).boundingRect(0, 0, max(1, width), 100_000, Qt.TextFlag.TextWordWrap, text).height()


class ScaledLabel(QLabel):
    """A label in one colour whose font size (px) the view sets as it resizes; the app's style sheet cannot
    override it. Text that had to be shortened to fit keeps its whole wording in the tooltip."""

    def __init__(self, colour: str, *, bold: bool = False, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._colour = colour
        self.bold = bold
        self.px = 0
        self.full_text = ""
        self.set_px(MIN_TEXT_PX)

    def set_colour(self, colour: str) -> None:
        if colour != self._colour:
            self._colour = colour
            self._restyle()

    def set_px(self, px: int) -> None:
        """Draw at `px` pixels (restyled only when it changes)."""
        px = max(MIN_TEXT_PX, int(px))
        if px != self.px:
            self.px = px
            self._restyle()

    def measuring_font(self) -> QFont:
        """The font this label draws with, to measure its text."""
        return text_font(self.px, self.bold)

    def show_line(self, text: str, width: int, max_px: int, min_px: int) -> None:
        """One line of `text` in `width` px: the largest size from max_px to min_px that fits it whole, else
        min_px with the text elided (its whole wording in the tooltip)."""
        self.full_text = text
        text = text or " "  # an empty line keeps its height
        self.set_px(fit_px(text, width - 2, max_px, min_px, self.bold))
        metrics = QFontMetrics(self.measuring_font())
        shown = text
        if text_width(self.measuring_font(), text) > width - 2:
            shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, max(1, width - 4))
        if self.text() != shown:
            self.setText(shown)
        self.setToolTip(self.full_text if shown != text else "")

    def line_height(self) -> int:
        """The height one line of this label takes."""
        return line_height_of(self.px, self.bold)

    def _restyle(self) -> None:
        weight = 700 if self.bold else 400
        self.setStyleSheet(f"color: {self._colour}; background: transparent; font-size: {self.px}px; "
                           f"font-weight: {weight}; padding: 0px; margin: 0px; border: none;")


@dataclass(frozen=True)
class Trace:
    """One curve behind a figure: x in seconds before now (<= 0), y in the figure's unit; NaN breaks it."""

    x: np.ndarray
    y: np.ndarray
    colour: str


@dataclass(frozen=True)
class Graph:
    """What a tile draws behind its figure: curves on 0..y_max, and dashed levels (a limit, an estimate)."""

    traces: tuple[Trace, ...] = ()
    y_max: float = 1.0
    levels: tuple[tuple[float, str], ...] = ()  # (y, colour)

    @property
    def empty(self) -> bool:
        return not any(np.isfinite(t.y).any() for t in self.traces) and not self.levels


EMPTY_GRAPH = Graph()


class FigureTile(QWidget):
    """A title, one big figure with its unit and a detail line, over a dim live graph. The view sets the size
    unit (`set_unit`, 1 % of its readable height); the figure's font then grows as large as the tile allows."""

    def __init__(self, key: str, title: str, accent: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.key = key
        self.setObjectName(f"PresenterFigure_{key}")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, False)
        self.setStyleSheet("background: transparent;")
        self.accent = accent
        self.title_label = ScaledLabel(TITLE_COLOUR, bold=True, parent=self)
        self.value_label = ScaledLabel(VALUE_COLOUR, bold=True, parent=self)
        self.unit_label = ScaledLabel(UNIT_COLOUR, bold=True, parent=self)
        self.detail_label = ScaledLabel(DETAIL_COLOUR, parent=self)
        self.value_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._title = title
        self._value = NO_DATA
        self._unit = ""
        self._detail = ""
        self._u = 4.8
        self._fitted: tuple[object, ...] = ()
        self.value_colour = VALUE_COLOUR
        self.value_scale = VALUE_SCALE  # the figure's largest size, in the view's size units
        self.graph = EMPTY_GRAPH
        self.value_label.setText(NO_DATA)
        self.value_label.set_colour(NO_DATA_COLOUR)

    # --- what it shows ----------------------------------------------------------------------
    @property
    def title(self) -> str:
        return self._title

    @property
    def value(self) -> str:
        """The figure as shown (NO_DATA without data)."""
        return self._value

    @property
    def unit(self) -> str:
        return self._unit

    @property
    def detail(self) -> str:
        """The whole detail line (shown elided where the tile is narrow)."""
        return self._detail

    def set_title(self, title: str) -> None:
        if title != self._title:
            self._title = title
            self._fitted = ()
            self._layout()

    def set_figure(self, value: str, unit: str = "", detail: str = "") -> None:
        """Show a figure (NO_DATA for none: its unit is then left out) and its detail line."""
        unit = "" if value == NO_DATA else unit
        if (value, unit, detail) == (self._value, self._unit, self._detail):
            return
        self._value, self._unit, self._detail = value, unit, detail
        self.value_label.set_colour(NO_DATA_COLOUR if value == NO_DATA else self.value_colour)
        self._layout()

    def set_value_colour(self, colour: str) -> None:
        """The figure's colour (a figure without data stays dim)."""
        self.value_colour = colour
        self.value_label.set_colour(NO_DATA_COLOUR if self._value == NO_DATA else colour)

    def set_graph(self, graph: Graph) -> None:
        """Draw these curves behind the figure (repainted at once)."""
        self.graph = graph
        self.update()

    def set_unit(self, u: float) -> None:
        """The view's size unit (px): every font of the tile follows it."""
        if u != self._u:
            self._u = u
            self._fitted = ()
            self._layout()

    @property
    def value_px(self) -> int:
        """The figure's font size (px) as laid out."""
        return self.value_label.px

    # --- layout -----------------------------------------------------------------------------
    def _padding(self) -> tuple[int, int, int]:
        """(left, right, top/bottom) inner padding, px."""
        u = self._u
        return round(2.2 * u), round(1.4 * u), round(0.9 * u)

    def _layout(self) -> None:
        u = self._u
        left, right, pad = self._padding()
        width = max(1, self.width() - left - right)
        height = self.height()
        title_max = max(MIN_TEXT_PX, round(3.0 * u))
        detail_max = max(MIN_TEXT_PX, round(3.0 * u))
        least = max(MIN_TEXT_PX, round(2.6 * u))  # a longer line is cut (whole in its tooltip) rather than tiny
        self.title_label.show_line(self._title, width, title_max, least)
        self.detail_label.show_line(self._detail, width, detail_max, least)
        title_h, detail_h = self.title_label.line_height(), self.detail_label.line_height()
        self.title_label.setGeometry(left, pad, width, title_h)
        self.detail_label.setGeometry(left, height - pad - detail_h, width, detail_h)
        value_top = pad + title_h
        value_h = max(1, height - 2 * pad - title_h - detail_h)
        self._fit_value(left, value_top, width, value_h)

    def _fit_value(self, left: int, top: int, width: int, height: int) -> None:
        """The largest figure font (with its unit at ~45 %) that fits the space between title and detail."""
        key = (self._value, self._unit, left, top, width, height, self._u)
        if key == self._fitted:
            return
        self._fitted = key
        value, unit = self._value, self._unit
        unit_text = f"\u2009{unit}" if unit else ""
        px = max(MIN_TEXT_PX, round(self.value_scale * self._u))
        while True:
            big, small = text_font(px, True), text_font(self._unit_px(px), True)
            value_w = text_width(big, value)
            unit_w = text_width(small, unit_text) if unit_text else 0
            fits = value_w + unit_w <= width and line_height_of(px, True) <= height
            if fits or px <= MIN_TEXT_PX:
                break
            px -= _FIT_STEP_PX
        self.value_label.set_px(px)
        self.unit_label.set_px(self._unit_px(px))
        big, small = text_font(px, True), text_font(self.unit_label.px, True)
        big_metrics, small_metrics = QFontMetrics(big), QFontMetrics(small)
        value_h = line_height_of(px, True)
        y = top + max(0, (height - value_h) // 2)
        value_w = min(width, text_width(big, value))
        self.value_label.setText(value)
        self.value_label.setGeometry(left, y, value_w, value_h)
        self.unit_label.setText(unit_text)
        self.unit_label.setVisible(bool(unit_text))
        if unit_text:
            unit_w = min(max(1, width - value_w), text_width(small, unit_text))
            baseline = y + big_metrics.ascent()
            self.unit_label.setGeometry(left + value_w, baseline - small_metrics.ascent(), unit_w,
                                        line_height_of(self.unit_label.px, True))

    @staticmethod
    def _unit_px(value_px: int) -> int:
        return max(MIN_TEXT_PX, round(value_px * 0.42))

    # --- Qt events --------------------------------------------------------------------------
    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._layout()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802 - Qt override
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        radius = max(4.0, 1.2 * self._u)
        body = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        painter.setPen(QPen(QColor(TILE_BORDER), 1.0))
        painter.setBrush(QColor(TILE_FILL))
        painter.drawRoundedRect(body, radius, radius)
        # The graph lies behind the figure; the title above it and the detail line below stay on the plain tile.
        graph_top = max(body.top() + radius, float(self.title_label.geometry().bottom()) + 0.4 * self._u)
        graph_bottom = min(body.bottom() - 2.0, float(self.detail_label.geometry().top()) - 0.3 * self._u)
        self._paint_graph(painter, QRectF(body.left() + 2.0, graph_top, body.width() - 4.0,
                                          max(0.0, graph_bottom - graph_top)))
        bar = QRectF(body.left(), body.top(), max(4.0, 0.8 * self._u), body.height())
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(self.accent))
        painter.setClipRect(bar)
        painter.drawRoundedRect(body, radius, radius)
        painter.end()

    def _paint_graph(self, painter: QPainter, area: QRectF) -> None:
        graph = self.graph
        if graph.empty or area.width() <= 2 or area.height() <= 2:
            return
        y_max = graph.y_max if graph.y_max > 0 and math.isfinite(graph.y_max) else 1.0

        def to_px(x: float, y: float) -> QPointF:
            fx = (x + GRAPH_WINDOW_S) / GRAPH_WINDOW_S
            fy = min(max(y / y_max, 0.0), 1.0)
            return QPointF(area.left() + fx * area.width(), area.bottom() - fy * area.height())

        painter.save()
        painter.setClipRect(area)
        for trace in graph.traces:
            colour = QColor(trace.colour)
            line, fill = QColor(colour), QColor(colour)
            line.setAlpha(_LINE_ALPHA)
            fill.setAlpha(_AREA_ALPHA)
            for run in _finite_runs(trace.x, trace.y):
                points = [to_px(float(x), float(y)) for x, y in run]
                if len(points) < 2:
                    continue
                area_path = QPainterPath(QPointF(points[0].x(), area.bottom()))
                for p in points:
                    area_path.lineTo(p)
                area_path.lineTo(QPointF(points[-1].x(), area.bottom()))
                area_path.closeSubpath()
                painter.fillPath(area_path, fill)
                stroke = QPainterPath(points[0])
                for p in points[1:]:
                    stroke.lineTo(p)
                painter.strokePath(stroke, QPen(line, max(1.5, 0.4 * self._u)))
        for level, colour_name in graph.levels:
            if not math.isfinite(level):
                continue
            colour = QColor(colour_name)
            colour.setAlpha(_LINE_ALPHA + 40)
            pen = QPen(colour, max(1.5, 0.35 * self._u))
            pen.setStyle(Qt.PenStyle.DashLine)
            painter.setPen(pen)
            y = to_px(0.0, level).y()
            painter.drawLine(QPointF(area.left(), y), QPointF(area.right(), y))
        painter.restore()


def _finite_runs(x: np.ndarray, y: np.ndarray) -> list[list[tuple[float, float]]]:
    """The stretches of neighbouring finite points inside the window (NaN breaks a curve)."""
    runs: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    for xv, yv in zip(x, y):
        if math.isfinite(xv) and math.isfinite(yv) and xv >= -GRAPH_WINDOW_S - 1.0:
            current.append((float(xv), float(yv)))
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs
