"""The History tab: every sweep kept, newest first; open one, compare two, export, delete."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QMessageBox, QPushButton, QScrollArea,
                               QSplitter, QStackedWidget, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from app.core.bench.outcome import RunStatus
from app.core.bench.run_summary import RunSummary
from app.core.ports.stores import BenchHistoryStore
from app.core.bench.run import SweepRun
from app.core.bench.sweep import server_text
from app.core.saved_format import SavedFormat
from app.ui.widgets import theme
from app.ui.pages.bench.notice import ExportNotice
from app.ui.pages.bench.results import RunView
from app.ui.pages.bench.worker import Background
from app.ui.pages.bench.history_compare import CompareView
from app.ui.widgets.forms import InlineMessage, left_aligned

# Runs the list shows whole at the least (the window's height permitting more).
VISIBLE_ROWS = 4
COLUMNS = ("Started", "Model", "GPU", "Server", "Points", "Best tokens/s", "Recommended", "Events", "Status")
STATUS_COLOURS = {RunStatus.FINISHED: theme.OK, RunStatus.CANCELLED: theme.WARNING, RunStatus.INTERRUPTED: theme.ERROR,
                  RunStatus.RUNNING: theme.ACCENT, RunStatus.UNREADABLE: theme.ERROR}


def _scrolled(widget: QWidget) -> QScrollArea:
    area = QScrollArea()
    area.setWidgetResizable(True)
    area.setWidget(widget)
    return area


def table_height(table: QTableWidget, rows: int) -> int:
    """Pixels a table needs to show its header and `rows` whole rows (no half-hidden last row)."""
    header = table.horizontalHeader().sizeHint().height()
    scrollbar = table.horizontalScrollBar().sizeHint().height()
    return header + rows * table.verticalHeader().defaultSectionSize() + scrollbar + 2 * table.frameWidth()


def events_words(s: RunSummary) -> str:
    """The Events cell of a run: "—" without events, else how many, marked when they made a point not stable
    (the tooltip says how many points)."""
    if not s.events:
        return "—"
    return f"⚠ {s.events}" if s.spoiled_points else str(s.events)


class HistoryView(QWidget):
    """Lists runs from the benchmark history; all database work happens off the GUI thread."""

    apply_requested = Signal(object, object)  # PointResult, its SweepRun
    loaded = Signal(object)  # the SweepRun (or pair) now shown; for tests and status lines
    problems_found = Signal(list)  # what opening the history found (each names its file), for the window's banner

    def __init__(self, history: BenchHistoryStore, background: Background, parent: QWidget | None = None, *,
                 server_labels: Mapping[str, str], saved_format: SavedFormat) -> None:
        """server_labels and saved_format: as RunView's."""
        super().__init__(parent)
        self._labels = server_labels
        self._history = history
        self._bg = background
        self.summaries: list[RunSummary] = []
        self.found_problems: list[str] = []  # what opening the history found, once it was checked
        self.confirm_delete: Callable[[int], bool] = self._ask_delete
        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        splitter = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("HistoryTable")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        # At least VISIBLE_ROWS whole runs in view, however small the window (a 1280x720 projector):
        # the run below shrinks and scrolls instead.
        self.table.setMinimumHeight(table_height(self.table, VISIBLE_ROWS))
        self.open_button = QPushButton("Open")
        self.open_button.setObjectName("OpenRun")
        self.open_button.setProperty("accent", True)
        self.compare_button = QPushButton("Compare two")
        self.compare_button.setObjectName("CompareRuns")
        self.delete_button = QPushButton("Delete")
        self.delete_button.setObjectName("DeleteRun")
        self.delete_button.setProperty("danger", True)
        self.refresh_button = QPushButton("Refresh")
        self.message = InlineMessage(prominent=True)
        # What opening the file found (moved aside, read-only, locked…): stays while the tab is used.
        self.notice = InlineMessage(prominent=True)
        self.notice.setObjectName("HistoryNotice")
        self.export_notice = ExportNotice()
        tl.addWidget(self.notice)
        tl.addWidget(self.table, 1)
        tl.addWidget(left_aligned(self.open_button, self.compare_button, self.delete_button, self.refresh_button))
        tl.addWidget(self.message)
        tl.addWidget(self.export_notice)
        self.stack = QStackedWidget()
        self.placeholder = QLabel("Select a run and Open it, or select two and Compare them. Every sweep is kept "
                                  f"here, in {history.path}.")
        self.placeholder.setObjectName("Dim")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.run_view = RunView(server_labels=server_labels, saved_format=saved_format)
        self.compare_view = CompareView(server_labels=server_labels)
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(_scrolled(self.run_view))
        self.stack.addWidget(_scrolled(self.compare_view))
        splitter.addWidget(top)
        splitter.addWidget(self.stack)
        splitter.setCollapsible(0, False)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([top.minimumSizeHint().height(), 640])
        root.addWidget(splitter)
        self.open_button.clicked.connect(self.open_selected)
        self.compare_button.clicked.connect(self.compare_selected)
        self.delete_button.clicked.connect(self.delete_selected)
        self.refresh_button.clicked.connect(self.refresh)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.itemDoubleClicked.connect(lambda _item: self.open_selected())
        self.run_view.apply_requested.connect(self.apply_requested)
        self.run_view.rejudged.connect(self._keep_judgement)
        self.run_view.exported.connect(self._exported)
        self.run_view.export_failed.connect(self._export_failed)
        self._update_buttons()
        self.check()

    def check(self) -> None:
        """Open the history off the GUI thread (it may be checked, moved aside, converted); show what it found."""
        self._bg.call(self._history.open, on_done=self._opened, on_error=lambda text: self._opened([text], True))

    def _opened(self, problems: list[str], failed: bool = False) -> None:
        if not problems:
            return
        # Kept as well as emitted: a fast check can finish before anyone is connected to problems_found.
        self.found_problems = list(problems)
        text = "\n".join(problems)
        if failed:
            self.notice.show_error(text)
        else:
            self.notice.show_warning(text)
        self.problems_found.emit(problems)

    # ---- actions ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Read the list of runs again."""
        self._bg.call(self._history.list_runs, on_done=self._show_list, on_error=self.message.show_error)

    def selected_ids(self) -> list[int]:
        """Run ids of the selected rows, in table order."""
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.summaries[r].run_id for r in rows if r < len(self.summaries)]

    def open_selected(self) -> None:
        """Show the (first) selected run."""
        ids = self.selected_ids()
        if ids:
            self.open_run(ids[0])

    def open_run(self, run_id: int) -> None:
        """Load and show one run."""
        self._bg.call(self._history.load, run_id, on_done=self._show_run, on_error=self.message.show_error)

    def show_run(self, run: SweepRun) -> None:
        """Show a run that is already in memory (e.g. the one just measured)."""
        self._show_run(run)

    def compare_selected(self) -> None:
        """Show the two selected runs side by side (oldest as A)."""
        ids = self.selected_ids()
        if len(ids) != 2:
            self.message.show_warning("Select exactly two runs to compare (Ctrl+click the second).")
            return
        newer, older = ids
        self._bg.call(lambda: (self._history.load(older), self._history.load(newer)),
                      on_done=self._show_pair, on_error=self.message.show_error)

    def delete_selected(self) -> None:
        """Delete the selected runs after confirmation."""
        ids = self.selected_ids()
        if not ids or not self.confirm_delete(len(ids)):
            return

        def delete() -> None:
            for run_id in ids:
                self._history.delete(run_id)

        shown = self.run_view.run.run_id if self.run_view.run else None
        if shown in ids:
            self.stack.setCurrentIndex(0)
        self._bg.call(delete, on_done=lambda _r: self.refresh(), on_error=self.message.show_error)

    # ---- results ---------------------------------------------------------------------------------
    def _ask_delete(self, count: int) -> bool:
        answer = QMessageBox.question(self, "Delete runs", f"Delete {count} run{'s' if count != 1 else ''} "
                                      "from the history? This cannot be undone.")
        return answer == QMessageBox.StandardButton.Yes

    def _show_list(self, summaries: list[RunSummary]) -> None:
        if self.notice.severity == "error":  # the file could not be opened then (e.g. locked); now it could
            self.notice.clear_message()
        self.summaries = summaries
        self.table.setRowCount(len(summaries))
        for row, s in enumerate(summaries):
            best = "—" if s.best_tokens_per_s is None else f"{s.best_tokens_per_s:.1f}"
            cells = (s.started_at[:16].replace("T", " "), s.model, s.gpu_name or "no GPU readings",
                     server_text(s.backend_kind, s.server_version, self._labels),
                     f"{s.points_done}/{s.points_planned}", best, s.recommended or "—", events_words(s), s.status)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == len(cells) - 1:
                    item.setForeground(QBrush(QColor(STATUS_COLOURS.get(s.status, theme.TEXT))))
                    if s.status is RunStatus.INTERRUPTED:
                        item.setToolTip("The program ended during this sweep; the points it finished are kept.")
                    elif s.status is RunStatus.UNREADABLE:
                        item.setToolTip("This run's row in the history file is damaged; the other runs are fine.")
                if col in (4, 5):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if col == COLUMNS.index("Events") and s.events:
                    item.setForeground(QBrush(QColor(theme.WARNING if s.spoiled_points else theme.DIM)))
                    item.setToolTip(f"The server did {s.events} thing{'s' if s.events != 1 else ''} without saying "
                                    "so while this run's points ran" + (
                                        f"; {s.spoiled_points} point{'s' if s.spoiled_points != 1 else ''} not stable "
                                        "for it (left out of the recommendation)" if s.spoiled_points else "")
                                    + ". Open the run for the list.")
                self.table.setItem(row, col, item)
        self._update_buttons()

    def _keep_judgement(self, run: SweepRun) -> None:
        """Keep the run as re-judged, so that the list shows its recommendation under these targets."""
        if run.run_id is not None:
            self._bg.call(self._history.keep_judgement, run.run_id, run, on_done=lambda _none: self.refresh(),
                          on_error=self.message.show_error)

    def _exported(self, path: str) -> None:
        self.message.clear_message()
        self.export_notice.show_written(path)

    def _export_failed(self, text: str) -> None:
        self.export_notice.clear_notice()
        self.message.show_error(text)

    def _show_run(self, run: SweepRun) -> None:
        self.message.clear_message()
        self.export_notice.clear_notice()
        self.run_view.set_run(run)
        self.stack.setCurrentIndex(1)
        self.loaded.emit(run)

    def _show_pair(self, pair: tuple[SweepRun, SweepRun]) -> None:
        self.message.clear_message()
        self.compare_view.set_runs(*pair)
        self.stack.setCurrentIndex(2)
        self.loaded.emit(pair)

    def _update_buttons(self) -> None:
        n = len(self.table.selectionModel().selectedRows()) if self.table.selectionModel() else 0
        self.open_button.setEnabled(n >= 1)
        self.compare_button.setEnabled(n == 2)
        self.delete_button.setEnabled(n >= 1)


__all__ = ["HistoryView"]
