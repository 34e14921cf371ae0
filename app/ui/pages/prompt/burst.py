"""Burst results: N copies of one prompt at once — aggregate tiles, a timeline of every reply
(waiting, then generating) where batching is plain to see, and a row of figures per reply."""

from __future__ import annotations

import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from app.services.prompts import ReplyOutcome
from app.core.console.conversation import BurstReply
from app.core.console.reply_stats import BurstSummary, ReplyStats, fmt_count, fmt_ms, fmt_rate, summarize_burst
from app.core.console.reply_words import ReplyWords
from app.core.watch.events import WatchEvent
from app.ui.pages.prompt.events import ReplyEvents
from app.ui.widgets import plots
from app.ui.pages.dashboard.tiles import NO_DATA, TILE_STYLE, StatTile
from app.ui.widgets.tile_grid import TileGrid

def columns(words: ReplyWords) -> tuple[str, ...]:
    """The table's headers, the server's count under its own name."""
    return ("#", "state", "TTFT", "first\nanswer", "thinking\ntokens", "answer\ntokens", words.count_header,
            "decode", "total", "end")


def column_tips(words: ReplyWords) -> tuple[str, ...]:
    """The headers' tooltips: where each figure comes from, in the server's words."""
    return ("reply number", "waiting, streaming, done, failed or stopped", "time to first token",
            "time to the first answer token", "thinking tokens (stream)", "answer tokens (stream)",
            f"{words.output_count} (server)", words.decode_source, f"{words.total_source} (server)",
            f"{words.stop_field}, or the server's error")


WAIT_COLOUR = "#4a4d5a"


