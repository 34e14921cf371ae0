"""One sweep's results: the articles' table (plus TPOT and tokens/J), the charts, the recommendation
with its Apply buttons, and exports (CSV, JSON, Markdown, chart PNG). Used live and for history."""

from __future__ import annotations

import functools
import html
import json
import math
from pathlib import Path
from collections.abc import Mapping, Sequence

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics, QImage, QPainter, QPixmap
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QFrame, QGridLayout, QHBoxLayout, QHeaderView,
                               QLabel, QMenu, QPushButton, QSizePolicy, QTableWidget, QTableWidgetItem, QToolButton,
                               QVBoxLayout, QWidget)

from app.core.bench.outcome import ERROR_WORDS, FAILURE_WORDS, FailureKind, PointStatus, RunStatus
from app.core.bench.run_events import point_mark, tooltip_text
from app.core.watch.events import Severity, worst
from app.core.bench.truncation import length_words
from app.core.bench.failed_prompts import FailedPrompt, failed_prompts, failures_at, quoted
from app.core.bench.vram import card_cell, error_words, peak_cell
from app.core.bench.sweep import PointResult
from app.core.bench.scenario_run import scenario_json
from app.core.bench.balance import Balance
from app.core.bench.run import (SweepRun, behind_balancer, chart_title, reports_server, run_to_csv, run_to_json,
                                run_to_markdown, server_cells)
from app.core.saved_format import SavedFormat
from app.ui.widgets import theme
from app.core.bench.capacity import Capacity
from app.ui.pages.bench.capacity_view import CapacityView
from app.ui.pages.bench.compare_view import CompareView
from app.ui.pages.bench.charts import SweepCharts
from app.ui.pages.bench.scenario_charts import ScenarioView
from app.ui.pages.bench.targets import TargetFields
from app.ui.pages.bench.waits_chart import WaitsView
from app.ui.widgets.compare_chart import comparison_image
from app.ui.widgets.load_chart import load_chart_image

RECOMMENDED_BACKGROUND = "#1d3b52"
SEVERITY_COLOURS = {Severity.INFO: theme.DIM, Severity.WARNING: theme.WARNING, Severity.SEVERE: theme.ERROR}
STATUS_COLOURS = {PointStatus.OK: theme.OK, PointStatus.UNSTABLE: theme.WARNING, PointStatus.FAILED: theme.ERROR,
                  PointStatus.SKIPPED: theme.DIM, PointStatus.CANCELLED: theme.DIM}
EXPORT_KINDS = {"csv": "CSV (*.csv)", "json": "JSON (*.json)", "md": "Markdown (*.md)", "png": "PNG image (*.png)"}
CARD_STYLE = ("#RecommendationCard { background: #16222c; border: 1px solid #2f6f9a; border-radius: 8px; }"
              "#RecommendationCard QLabel { background: transparent; }")


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def shows_clients(results: Sequence[PointResult]) -> bool:
    """True when a Clients column says something Parallel does not."""
    return any(r.point.parallel is None or r.point.concurrency != r.point.parallel for r in results)


# What the server's own columns mean (header tooltips).
SERVER_COLUMN_TIPS = {
    "Slots\nbusy": "The most of the server's slots seen decoding at once during the measured window, of all its "
                   "slots (its /slots).",
    "Waiting": "The most requests seen waiting for a free slot (the server's requests-deferred counter).",
    "Server\ntok/s": "The server's own generated-tokens counter over the measured window, per second — other "
                     "clients of the server count too.",
    "Peak VRAM\n(GiB)": "The server's own peak GPU memory over the measured window: what its processes held, as the "
                         "driver attributes it (what the estimate prices). n/a where the driver does not say what "
                         "each process holds, or the server runs on another machine. Hover a cell for the estimate.",
    "Card VRAM\n(GiB)": "The whole card's peak use over the measured window, as nvidia-smi shows it: other programs "
                         "(a desktop, another model) count too.",
    "Events": "What the server did without saying so while the point ran (a prompt cut short, layers on the CPU, "
              "a cold load, the GPU slowing down…): how many, and the worst. A point that saw one that skews its "
              "figures is not stable and is never recommended. Hover a cell for the list.",
}


