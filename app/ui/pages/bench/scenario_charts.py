"""A scenario run per class: a verdict per class (targets met, or which were missed), TTFT and end-to-end
latency as grouped bars (average and P95) with each class's targets drawn over its bars, and the prompt
tokens each class asked for beside those the server counted. One measured point at a time."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QResizeEvent
from PySide6.QtWidgets import QComboBox, QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.core.bench.run import SweepRun
from app.core.bench.scenario_run import ClassResult, PointClasses, scenario_results
from app.core.bench.stats import ClassTargets
from app.ui.pages.bench.charts import ChartFrame, _text
from app.ui.widgets import plots, theme

AVG_COLOUR = plots.CYAN
P95_COLOUR = plots.VIOLET
TARGET_COLOUR = plots.YELLOW
ASKED_COLOUR = plots.LIMIT_GREY
COUNTED_COLOUR = plots.GREEN
BAR_WIDTH = 0.36
VERDICT_STYLE = ("#ClassVerdicts { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 8px; }"
                 "#ClassVerdicts QLabel { background: transparent; }")


WIDE_PX = 820  # below this width the latency charts stack instead of standing side by side


def ms_text(value: float) -> str:
    """A latency in a few characters: "910", "1.5 s"."""
    return f"{value:.0f}" if value < 1000 else f"{value / 1000:.1f} s"


def _value_label(text: str, x: float, y: float) -> pg.TextItem:
    label = _text(text, plots.TITLE_TEXT, (0.5, 1.1))
    label.setPos(x, y)
    label.setZValue(10)  # over the bar beside it, not under
    return label


def _finite(x: float) -> bool:
    return isinstance(x, float | int) and math.isfinite(x)


def verdict_html(c: ClassResult, targets: ClassTargets | None = None) -> str:
    """One class's verdict as rich text: a coloured mark, its name, its requests and what it met (its targets)
    or missed."""
    s = c.stats
    if s.met is True:
        goals = f" ({targets.describe()})" if targets is not None and targets.any else ""
        mark, colour, words = "✓", theme.OK, f"targets met{goals}"
    elif s.missed:
        mark, colour = "✖", theme.ERROR
        words = ("missed " if s.met is False else "") + "; ".join(s.missed)
    else:
        mark, colour, words = "–", theme.DIM, "no targets"
    return (f"<span style='color:{colour}; font-weight:700'>{mark} {html.escape(s.name)}</span>"
            f"<span style='color:{theme.DIM}'> · {s.requests_ok}/{s.requests} ok · </span>"
            f"<span style='color:{colour}'>{html.escape(words)}</span>")


class ClassLatencyChart(ChartFrame):
    """One latency (TTFT or end-to-end) per class: average and P95 bars side by side, the class's targets as
    dashed lines across the bar they bound."""

    def __init__(self, what: str, key: str, parent: QWidget | None = None) -> None:
        super().__init__("", f"{what} (ms)", parent)
        self._what = what
        self._key = key  # "ttft" or "e2e"
        self.bars_drawn = 0
        self.targets_drawn = 0
        self.set_title(what, [])
        self.plot.setMinimumHeight(220)

    def set_point(self, point: PointClasses | None, targets: Sequence[tuple[float | None, float | None]] = ()) -> None:
        """Draw one point's classes (None: empty) with each class's targets (average, P95; None: not set)."""
        item = self.plot.getPlotItem()
        item.clear()
        self.bars_drawn = self.targets_drawn = 0
        classes = point.classes if point is not None else ()
        self.set_empty(not classes)
        top = 1.0
        for x, c in enumerate(classes):
            dist = c.stats.ttft_ms if self._key == "ttft" else c.stats.e2e_ms
            for offset, value, colour in ((-BAR_WIDTH / 2, dist.mean, AVG_COLOUR), (BAR_WIDTH / 2, dist.p95, P95_COLOUR)):
                if not _finite(value):
                    label = _text("no data", theme.DIM, (0.5, 1.0))
                    label.setPos(x + offset, 0)
                    item.addItem(label)
                    continue
                item.addItem(pg.BarGraphItem(x=[x + offset], height=[value], width=BAR_WIDTH * 0.92,
                                             brush=QColor(colour), pen=plots.pen(plots.PLOT_BACKGROUND, 1.0)))
                item.addItem(_value_label(ms_text(value), x + offset, value))
                self.bars_drawn += 1
                top = max(top, value)
        for x, (avg, p95) in enumerate(targets[:len(classes)]):
            for offset, goal in ((-BAR_WIDTH / 2, avg), (BAR_WIDTH / 2, p95)):
                if goal is None:
                    continue
                half = BAR_WIDTH * 0.6
                item.plot([x + offset - half, x + offset + half], [goal, goal],
                          pen=plots.pen(TARGET_COLOUR, 3.0, dashed=True))  # the figure is in the verdicts above
                self.targets_drawn += 1
                top = max(top, goal)
        item.getAxis("bottom").setTicks([[(x, c.stats.name) for x, c in enumerate(classes)], []])
        item.setXRange(-0.6, max(len(classes), 1) - 0.4, padding=0)
        item.setYRange(0, top * 1.25, padding=0)
        legend: list[tuple[str, str, bool]] = [("average", AVG_COLOUR, False), ("P95", P95_COLOUR, False)]
        if self.targets_drawn:
            legend.append(("target", TARGET_COLOUR, True))
        self.set_title(self._what, legend)


class PromptTokensChart(ChartFrame):
    """Per class, the prompt tokens the workload asked for beside those the server used (averages): a server
    that cut the prompts shows a green bar shorter than the grey one."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("", "prompt tokens", parent)
        self.bars_drawn = 0
        self.set_title("Prompt tokens: asked for and used by the server", [])
        self.plot.setMinimumHeight(200)

    def set_point(self, point: PointClasses | None) -> None:
        """Draw one point's classes (None: empty)."""
        item = self.plot.getPlotItem()
        item.clear()
        self.bars_drawn = 0
        classes = point.classes if point is not None else ()
        self.set_empty(not classes)
        top = 1.0
        for x, c in enumerate(classes):
            for offset, value, colour in ((-BAR_WIDTH / 2, c.requested_prompt_tokens, ASKED_COLOUR),
                                          (BAR_WIDTH / 2, c.delivered_prompt_tokens, COUNTED_COLOUR)):
                if not _finite(value):
                    label = _text("not known", theme.DIM, (0.5, 1.0))
                    label.setPos(x + offset, 0)
                    item.addItem(label)
                    continue
                item.addItem(pg.BarGraphItem(x=[x + offset], height=[value], width=BAR_WIDTH * 0.92,
                                             brush=QColor(colour), pen=plots.pen(plots.PLOT_BACKGROUND, 1.0)))
                item.addItem(_value_label(f"{value:,.0f}", x + offset, value))
                self.bars_drawn += 1
                top = max(top, value)
        item.getAxis("bottom").setTicks([[(x, c.stats.name) for x, c in enumerate(classes)], []])
        item.setXRange(-0.6, max(len(classes), 1) - 0.4, padding=0)
        item.setYRange(0, top * 1.25, padding=0)
        self.set_title("Prompt tokens: asked for and used by the server",
                       [("asked for", ASKED_COLOUR, False), ("used (evaluated + cached)", COUNTED_COLOUR, False)])