class BurstView(QWidget):
    """Shows one burst: live while it runs, aggregate figures when it is over."""

    def __init__(self, parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self.setStyleSheet(TILE_STYLE)
        self.tiles = {
            "aggregate": StatTile("Aggregate decode", plots.TOKENS_COLOR),
            "per_reply": StatTile("Per reply", plots.GREEN),
            "ttft": StatTile("TTFT min – max", plots.CYAN),
            "replies": StatTile("Replies", plots.LIMIT_GREY),
        }
        for tile in self.tiles.values():
            tile.setMinimumWidth(150)
        tiles = TileGrid(list(self.tiles.values()), spacing=8)  # one row, or two where it is narrow

        self.plot = pg.PlotWidget(background=plots.PLOT_BACKGROUND)
        self.plot.setObjectName("BurstTimeline")
        item = self.plot.getPlotItem()
        item.setTitle(plots.title_with_legend("Timeline per reply", [("waiting", WAIT_COLOUR, False),
                                                                       ("generating", plots.CYAN, False)]),
                      size=f"{plots.TITLE_FONT_PT}pt")
        item.hideButtons()
        item.setMenuEnabled(False)
        item.setMouseEnabled(x=False, y=False)
        plots.style_axis(item.getAxis("bottom"), "seconds since sent")
        plots.style_axis(item.getAxis("left"), "reply #")
        item.getViewBox().invertY(True)
        self._wait_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=0.7, brush=WAIT_COLOUR, pen=None)
        self._gen_bars = pg.BarGraphItem(x0=[], x1=[], y=[], height=0.7, brush=plots.CYAN, pen=None)
        item.addItem(self._wait_bars)
        item.addItem(self._gen_bars)
        self.plot.setMinimumHeight(120)  # room for the page's prompt and buttons at 720 px high

        headers = columns(words)
        self.table = QTableWidget(0, len(headers))
        self.table.setObjectName("BurstTable")
        self.table.setHorizontalHeaderLabels(headers)
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        # Shared widths: ResizeToContents would re-measure every row on each cell update (~1 ms each).
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        for col, width in ((0, 40), (1, 84)):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Fixed)
            self.table.setColumnWidth(col, width)
        for col, tip in enumerate(column_tips(words)):
            header_item = self.table.horizontalHeaderItem(col)
            if header_item is not None:  # setHorizontalHeaderLabels made one per column
                header_item.setToolTip(tip)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.note = QLabel("Burst sends N copies of the prompt at once. With one parallel slot (parallel requests = 1) the server "
                           "answers them one after another (a staircase below); with more slots they overlap "
                           "and the aggregate rate rises while each reply slows down.")
        self.note.setObjectName("Dim")
        self.note.setWordWrap(True)
        self.summary_label = QLabel()
        self.summary_label.setObjectName("BurstSummary")
        self.summary_label.setStyleSheet("color: #ffffff; font-size: 12pt; font-weight: 600;")
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary_label.hide()

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setSizes([260, 260])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(tiles)
        layout.addWidget(self.summary_label)
        layout.addWidget(self.note)
        self.events = ReplyEvents()  # what the server did without saying so during the burst's replies
        layout.addWidget(self.events)
        layout.addWidget(split, 1)
        self._reply_events: dict[int, tuple[WatchEvent, ...]] = {}
        self._stats: dict[int, ReplyStats] = {}
        self._states: dict[int, str] = {}
        self._errors: dict[int, str] = {}
        self.summary: BurstSummary | None = None
        self.reset(0)

    def reset(self, copies: int) -> None:
        """Prepare for a burst of `copies` replies."""
        self._stats, self._states, self._errors = {}, {i: "waiting" for i in range(copies)}, {}
        self._reply_events = {}
        self.events.show_events(())
        self.summary = None
        self._started_s = time.monotonic()
        self._over = False
        self.summary_label.hide()
        self.note.show()
        self.table.setRowCount(copies)
        for row in range(copies):
            for col in range(self.table.columnCount()):
                cell = QTableWidgetItem("")
                cell.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                                      if 1 < col < 9 else Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, cell)
            self._write_row(row)
        for key in self.tiles:
            self.tiles[key].set_text(NO_DATA, " ")
        if copies:
            self.tiles["replies"].set_text(f"0 / {copies}", "sent at once")
        self._draw()

    def update_live(self, live: dict[int, ReplyStats]) -> None:
        """Fresh counts for replies that are streaming."""
        for index, stats in live.items():
            self._stats[index] = stats
            if self._states.get(index) == "waiting" and stats.streamed_tokens:
                self._states[index] = "streaming"
            self._write_row(index)
        self._draw()

    def finish_reply(self, outcome: ReplyOutcome) -> None:
        """One reply is over."""
        self._stats[outcome.index] = outcome.stats
        if outcome.error is not None:
            self._states[outcome.index] = "failed"
            self._errors[outcome.index] = outcome.error.message
        else:
            self._states[outcome.index] = "stopped" if outcome.stopped else "done"
        self._write_row(outcome.index)
        if outcome.events:
            self._reply_events[outcome.index] = outcome.events
            every = [e for seen in self._reply_events.values() for e in seen]
            self.events.show_events(every, per_reply=list(self._reply_events.values()))
        done = sum(1 for s in self._states.values() if s == "done")
        self.tiles["replies"].set_text(f"{done} / {len(self._states)}", "finished so far")
        self._draw()

    def finish(self, stopped: bool) -> BurstSummary:
        """The burst is over: aggregate tiles."""
        self._over = True
        for index, state in self._states.items():
            if state in ("waiting", "streaming"):
                self._states[index] = "stopped" if stopped else "lost"
                self._write_row(index)
        replies = [self._stats.get(i) for i in range(len(self._states))]
        summary = self.summary = summarize_burst(
            replies, failed=sum(1 for s in self._states.values() if s == "failed"),
            stopped=sum(1 for s in self._states.values() if s in ("stopped", "lost")))
        self.tiles["aggregate"].set_text(fmt_rate(summary.aggregate_tokens_per_s),
                                         f"{fmt_count(summary.output_tokens)} tokens in {fmt_ms(summary.wall_ms)}")
        speedup = f"×{summary.speedup:.2f} aggregate" if summary.speedup else "mean of each reply's rate"
        self.tiles["per_reply"].set_text(fmt_rate(summary.mean_decode_tokens_per_s), speedup)
        if summary.ttft_min_ms is not None:
            self.tiles["ttft"].set_text(f"{fmt_ms(summary.ttft_min_ms)} – {fmt_ms(summary.ttft_max_ms)}",
                                        f"spread {fmt_ms(summary.ttft_spread_ms)}")
        self.summary_label.setText(
            f"{summary.completed} of {summary.requested} replies · {fmt_count(summary.output_tokens)} tokens in "
            f"{fmt_ms(summary.wall_ms)} · TTFT median {fmt_ms(summary.ttft_median_ms)}, spread "
            f"{fmt_ms(summary.ttft_spread_ms)}" + (f" · aggregate ×{summary.speedup:.2f} one reply's rate"
                                                   if summary.speedup else ""))
        # The summary takes the explanation's place (its tooltip keeps it): the timeline keeps its room.
        self.summary_label.setToolTip(self.note.text())
        self.summary_label.show()
        self.note.hide()
        self.tiles["replies"].set_text(f"{summary.completed} / {summary.requested}",
                                       f"failed {summary.failed} · stopped {summary.stopped}")
        self._draw()
        return summary

    def _write_row(self, row: int) -> None:
        stats = self._stats.get(row)
        state = self._states.get(row, "")
        values = [str(row + 1), state]
        if stats is None:
            values += [""] * 7
        else:
            values += [fmt_ms(stats.ttft_ms), fmt_ms(stats.first_answer_ms), fmt_count(stats.thinking_tokens),
                       fmt_count(stats.answer_tokens), fmt_count(stats.output_tokens), fmt_rate(stats.decode_tokens_per_s),
                       fmt_ms(stats.total_ms)]
        values.append(self._errors.get(row) or (stats.done_reason if stats and stats.done_reason else ""))
        for col, text in enumerate(values):
            cell = self.table.item(row, col)
            if cell is not None and cell.text() != text:
                cell.setText(text)
                if col == 9 and row in self._errors:
                    cell.setForeground(pg.mkColor(plots.RED))

    def _draw(self) -> None:
        # A reply with no token yet has been waiting since the burst was sent.
        waited = 0.0 if self._over else time.monotonic() - self._started_s
        rows = sorted(self._states)
        y = np.array(rows, dtype=float) + 1  # numbered from 1, as in the table
        ttft_s: list[float] = []
        end_s: list[float] = []
        for i in rows:
            stats = self._stats.get(i)
            if stats is None:
                ttft_s.append(waited)
                end_s.append(waited)
                continue
            ttft_s.append((stats.ttft_ms if stats.ttft_ms is not None else stats.wall_ms) / 1e3)
            end_s.append(stats.wall_ms / 1e3)
        ttft, end = np.array(ttft_s), np.array(end_s)
        self._wait_bars.setOpts(x0=np.zeros_like(ttft), x1=ttft, y=y, height=0.7)
        self._gen_bars.setOpts(x0=ttft, x1=np.maximum(end, ttft), y=y, height=0.7)
        n = max(len(self._states), 1)
        right = max(float(end.max()) if len(end) else 0.0, 0.1)
        self.plot.getPlotItem().setRange(xRange=(0, right * 1.04), yRange=(0.4, n + 0.6), padding=0)

    def state(self, row: int) -> str:
        """The state word of one reply (waiting, streaming, done, failed, stopped)."""
        return self._states.get(row, "")

    def records(self) -> list[BurstReply]:
        """Every copy as a document record (for export), in order."""
        return [BurstReply(i, self._states[i], self._stats.get(i), self._errors.get(i, ""))
                for i in sorted(self._states)]


__all__ = ["BurstView"]