def shows_gpu(results: Sequence[PointResult]) -> bool:
    """True unless a sweep's every point went without GPU readings (no NVIDIA GPU): then Peak VRAM and
    Tokens/J would be columns of dashes (the run's notes say why)."""
    return not results or any(r.gpu.read or r.tokens_per_joule is not None for r in results)


def shows_events(results: Sequence[PointResult]) -> bool:
    """True when a point saw events: then an Events column says how many and the worst."""
    return any(r.events for r in results)


def columns_for(varying: Sequence[str], clients: bool = True, server: bool = False, gpu: bool = True,
                events: bool = False, balance: bool = False) -> list[str]:
    """Table columns: the articles' ones, with the other varied settings after Parallel (and Clients), and
    the server's own slots busy, requests waiting and tokens/s before "Stable?" when it reported them (and
    the server's events when a point saw any)."""
    cols = ["Parallel"] + (["Clients"] if clients else [])
    cols += [name for axis, name in (("kv_cache_types", "KV cache"), ("context_lengths", "Context"),
                                     ("flash_attention", "Flash attn")) if axis in varying]
    cols += ["Tokens/s", "TTFT avg\n(ms)", "TTFT p95\n(ms)", "TPOT p95\n(ms)"]
    if gpu:
        cols += ["Peak VRAM\n(GiB)", "Card VRAM\n(GiB)", "Tokens/J"]
    if server:
        cols += ["Slots\nbusy", "Waiting", "Server\ntok/s"]
    if balance:
        cols += [BALANCE_COLUMN]
    if events:
        cols += ["Events"]
    return cols + ["Stable?"]


def compact_stable(r: PointResult) -> str:
    """The "Stable?" cell in a few characters (the full reason is the cell's tooltip)."""
    if r.spoiled and (r.status is PointStatus.OK or r.failure is FailureKind.SPOILED):
        kinds = r.spoiled_by
        return f"⚠ {kinds[0].label}" + (f" +{len(kinds) - 1}" if len(kinds) > 1 else "")
    if r.status is PointStatus.OK:
        return "✓"
    if r.status is PointStatus.UNSTABLE and r.stats is not None:
        if r.contention.contended and not r.stats.requests_failed:
            return f"⚠ {r.contention.kind.value.upper()} contended"
        return f"⚠ {r.stats.requests_failed}/{r.stats.requests} failed"
    if r.status is PointStatus.SKIPPED:
        return FAILURE_WORDS[r.failure].cell if r.failure is not None else "skipped"
    if r.status is PointStatus.CANCELLED:
        return "cancelled"
    return f"✖ {FAILURE_WORDS[r.failure].cell if r.failure is not None else 'failed'}"


def events_cell(r: PointResult) -> str:
    """The Events cell: "" without events, else the count and the worst severity ("2 · severe"), coloured by it
    (whether they make the point not stable is Stable?'s to say, beside it)."""
    return point_mark(r)


TOOLTIP_WIDTH_PX = 460  # a tooltip of sentences wraps at this width, not at Qt's narrow default
VRAM_TOOLTIP_WIDTH_PX = 380


def events_tooltip(r: PointResult, limit: int = 8) -> str:
    """The Events cell's tooltip: whether they make the point not stable, then each event (its time, severity,
    kind and what happened) with what it was read from, dimmed; rich text that wraps at TOOLTIP_WIDTH_PX."""
    if not r.events:
        return ""
    lines = tooltip_text(r, limit).splitlines()
    body = [f"<p><b>{html.escape(lines[0])}</b></p>"]
    for e in r.events[:limit]:
        evidence = "".join(f"<br><span style='color:{theme.DIM}'>{html.escape(ev.source.label)}: "
                           f"{html.escape(ev.text)}</span>" for ev in e.evidence[:1])
        colour = SEVERITY_COLOURS.get(e.severity, theme.TEXT)
        body.append(f"<p><span style='color:{colour}'>{e.clock} {e.severity.label}</span> — "
                    f"<b>{html.escape(e.kind.label)}</b>: {html.escape(e.summary)}{evidence}</p>")
    if len(r.events) > limit:
        body.append(f"<p>… and {len(r.events) - limit} more</p>")
    return f"<qt><table width='{TOOLTIP_WIDTH_PX}'><tr><td>{''.join(body)}</td></tr></table></qt>"


