"""Before and after on the Benchmark page: the server's own default setting against the recommended one, per
scenario class (average and P95, end to end and to the first token, with the change) and over all requests,
then the point-wide figures; under it the comparison chart (app/ui/widgets/compare_chart.py, the CLI's
--compare-report PNG) scaled to the view's width."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPixmap, QResizeEvent
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHeaderView, QLabel, QSizePolicy, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from app.core.bench.compare import (LATENCY, STATE_WORDS, BeforeAfter, Change, Delta, Outcome, SideState,
                                    change_text)
from app.ui.widgets import theme
from app.ui.widgets.compare_chart import comparison_image

CHANGE_COLOURS = {Change.BETTER: theme.OK, Change.WORSE: theme.ERROR}
CARD_STYLE = ("#CompareCard { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 8px; }"
              "#CompareCard QLabel { background: transparent; }")
CHART_SIZE = (1400, 780)  # the chart's own size; shown scaled to the view's width


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


def headline(c: BeforeAfter) -> str:
    """What the comparison could compare, in one sentence."""
    if c.outcome is Outcome.DEFAULT_RECOMMENDED:
        return "The recommendation is the server's default setting itself: there is nothing to change."
    if c.outcome is Outcome.NO_RECOMMENDATION:
        return "Nothing could be recommended, so only the default's figures are shown."
    if c.outcome is Outcome.DEFAULT_NOT_MEASURED:
        return "The server's default setting was not measured, so there is nothing to compare the recommendation with."
    sides = [("default", c.default), ("recommended", c.recommended)]
    dirty = [f"the {name} side: {STATE_WORDS[s.state]}" for name, s in sides
             if s is not None and s.state is not SideState.CLEAN]
    if dirty:
        return "Not a like-for-like comparison — " + "; ".join(dirty) + "; such a side is never shown as a gain."
    return "Both sides ran every request with its whole prompt."


class CompareView(QWidget):
    """The before/after card, table and chart (hidden for a run without a default point)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("CompareView")
        self.comparison: BeforeAfter | None = None
        self._title = ""
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        card = QFrame()
        card.setObjectName("CompareCard")
        card.setStyleSheet(CARD_STYLE)
        cl = QVBoxLayout(card)
        cl.setContentsMargins(14, 10, 14, 12)
        cl.setSpacing(4)
        self.title = QLabel("Before and after: the server's defaults against the recommendation")
        self.title.setWordWrap(True)
        self.title.setStyleSheet("font-size: 13pt; font-weight: 700; color: #9fd8ff;")
        self.sides = QLabel()
        self.sides.setObjectName("CompareSides")
        self.sides.setWordWrap(True)
        self.sides.setTextFormat(Qt.TextFormat.RichText)
        self.words = QLabel()
        self.words.setObjectName("CompareHeadline")
        self.words.setWordWrap(True)
        for w in (self.title, self.sides, self.words):
            cl.addWidget(w)
        lay.addWidget(card)
        self.table = QTableWidget(0, 0)
        self.table.setObjectName("CompareTable")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        lay.addWidget(self.table)
        self.chart = QLabel()
        self.chart.setObjectName("CompareChart")
        self.chart.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.chart.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        lay.addWidget(self.chart)
        self._pixmap: QPixmap | None = None
        self.hide()

    def set_comparison(self, comparison: BeforeAfter | None, title: str = "") -> None:
        """Show a run's comparison (None: hide)."""
        self.comparison = comparison
        self._title = title
        self.setVisible(comparison is not None)
        if comparison is None:
            self._pixmap = None
            self.chart.clear()
            return
        c = comparison
        parts = [f"<b>Default</b> — {html.escape(c.default.label)}: {html.escape(c.default.setting)}"]
        if c.default_words:
            parts[0] += f" <span style='color:{theme.DIM}'>(the server's own: {html.escape('; '.join(c.default_words))})</span>"
        if c.recommended is not None:
            parts.append(f"<b>Recommended</b> — {html.escape(c.recommended.label)}: {html.escape(c.recommended.setting)}")
        self.sides.setText("<br>".join(parts))
        self.words.setText(headline(c))
        self._fill_table(c)
        self._pixmap = QPixmap.fromImage(comparison_image(c, title, *CHART_SIZE))
        self._show_chart()

    def _fill_table(self, c: BeforeAfter) -> None:
        two = c.recommended is not None
        header = ["Class", "Figure", "Default", *(("Recommended", "Change") if two else ())]
        rows: list[tuple[str, str, str, str, Delta | None]] = []
        for row in (*c.classes, c.overall):
            for label, attr in LATENCY:
                d = c.delta(row, attr)
                rows.append((row.name, f"{label} (ms)", _ms(getattr(row.default, attr)),
                             _ms(getattr(row.recommended, attr)) if row.recommended is not None else "—", d))
        tps = c.delta(c.overall, "tokens_per_s")
        rows.append((c.overall.name, "output tokens/s", "—" if tps.before is None else f"{tps.before:.1f}",
                     "—" if tps.after is None else f"{tps.after:.1f}", tps))
        rpd = c.point_delta("requests_per_day")
        rows.append(("capacity", "requests/day", "—" if rpd.before is None else f"{rpd.before:,.0f}",
                     "—" if rpd.after is None else f"{rpd.after:,.0f}", rpd))
        table = self.table
        table.clear()
        table.setColumnCount(len(header))
        table.setHorizontalHeaderLabels(header)
        table.setRowCount(len(rows))
        for r, (name, figure, before, after, delta) in enumerate(rows):
            cells = [name if r == 0 or rows[r - 1][0] != name else "", figure, before,
                     *((after, change_text(delta) if delta is not None else "") if two else ())]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight)
                if col == 4 and delta is not None and delta.change in CHANGE_COLOURS:
                    item.setForeground(QColor(CHANGE_COLOURS[delta.change]))
                table.setItem(r, col, item)
        table.resizeRowsToContents()
        height = table.horizontalHeader().height() + sum(table.rowHeight(i) for i in range(table.rowCount()))
        table.setFixedHeight(height + 2 * table.frameWidth() + 2)

    def _show_chart(self) -> None:
        if self._pixmap is None:
            return
        width = max(200, self.width())
        scaled = self._pixmap.scaledToWidth(width, Qt.TransformationMode.SmoothTransformation)
        self.chart.setPixmap(scaled)
        self.chart.setFixedHeight(scaled.height())

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's spelling
        super().resizeEvent(event)
        self._show_chart()


__all__ = ["CompareView", "headline"]
