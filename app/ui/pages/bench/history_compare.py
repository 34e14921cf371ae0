"""Two sweeps side by side: what differs between them (machine, server, model, settings, workload),
both tables, and both curves on shared axes."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.core.bench.run import SweepRun
from app.core.bench.sweep import PointResult
from app.ui.widgets import plots
from app.ui.pages.bench.charts import MARKER_PX, RECOMMENDED_COLOUR, axis_of, speed_latency
from app.ui.pages.bench.results import ResultsTable

RUN_COLOURS = (plots.CYAN, plots.ORANGE)


def differences(a: SweepRun, b: SweepRun, labels: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(what, in A, in B) for every fingerprint, setting, workload or target that differs (`labels`: what people
    call each server kind)."""
    fa, fb = a.fingerprint, b.fingerprint
    rows: list[tuple[str, Any, Any]] = [
        ("GPU", fa.gpu_name or "none", fb.gpu_name or "none"), ("Driver", fa.gpu_driver, fb.gpu_driver),
        ("Server", fa.server_text(labels), fb.server_text(labels)), ("Model", fa.model, fb.model),
        ("Model digest", fa.model_digest[:12], fb.model_digest[:12]),
        ("Quantization", fa.model_quantization, fb.model_quantization),
        ("Server", "managed" if fa.managed else "attached", "managed" if fb.managed else "attached"),
        ("Workload", a.spec.workload.describe(True), b.spec.workload.describe(True)),
        ("Targets", a.spec.targets.describe(), b.spec.targets.describe()),
    ]
    for key in sorted(set(fa.base_settings) | set(fb.base_settings)):
        if key in ("port", "host"):
            continue
        rows.append((f"setting {key}", fa.base_settings.get(key, "—"), fb.base_settings.get(key, "—")))
    return [(what, str(x), str(y)) for what, x, y in rows if x != y]


class CompareView(QWidget):
    """Run A against run B."""

    def __init__(self, parent: QWidget | None = None, *, server_labels: Mapping[str, str]) -> None:
        super().__init__(parent)
        self._labels = server_labels
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(10)
        self.diff = QLabel()
        self.diff.setObjectName("CompareDiff")
        self.diff.setWordWrap(True)
        self.diff.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.diff)
        grid = QGridLayout()
        grid.setHorizontalSpacing(12)
        self.titles = [QLabel(), QLabel()]
        self.tables = [ResultsTable(), ResultsTable()]
        self.summaries = [QLabel(), QLabel()]
        for col in range(2):
            self.titles[col].setStyleSheet(f"font-weight: 700; font-size: 12pt; color: {RUN_COLOURS[col]};")
            self.titles[col].setWordWrap(True)  # long titles wrap instead of widening the page
            grid.setColumnStretch(col, 1)
            self.summaries[col].setWordWrap(True)
            grid.addWidget(self.titles[col], 0, col)
            grid.addWidget(self.tables[col], 1, col)
            grid.addWidget(self.summaries[col], 2, col)
        lay.addLayout(grid)
        charts = QHBoxLayout()
        self.throughput = self._plot("Output tokens/s", "tokens/s")
        self.latency = self._plot("TTFT p95 vs throughput", "TTFT p95 (ms)", "output tokens/s")
        charts.addWidget(self.throughput, 1)
        charts.addWidget(self.latency, 1)
        lay.addLayout(charts, 1)
        self.runs: tuple[SweepRun, SweepRun] | None = None

    @staticmethod
    def _plot(title: str, y_label: str, x_label: str = "") -> pg.PlotWidget:
        return plots.make_static_plot(y_label, x_label, title=title, min_height=220, grid=True)

    def set_runs(self, a: SweepRun, b: SweepRun) -> None:
        """Show the two runs."""
        self.runs = (a, b)
        diffs = differences(a, b, self._labels)
        if diffs:
            rows = "".join(f"<tr><td style='padding-right:14px; color:#9fd8ff'>{html.escape(w)}</td>"
                           f"<td style='padding-right:14px; color:{RUN_COLOURS[0]}'>{html.escape(x)}</td>"
                           f"<td style='color:{RUN_COLOURS[1]}'>{html.escape(y)}</td></tr>" for w, x, y in diffs)
            self.diff.setText(f"<b>What differs</b><table>{rows}</table>")
        else:
            self.diff.setText("<b>Same machine, server, model, settings and workload</b> — differences below are "
                              "run-to-run noise.")
        for col, run in enumerate((a, b)):
            rec = run.recommendation
            self.titles[col].setText(("A: " if col == 0 else "B: ") + run.title)
            self.tables[col].set_results(run.results, run.varying, rec.index if rec else None)
            best = run.result_for(rec.index) if rec else None
            self.summaries[col].setText(
                f"Recommended {best.point.label(run.varying)}: {best.output_tokens_per_s:.1f} tokens/s"
                if best is not None and best.output_tokens_per_s is not None else "No recommendation.")
        self._draw(a, b)

    def _draw(self, a: SweepRun, b: SweepRun) -> None:
        t_item, l_item = self.throughput.getPlotItem(), self.latency.getPlotItem()
        t_item.clear()
        l_item.clear()
        axis = axis_of(a.varying) if axis_of(a.varying) == axis_of(b.varying) else "parallel"
        values = sorted({(r.point.parallel or 0) if axis == "parallel" else r.point.concurrency
                         for run in (a, b) for r in run.results})
        position = {v: i for i, v in enumerate(values)}
        t_item.getAxis("bottom").setTicks([[(i, str(v)) for v, i in position.items()], []])
        plots.style_axis(t_item.getAxis("bottom"), "parallel requests" if axis == "parallel" else "concurrent clients")
        legend = []
        for col, run in enumerate((a, b)):
            colour = RUN_COLOURS[col]
            ran = sorted((r for r in run.results if r.ran and r.output_tokens_per_s is not None),
                         key=lambda r: (r.point.parallel or 0) if axis == "parallel" else r.point.concurrency)
            def key(r: PointResult) -> int:
                return (r.point.parallel or 0) if axis == "parallel" else r.point.concurrency

            xs = [position[key(r)] for r in ran]
            ys = [r.output_tokens_per_s for r in ran]
            pen = plots.pen(colour, 3.0)
            t_item.plot(xs, ys, pen=pen, symbol="o", symbolSize=MARKER_PX, symbolBrush=QColor(colour))
            l_item.plot([speed_latency(r)[0] for r in ran], [speed_latency(r)[1] for r in ran], pen=None,
                        symbol="o", symbolSize=MARKER_PX, symbolBrush=QColor(colour))
            rec = run.recommendation
            best = run.result_for(rec.index) if rec else None
            if best is not None and best.ran and best.output_tokens_per_s is not None:
                t_item.addItem(pg.ScatterPlotItem([position[key(best)]], [best.output_tokens_per_s], symbol="o",
                                                  size=MARKER_PX + 14, brush=None, pen=plots.pen(RECOMMENDED_COLOUR, 3.0)))
            legend.append(("A" if col == 0 else "B", colour, False))
        for item, title in ((t_item, "Output tokens/s"), (l_item, "TTFT p95 vs throughput")):
            item.setTitle(plots.title_with_legend(title, legend), size=f"{plots.TITLE_FONT_PT}pt")
        t_item.setXRange(-0.5, max(len(values) - 0.5, 0.5), padding=0)


__all__ = ["CompareView", "differences"]