BALANCE_COLUMN = "Behind the\nbalancer"


def balance_cell(r: PointResult) -> str:
    """Each backend's share behind the balancer ("a 75% / b 25%"), with ⚠ where the spread warns."""
    if r.balance is None:
        return "—"
    return ("⚠ " if r.balance.warns else "") + r.balance.cell()


def balance_tooltip(balance: Balance) -> str:
    """The figures behind the shares: each backend's requests and tokens, their source, and the verdict."""
    text = "<br>".join(html.escape(x, quote=False) for x in balance.lines())
    return f"<qt><table width='{VRAM_TOOLTIP_WIDTH_PX}'><tr><td>{text}</td></tr></table></qt>"


def vram_tooltip(r: PointResult) -> str:
    """The Peak VRAM cell's tooltip: the server's own peak against the estimate, and the card's."""
    words = error_words(r)
    lines = [words[:1].upper() + words[1:]]
    if r.gpu.server_peak_mib is None and r.gpu.server_unknown is not None:
        lines.append(f"The server's own memory is not known here: {r.gpu.server_unknown.words}.")
    if r.gpu.card_peak_mib is not None:
        lines.append(f"The whole card peaked at {r.gpu.card_peak_mib / 1024:.1f} GiB, other programs included.")
    shown = [x for x in lines if x]
    text = "<br>".join(html.escape(x, quote=False) for x in shown)
    return f"<qt><table width='{VRAM_TOOLTIP_WIDTH_PX}'><tr><td>{text}</td></tr></table></qt>" if shown else ""


def failures_tooltip(r: PointResult, prompts: Sequence[FailedPrompt], limit: int = 8) -> str:
    """The failed requests of one point for the Stable? cell's tooltip (rich text): each request's prompt, how it
    failed, the tokens that came, and at how many points it failed; "" when none failed."""
    failed = failures_at(prompts, r.point.index)
    if not failed:
        return ""
    rows = [f"<p><b>Failed prompts ({len(failed)})</b></p>"]
    for p, f in failed[:limit]:
        everywhere = " — <b>at every point</b>" if p.every_point else ""
        rows.append(f"<p>request {f.request}: {html.escape(p.key)} {html.escape(quoted(p.preview), quote=False)}<br>"
                    f"<span style='color:{theme.DIM}'>{html.escape(ERROR_WORDS.get(f.kind, f.kind), quote=False)}, "
                    f"after {f.tokens} tokens · failed at {p.points_words()}{everywhere}</span></p>")
    if len(failed) > limit:
        rows.append(f"<p>… and {len(failed) - limit} more</p>")
    return "".join(rows)


def cells_for(r: PointResult, varying: Sequence[str], clients: bool = True, server: bool = False,
              gpu: bool = True, events: bool = False, balance: bool = False) -> list[str]:
    """The text of one row."""
    s = r.stats if r.ran else None
    setting = r.point.settings
    cells = ["—" if r.point.parallel is None else str(r.point.parallel)]
    if clients:
        cells.append("no cap" if r.point.concurrency == 0 else str(r.point.concurrency))
    if "kv_cache_types" in varying:
        cells.append(setting.kv_cache_type)
    if "context_lengths" in varying:
        cells.append(str(setting.context_length or "default"))
    if "flash_attention" in varying:
        cells.append(setting.flash_attention)
    cells += [_fmt(s.output_tokens_per_s if s else None, ".1f"), _fmt(s.ttft_ms.mean if s else None, ".0f"),
              _fmt(s.ttft_ms.p95 if s else None, ".0f"), _fmt(s.tpot_ms.p95 if s else None, ".1f")]
    if gpu:
        cells += [peak_cell(r), card_cell(r), _fmt(r.tokens_per_joule, ".2f")]
    if server:
        cells += server_cells(r)
    if balance:
        cells.append(balance_cell(r))
    if events:
        cells.append(events_cell(r))
    return cells + [compact_stable(r)]


