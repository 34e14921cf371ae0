"""A/B: the same prompt with thinking and without, side by side, and what thinking cost."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QGridLayout, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from app.core.console.reply_words import ReplyWords
from app.services.prompts import PromptRequest, ReplyOutcome
from app.core.console.conversation import TurnRecord
from app.core.console.reply_stats import ReplyStats, ThinkingCost, fmt_count, fmt_ms, fmt_rate, thinking_cost
from app.ui.pages.prompt.reply import WAITING_TEXT, ReplyView, mode_badge

AB_STYLE = """
#AbColumn { background: #1b1c22; border: 1px solid #2c2e36; border-radius: 10px; }
#AbColumn QLabel { background: transparent; }
#AbTitle { color: #ffffff; font-size: 14pt; font-weight: 700; }
#AbKey { color: #a9acb8; font-size: 10.5pt; }
#AbValue { color: #ffffff; font-size: 15pt; font-weight: 700; }
#CostStrip { background: #2a2412; border: 1px solid #f0b429; border-radius: 10px; }
#CostStrip QLabel { background: transparent; }
#CostTitle { color: #ffe08a; font-size: 12pt; font-weight: 700; letter-spacing: 1px; }
#CostValue { color: #ffffff; font-size: 20pt; font-weight: 800; }
#CostKey { color: #e6d7a8; font-size: 10.5pt; }
"""
QUEUED_TEXT = "Queued: sent once the reply with thinking is done."
FIGURES = (("ttft", "first token"), ("first_answer", "first answer"), ("thinking", "thinking tok"),
           ("eval", "eval_count"), ("decode", "decode"), ("total", "total"))


class AbColumn(QFrame):
    """One side: which mode, the streaming reply, and its six key figures."""

    def __init__(self, title: str, think: bool | str, parent: QWidget | None = None, *,
                 words: ReplyWords) -> None:
        super().__init__(parent)
        self.setObjectName("AbColumn")
        self.think = think
        head = QHBoxLayout()
        label = QLabel(title)
        label.setObjectName("AbTitle")
        head.addWidget(label)
        head.addStretch(1)
        self.badge_row = head
        self._badge = mode_badge(think)
        head.addWidget(self._badge)
        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        grid.setVerticalSpacing(0)
        self.values: dict[str, QLabel] = {}
        for i, (key, caption) in enumerate(FIGURES):
            caption = words.output_count if key == "eval" else caption
            value = QLabel("—")
            value.setObjectName("AbValue")
            name = QLabel(caption)
            name.setObjectName("AbKey")
            grid.addWidget(value, (i // 3) * 2, i % 3)
            grid.addWidget(name, (i // 3) * 2 + 1, i % 3)
            self.values[key] = value
        self._words = words  # the server's names for a reply's figures
        self.reply = ReplyView(show_figures=False, words=words, empty_text="Nothing sent yet.")  # one line: placeholders do not wrap
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.reply)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._scroll_area = scroll
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 12, 14, 12)
        layout.setSpacing(10)
        layout.addLayout(head)
        layout.addLayout(grid)
        layout.addWidget(scroll, 1)
        bar = scroll.verticalScrollBar()
        bar.rangeChanged.connect(lambda _lo, hi: bar.setValue(hi))

    def set_mode(self, think: bool | str) -> None:
        """Show which thinking value this side sends."""
        self.think = think
        self.badge_row.removeWidget(self._badge)
        self._badge.deleteLater()
        self._badge = mode_badge(think)
        self.badge_row.addWidget(self._badge)

    def show_stats(self, stats: ReplyStats) -> None:
        """Fill the six figures."""
        v = self.values
        v["ttft"].setText(fmt_ms(stats.ttft_ms))
        v["first_answer"].setText(fmt_ms(stats.first_answer_ms))
        v["thinking"].setText(fmt_count(stats.thinking_tokens))
        v["eval"].setText(fmt_count(stats.output_tokens))
        v["decode"].setText(fmt_rate(stats.decode_tokens_per_s))
        v["total"].setText(fmt_ms(stats.total_ms if stats.total_ms is not None else stats.wall_ms))

    def reset(self, waiting_text: str = WAITING_TEXT) -> None:
        """Empty, for a new comparison whose request is on its way (or queued: `waiting_text`)."""
        self.reply = ReplyView(show_figures=False, words=self._words)
        self.reply.set_waiting(waiting_text)
        self._scroll_area.setWidget(self.reply)  # the scroll area deletes the previous reply
        for value in self.values.values():
            value.setText("—")


class AbView(QWidget):
    """Thinking on the left, non-thinking on the right, the cost of thinking underneath."""

    def __init__(self, parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self.setStyleSheet(AB_STYLE)
        self.left = AbColumn("With thinking", True, words=words)
        self.right = AbColumn("Without thinking", False, words=words)
        columns = QHBoxLayout()
        columns.setSpacing(10)
        columns.addWidget(self.left, 1)
        columns.addWidget(self.right, 1)
        self.cost_strip = QFrame()
        self.cost_strip.setObjectName("CostStrip")
        strip = QGridLayout(self.cost_strip)
        strip.setContentsMargins(16, 10, 16, 10)
        strip.setHorizontalSpacing(28)
        strip.setVerticalSpacing(0)
        title = QLabel("COST OF\nTHINKING")
        title.setObjectName("CostTitle")
        strip.addWidget(title, 0, 0, 2, 1)
        self.cost_values: dict[str, QLabel] = {}
        for column, (key, caption) in enumerate((("tokens", "extra tokens"), ("first_answer", "extra wait for the answer"),
                                                 ("total", "extra total time")), start=1):
            value = QLabel("—")
            value.setObjectName("CostValue")
            name = QLabel(caption)
            name.setObjectName("CostKey")
            strip.addWidget(value, 0, column)
            strip.addWidget(name, 1, column)
            self.cost_values[key] = value
        strip.setColumnStretch(4, 1)
        self.cost_note = QLabel("Sent one after the other, so neither waits for the other; load time is left out.")
        self.cost_note.setObjectName("CostKey")
        self.cost_note.setWordWrap(True)
        strip.addWidget(self.cost_note, 2, 1, 1, 4)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        layout.addLayout(columns, 1)
        layout.addWidget(self.cost_strip)
        self.cost: ThinkingCost | None = None

    def records(self, request: PromptRequest) -> tuple[TurnRecord, TurnRecord]:
        """Both sides as document records (for export), given the request the comparison sent."""
        system = request.system or ""
        return (self.left.reply.record(request.prompt, request.model, self.left.think, system),
                self.right.reply.record(request.prompt, request.model, self.right.think, system))

    def column(self, index: int) -> AbColumn:
        """0: with thinking, 1: without."""
        return self.left if index == 0 else self.right

    def reset(self, think: bool | str) -> None:
        """Empty both sides for a new comparison."""
        self.left.reset()
        self.right.reset(QUEUED_TEXT)  # sent once the reply with thinking is over
        self.left.set_mode(think)
        self.cost = None
        for value in self.cost_values.values():
            value.setText("—")

    def finish_reply(self, outcome: ReplyOutcome) -> None:
        """One side is over."""
        column = self.column(outcome.index)
        column.reply.finish(outcome)
        column.show_stats(outcome.stats)
        if outcome.index == 0:
            self.right.reply.set_waiting()  # its request goes out now

    def show_cost(self, with_thinking: ReplyStats, without: ReplyStats) -> ThinkingCost:
        """Fill the cost strip from both replies."""
        cost = self.cost = thinking_cost(with_thinking, without)
        ratio = f"  (×{cost.token_ratio:.1f})" if cost.token_ratio else ""
        self.cost_values["tokens"].setText(
            (f"{cost.extra_tokens:+,d}" if cost.extra_tokens is not None else "—") + ratio)
        self.cost_values["first_answer"].setText(
            f"{cost.extra_first_answer_ms / 1e3:+.2f} s" if cost.extra_first_answer_ms is not None else "—")
        self.cost_values["total"].setText(
            f"{cost.extra_total_ms / 1e3:+.2f} s" if cost.extra_total_ms is not None else "—")
        return cost


__all__ = ["AbView"]