class ScenarioView(QWidget):
    """A scenario run's classes at one point (chosen above the charts when the sweep has several)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ScenarioView")
        self.points: list[PointClasses] = []
        self._targets: list[ClassTargets] = []
        self._names: list[str] = []
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(10)
        head = QHBoxLayout()
        self.heading = QLabel("Per class")
        self.heading.setStyleSheet("font-size: 13pt; font-weight: 600;")
        self.point_choice = QComboBox()
        self.point_choice.setObjectName("scenario_point")
        self.point_caption = QLabel("at point")
        head.addWidget(self.heading)
        head.addStretch(1)
        head.addWidget(self.point_caption)
        head.addWidget(self.point_choice)
        lay.addLayout(head)
        self.verdicts = QWidget()
        self.verdicts.setObjectName("ClassVerdicts")
        self.verdicts.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        self.verdicts.setStyleSheet(VERDICT_STYLE)
        self._verdict_lay = QVBoxLayout(self.verdicts)
        self._verdict_lay.setContentsMargins(12, 8, 12, 8)
        self._verdict_lay.setSpacing(4)
        self.verdict_labels: list[QLabel] = []
        lay.addWidget(self.verdicts)
        self._grid = QGridLayout()
        self._grid.setSpacing(12)
        self.ttft = ClassLatencyChart("Time to first token", "ttft")
        self.e2e = ClassLatencyChart("End to end", "e2e")
        self.prompts = PromptTokensChart()
        self._wide: bool | None = None
        self._arrange(True)
        lay.addLayout(self._grid)
        self._started: str | None = None
        self._chosen: int | None = None  # the point a person picked, kept while the same run is shown
        self.point_choice.currentIndexChanged.connect(self._show_point)
        self.point_choice.activated.connect(self._picked)
        self.setVisible(False)

    def set_run(self, run: SweepRun | None) -> None:
        """Show a run's classes (hidden for a run without a scenario)."""
        scenario = run.spec.workload.scenario if run is not None else None
        self.setVisible(scenario is not None)
        self.points = scenario_results(run) if run is not None else []
        self._names = [c.name for c in scenario.classes] if scenario is not None else []
        self._targets = [c.targets for c in scenario.classes] if scenario is not None else []
        started = run.started_at if run is not None else None
        if started != self._started:  # another run: the point the person chose was one of the last run's
            self._started, self._chosen = started, None
        self.point_choice.blockSignals(True)
        self.point_choice.clear()
        for p in self.points:
            self.point_choice.addItem(p.label or f"point {p.index + 1}", p.index)
        best = run.recommendation.index if run is not None and run.recommendation else None
        # The point chosen here, else the recommended one, else the last measured.
        wanted = self._chosen if self._chosen is not None and self.point_choice.findData(self._chosen) >= 0 else best
        index = self.point_choice.findData(wanted) if wanted is not None else -1
        self.point_choice.setCurrentIndex(index if index >= 0 else self.point_choice.count() - 1)
        self.point_choice.blockSignals(False)
        several = len(self.points) > 1
        self.point_choice.setVisible(several)
        self.point_caption.setVisible(several)
        self._show_point()

    def _arrange(self, wide: bool) -> None:
        """The latency charts side by side when there is room, else one under the other."""
        if wide == self._wide:
            return
        self._wide = wide
        for chart in (self.ttft, self.e2e, self.prompts):
            self._grid.removeWidget(chart)
        self._grid.addWidget(self.ttft, 0, 0)
        self._grid.addWidget(self.e2e, 0 if wide else 1, 1 if wide else 0)
        self._grid.addWidget(self.prompts, 1 if wide else 2, 0, 1, 2 if wide else 1)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt's spelling
        """Rearrange the charts for the width given."""
        super().resizeEvent(event)
        self._arrange(event.size().width() >= WIDE_PX)

    def _picked(self) -> None:
        self._chosen = self.point_choice.currentData()

    def current_point(self) -> PointClasses | None:
        """The point shown (None: nothing measured yet)."""
        index = self.point_choice.currentData()
        return next((p for p in self.points if p.index == index), None)

    def _show_point(self) -> None:
        point = self.current_point()
        for label in self.verdict_labels:
            self._verdict_lay.removeWidget(label)
            label.deleteLater()
        self.verdict_labels = []
        if point is None:
            label = QLabel("No point measured yet: each class's verdict and charts appear here.")
            label.setObjectName("Dim")
            self.verdict_labels.append(label)
        else:
            goals = {name: t for name, t in zip(self._names, self._targets)}
            for c in point.classes:
                label = QLabel(verdict_html(c, goals.get(c.stats.name)))
                label.setTextFormat(Qt.TextFormat.RichText)
                label.setWordWrap(True)
                label.setObjectName(f"verdict_{c.stats.name}")
                self.verdict_labels.append(label)
        for label in self.verdict_labels:
            self._verdict_lay.addWidget(label)
        for chart in (self.ttft, self.e2e, self.prompts):
            chart.setVisible(point is not None)  # no empty axes while the first point runs
        self.ttft.set_point(point, [(t.ttft_avg_ms, t.ttft_p95_ms) for t in self._targets])
        self.e2e.set_point(point, [(t.e2e_avg_ms, t.e2e_p95_ms) for t in self._targets])
        self.prompts.set_point(point)


__all__ = ["ClassLatencyChart", "PromptTokensChart", "ScenarioView", "verdict_html"]