class ResultsTable(QTableWidget):
    """A row per point; the recommended one highlighted. Selecting a row offers it for Apply."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(0, 0, parent)
        self.setObjectName("ResultsTable")
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().setVisible(False)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        # Tighter than the app's default table so the articles' nine columns fit beside the editor.
        self.setStyleSheet("QHeaderView::section { padding: 4px 5px; } QTableWidget::item { padding: 0 4px; }")
        self._indexes: list[int] = []
        self.set_results([], ("parallel",), None)  # empty, but with the columns a sweep will fill

    def set_results(self, results: Sequence[PointResult], varying: Sequence[str], recommended: int | None,
                    prompts: Sequence[FailedPrompt] = ()) -> None:
        """Fill the table; `prompts`: the run's failed requests, told in each point's Stable? tooltip."""
        clients = shows_clients(results)
        server, gpu, events = reports_server(results), shows_gpu(results), shows_events(results)
        balance = behind_balancer(results)
        columns = columns_for(varying, clients, server, gpu, events, balance)
        self.setColumnCount(len(columns))
        self.setHorizontalHeaderLabels(columns)
        for col, name in enumerate(columns):
            header_item = self.horizontalHeaderItem(col)
            if header_item is not None and name in SERVER_COLUMN_TIPS:
                header_item.setToolTip(SERVER_COLUMN_TIPS[name])
        self.setRowCount(len(results))
        self._indexes = [r.point.index for r in results]
        bold = QFont(self.font())
        bold.setBold(True)
        for row, r in enumerate(results):
            best = r.point.index == recommended
            for col, text in enumerate(cells_for(r, varying, clients, server, gpu, events, balance)):
                item = QTableWidgetItem(("★ " + text) if best and col == 0 else text)
                last = col == len(columns) - 1
                if columns[col] == "Events" and r.events:
                    severity = worst(r.events)
                    item.setForeground(QBrush(QColor(SEVERITY_COLOURS.get(severity, theme.TEXT)
                                                     if severity is not None else theme.TEXT)))
                    item.setToolTip(events_tooltip(r))
                if columns[col] == "Peak VRAM\n(GiB)":
                    item.setToolTip(vram_tooltip(r))
                if columns[col] == BALANCE_COLUMN and r.balance is not None:
                    item.setToolTip(balance_tooltip(r.balance))
                    if r.balance.warns:
                        item.setForeground(QBrush(QColor(theme.WARNING)))
                item.setTextAlignment(Qt.AlignmentFlag.AlignVCenter | (
                    Qt.AlignmentFlag.AlignLeft if last else Qt.AlignmentFlag.AlignRight))
                if last:
                    item.setForeground(QBrush(QColor(STATUS_COLOURS.get(r.status, theme.TEXT))))
                    contention = r.contention.text() if r.contention.contended else ""
                    lengths = length_words(r.stats) if r.stats is not None else ""
                    lines = dict.fromkeys(x for x in (r.stable_text(), r.detail, contention, lengths) if x)
                    failed = failures_tooltip(r, prompts)
                    # Rich text, so Qt wraps a long reason instead of drawing one screen-wide line.
                    text = "<br>".join(html.escape(x) for x in lines) + failed
                    item.setToolTip(f"<qt><table width='{TOOLTIP_WIDTH_PX}'><tr><td>{text}</td></tr></table></qt>"
                                    if failed else f"<qt>{text}</qt>" if text else "")
                if best:
                    item.setBackground(QBrush(QColor(RECOMMENDED_BACKGROUND)))
                    item.setFont(bold)
                self.setItem(row, col, item)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(len(columns) - 1, QHeaderView.ResizeMode.Stretch)
        self.resizeRowsToContents()
        rows = sum(self.rowHeight(i) for i in range(self.rowCount()))
        height = self.horizontalHeader().sizeHint().height() + rows + 2 * self.frameWidth() + 2
        self.setFixedHeight(min(max(height, 80), 420))

    def selected_index(self) -> int | None:
        """The point index of the selected row, or None."""
        rows = self.selectionModel().selectedRows() if self.selectionModel() else []
        return self._indexes[rows[0].row()] if rows else None


class RecommendationCard(QFrame):
    """The recommendation paragraph, its flags, and Apply."""

    apply_recommended = Signal()
    apply_selected = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("RecommendationCard")
        self.setStyleSheet(CARD_STYLE)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 10, 14, 12)
        lay.setSpacing(8)
        top = QHBoxLayout()
        self.title = QLabel("Recommendation")
        self.title.setStyleSheet("font-size: 13pt; font-weight: 700; color: #9fd8ff;")
        # The flags wrap on a line of their own: long ones never widen the card past the space it has.
        self.flags = QLabel()
        self.flags.setObjectName("RecommendationFlags")
        self.flags.setTextFormat(Qt.TextFormat.RichText)
        self.flags.setWordWrap(True)
        self.flags.hide()
        top.addWidget(self.title)
        top.addStretch(1)
        lay.addLayout(top)
        lay.addWidget(self.flags)
        self.text = QLabel()
        self.text.setObjectName("RecommendationText")
        self.text.setWordWrap(True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text.setStyleSheet("font-size: 11.5pt;")
        lay.addWidget(self.text)
        self.targets = TargetFields(prefix="rejudge_")
        self.rejudge_button = QPushButton("Re-judge")
        self.rejudge_button.setObjectName("Rejudge")
        self.rejudge_button.setToolTip("Recompute goodput and the recommendation from the recorded requests "
                                       "against these targets; nothing is re-run.")
        # Two short rows, so that the card fits beside the sweep editor on a 1280 px projector.
        judge = QGridLayout()
        judge.setHorizontalSpacing(8)
        judge.setVerticalSpacing(6)
        fields = (("TTFT p95 ≤", self.targets.ttft, "Time to first token, queueing included"),
                  ("TPOT p95 ≤", self.targets.tpot, "Time per output token after the first"),
                  ("success ≥", self.targets.success, "Share of requests that must succeed"))
        for i, (label, field, tip) in enumerate(fields):
            text = QLabel(label)
            text.setToolTip(tip)
            field.setMaximumWidth(120)
            judge.addWidget(text, i // 2, (i % 2) * 2)
            judge.addWidget(field, i // 2, (i % 2) * 2 + 1)
        judge.addWidget(self.rejudge_button, 1, 2, 1, 2, Qt.AlignmentFlag.AlignLeft)
        judge.setColumnStretch(4, 1)
        lay.addLayout(judge)
        self.apply_button = QPushButton("Apply")
        self.apply_button.setObjectName("ApplyRecommended")
        self.apply_button.setProperty("accent", True)
        self.apply_selected_button = QPushButton("Apply selected row")
        self.apply_selected_button.setObjectName("ApplySelected")
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.apply_selected_button)
        buttons.addWidget(self.apply_button)
        lay.addLayout(buttons)
        self.apply_button.clicked.connect(self.apply_recommended)
        self.apply_selected_button.clicked.connect(self.apply_selected)
        self.apply_button.setEnabled(False)
        self.apply_selected_button.setEnabled(False)

    def set_text(self, text: str, flags: Sequence[tuple[str, str]] = ()) -> None:
        """Show the paragraph (its first sentence in bold) and small coloured flags (text, colour)."""
        head, dot, rest = text.partition(". ")
        self.text.setText(f"<b>{html.escape(head + dot.strip())}</b> {html.escape(rest)}" if dot else html.escape(text))
        # Each flag holds together (no break inside it); the line breaks between flags.
        self.flags.setText(" &nbsp;".join(
            f"<span style='background:{c}; color:#101115; font-weight:700; border-radius:8px; white-space:nowrap;'>"
            f"&nbsp;{html.escape(t)}&nbsp;</span>" for t, c in flags))
        self.flags.setVisible(bool(flags))


class RunView(QWidget):
    """A sweep's table, charts and recommendation; emits apply_requested(PointResult, SweepRun)."""

    apply_requested = Signal(object, object)  # PointResult, the SweepRun it belongs to
    rejudged = Signal(object)  # the SweepRun as judged against the card's targets, to be kept
    exported = Signal(str)  # the path written
    export_failed = Signal(str)

    def __init__(self, parent: QWidget | None = None, show_apply: bool = True, *, server_labels: Mapping[str, str],
                 saved_format: SavedFormat) -> None:
        """server_labels: what people call each server kind (see PageContext.server_labels); saved_format: the
        names of the run documents' format, for the JSON export."""
        super().__init__(parent)
        self._labels = server_labels
        self._saved_format = saved_format
        self.run: SweepRun | None = None  # as shown (re-judged, perhaps)
        self.measured: SweepRun | None = None  # as it ran
        self._show_apply = show_apply
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(10)
        head = QHBoxLayout()
        self.heading = QLabel("No results yet")
        self.heading.setObjectName("RunHeading")
        self.heading.setStyleSheet("font-size: 13pt; font-weight: 600;")
        self.heading.setWordWrap(True)
        self.facts = QLabel()
        self.facts.setObjectName("Dim")
        self.facts.setWordWrap(True)
        self.export_button = QToolButton()
        self.export_button.setText("Export ▾")
        self.export_button.setObjectName("ExportButton")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        for kind, label in (("csv", "Table as CSV…"), ("json", "Everything as JSON…"),
                            ("md", "Report as Markdown…"), ("png", "Charts as PNG…")):
            menu.addAction(label, functools.partial(self._export_dialog, kind))
        self.export_button.setMenu(menu)
        self.export_button.setEnabled(False)
        head.addWidget(self.heading, 1)
        head.addWidget(self.export_button, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(head)
        lay.addWidget(self.facts)
        self.table = ResultsTable()
        lay.addWidget(self.table)
        self.card = RecommendationCard()
        self.card.setVisible(False)
        lay.addWidget(self.card)
        self.compare = CompareView()
        lay.addWidget(self.compare)
        self.capacity = CapacityView()
        lay.addWidget(self.capacity)
        self.classes = ScenarioView()
        lay.addWidget(self.classes)
        self.charts = SweepCharts()
        lay.addWidget(self.charts, 1)
        self.waits = WaitsView()
        lay.addWidget(self.waits)
        self.card.apply_recommended.connect(self._apply_recommended)
        self.card.apply_selected.connect(self._apply_selected)
        self.card.rejudge_button.clicked.connect(self.rejudge)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        if not show_apply:
            self.card.apply_button.hide()
            self.card.apply_selected_button.hide()

    def set_run(self, run: SweepRun | None) -> None:
        """Show a run (None: empty), judged against the targets it ran with."""
        self.measured = run
        if run is not None:
            self.card.targets.set_targets(run.spec.targets)
        self._show(run)

    def show_capacity(self, capacity: Capacity) -> None:
        """The rate sweep as it stands while it runs (the run carries it once it ends)."""
        if self.run is not None:
            self.capacity.set_capacity(capacity)

    def rejudge(self) -> None:
        """Judge the shown run against the card's targets (from its recorded requests; nothing re-runs)."""
        if self.measured is None or self.run is None:
            return
        targets = self.card.targets.targets()
        if targets == self.run.spec.targets:
            return  # judged so already
        judged = self.measured if targets == self.measured.spec.targets else self.measured.with_targets(targets)
        self._show(judged)
        self.rejudged.emit(judged)

    def _show(self, run: SweepRun | None) -> None:
        self.run = run
        if run is None:
            self.heading.setText("No results yet")
            self.facts.clear()
            self.table.set_results([], ("parallel",), None)
            self.charts.set_results([], ("parallel",), None, None)
            self.classes.set_run(None)
            self.capacity.set_capacity(None)
            self.compare.set_comparison(None)
            self.waits.set_run(None)
            self.card.setVisible(False)
            self.export_button.setEnabled(False)
            return
        rec = run.recommendation
        index = rec.index if rec else None
        self.heading.setText(run.title)
        f = run.fingerprint
        targets = run.spec.targets.describe()
        if run.ran_with is not None:
            targets = f"re-judged: {targets} (ran with {run.ran_with.describe()})"
        bits = [f.server_text(self._labels), f.model_quantization,
                run.spec.workload.describe(per_point_clients=True), targets]
        if run.status not in (RunStatus.FINISHED, RunStatus.RUNNING):
            bits.append(run.status)
        self.facts.setText(" · ".join(b for b in bits if b))
        self.table.set_results(run.results, run.varying, index, failed_prompts(run.results, run.spec.workload))
        self.charts.set_results(run.results, run.varying, index, run.spec.targets.ttft_p95_ms)
        self.classes.set_run(run)
        self.capacity.set_capacity(run.capacity)
        self.compare.set_comparison(run.comparison, chart_title(run, self._labels))
        self.waits.set_run(run)
        self.export_button.setEnabled(bool(run.results))
        self._show_recommendation(run)

    def _show_recommendation(self, run: SweepRun) -> None:
        rec = run.recommendation
        if rec is None:
            self.card.setVisible(False)
            return
        self.card.setVisible(True)
        flags = []
        if rec.index is None:
            flags.append(("nothing measured alone" if rec.contended and not any(
                r.ran and not r.contention.contended for r in run.results) else "no point met the targets",
                theme.WARNING))
        if rec.contended:
            n = len(rec.contended)
            flags.append((f"{n} contended point{'s' if n != 1 else ''} left out", theme.WARNING))
        if rec.plateau:
            flags.append(("plateau", theme.WARNING))
        if rec.edge == "upper":
            flags.append(("edge of range", theme.WARNING))
        findings = [f for p in failed_prompts(run.results, run.spec.workload) if (f := p.finding())]
        if findings:
            n = len(findings)
            flags.append((f"{n} prompt{'s' if n != 1 else ''} failed at every point", theme.WARNING))
        self.card.set_text(rec.text, flags)
        self.card.flags.setToolTip("<qt>" + "<br>".join(html.escape(f) for f in findings) + "</qt>" if findings else "")
        best = run.result_for(rec.index)
        can_apply = self._show_apply and best is not None and run.fingerprint.managed
        self.card.apply_button.setEnabled(can_apply)
        self.card.apply_button.setText(f"Apply {best.point.label(run.varying)}" if best is not None else "Apply")
        if best is not None and not run.fingerprint.managed:
            self.card.apply_button.setToolTip("The server was attached: set this concurrency in your client "
                                              "(e.g. the web UI's concurrent requests) instead.")
        self._selection_changed()

    def _selection_changed(self) -> None:
        run = self.run
        chosen = run.result_for(self.table.selected_index()) if run else None
        ok = bool(self._show_apply and run and run.fingerprint.managed and chosen is not None and chosen.ran)
        self.card.apply_selected_button.setEnabled(ok)

    def _apply_recommended(self) -> None:
        if self.run and self.run.recommendation:
            best = self.run.result_for(self.run.recommendation.index)
            if best is not None:
                self.apply_requested.emit(best, self.run)

    def _apply_selected(self) -> None:
        if self.run:
            chosen = self.run.result_for(self.table.selected_index())
            if chosen is not None and chosen.ran:
                self.apply_requested.emit(chosen, self.run)

    # ---- export -------------------------------------------------------------------------------
    def _charts_image(self) -> QImage:
        """The charts as shown (where requests waited too), with latency against load below them when the run
        has a capacity (drawn off screen, as the CLI's --chart draws it)."""
        images = [self.charts.grab().toImage()]
        if self.waits.chart.bars:
            images.append(self.waits.chart.grab().toImage())
        width = max(600, round(images[0].width() / (images[0].devicePixelRatio() or 1.0)))
        if self.run is not None and self.run.comparison is not None:  # drawn as the CLI's --compare-report
            images.append(comparison_image(self.run.comparison, self.run.title, width, round(width * 0.56)))
        if self.run is not None and self.run.capacity is not None:
            images.append(load_chart_image(self.run.capacity, self.run.title, width, round(width * 0.6)))
        return stacked(images) if len(images) > 1 else images[0]

    def _export_dialog(self, kind: str) -> None:
        if self.run is None:
            return
        stem = (self.run.fingerprint.model or "sweep").replace(":", "-").replace("/", "-")
        suggested = f"{stem}-{self.run.started_at[:16].replace(':', '').replace('T', '-')}.{kind}"
        path, _ = QFileDialog.getSaveFileName(self, "Export sweep", suggested, EXPORT_KINDS[kind])
        if path:
            self.export_to(kind, path)

    def export_to(self, kind: str, path: str) -> bool:
        """Write the run as csv/json/md, or the charts as png; emits exported or export_failed."""
        run = self.run
        if run is None:
            return False
        try:
            if kind == "png":
                image = titled_image(self._charts_image(), chart_title(run, self._labels))
                if not QPixmap.fromImage(image).save(path, "PNG"):
                    raise OSError(f"Qt could not write a PNG to {path}")
            else:
                text = {"csv": lambda: run_to_csv(run),
                        "json": lambda: json.dumps(_run_json(run, self._saved_format), indent=1,
                                                   ensure_ascii=False) + "\n",
                        "md": lambda: run_to_markdown(run, self._labels)}[kind]()
                Path(path).write_text(text, encoding="utf-8")
        except OSError as exc:
            self.export_failed.emit(f"Could not export to {path}: {getattr(exc, 'strerror', None) or exc}")
            return False
        self.exported.emit(path)
        return True


def stacked(images: Sequence[QImage]) -> QImage:
    """The images one under the other, as wide as the widest (the page's background around narrower ones)."""
    ratio = max((i.devicePixelRatio() for i in images), default=1.0) or 1.0
    width = max(i.width() for i in images)
    out = QImage(width, sum(i.height() for i in images), QImage.Format.Format_ARGB32)
    out.setDevicePixelRatio(ratio)
    out.fill(QColor(theme.BACKGROUND))
    painter = QPainter(out)
    try:
        y = 0.0
        for image in images:
            painter.drawImage(QPointF(0, y), image)
            y += image.height() / (image.devicePixelRatio() or 1.0)
    finally:
        painter.end()
    return out


def _run_json(run: SweepRun, saved_format: SavedFormat) -> dict[str, object]:
    """The run document, with a scenario's per-class results as the CLI writes them."""
    data = run_to_json(run, saved_format)
    scenario_json(run, data)
    return data


def titled_image(image: QImage, title: str) -> QImage:
    """`image` under a band with `title` in it (an exported chart says what it shows without its file name)."""
    font = QFont()
    font.setPointSizeF(13)
    font.setBold(True)
    ratio = image.devicePixelRatio() or 1.0
    band = round(QFontMetrics(font).height() * 2 * ratio)  # device pixels
    out = QImage(image.width(), image.height() + band, QImage.Format.Format_ARGB32)
    out.setDevicePixelRatio(ratio)
    out.fill(QColor(theme.BACKGROUND))
    painter = QPainter(out)
    try:
        painter.setFont(font)
        painter.setPen(QColor(theme.TEXT))
        width = image.width() / ratio
        painter.drawText(QRectF(12, 0, width - 24, band / ratio), Qt.AlignmentFlag.AlignVCenter
                         | Qt.AlignmentFlag.AlignLeft, title)
        painter.drawImage(QPointF(0, band / ratio), image)
    finally:
        painter.end()
    return out


__all__ = ["RecommendationCard", "ResultsTable", "RunView", "cells_for", "columns_for", "shows_clients"]
