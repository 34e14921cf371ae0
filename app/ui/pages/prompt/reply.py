"""How a reply looks while it streams: a dimmed, collapsible thinking trace above the answer,
then the reply's figures or the server's error, and the conversation that stacks the turns."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QResizeEvent, QTextCursor, QTextDocument, QTextFormat, QTextOption
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QScrollArea, QSizePolicy,
                               QTextEdit, QToolButton, QVBoxLayout, QWidget)

from app.services.prompts import ReplyOutcome
from app.core.console.conversation import TurnRecord
from app.core.console.reply_stats import ReplyStats, figures_line, fmt_ms, mode_text
from app.core.console.reply_words import ReplyWords
from app.ui.pages.prompt.events import ReplyEvents
from app.ui.widgets import theme
from app.ui.widgets.forms import InlineMessage

THINKING_MAX_HEIGHT_PX = 200
WAITING_TEXT = "Waiting for the first token…"  # only while a request is in flight
CODE_BACKGROUND = "#0f1014"
REPLY_STYLE = f"""
#ReplyAnswer {{ background: transparent; border: none; color: {theme.TEXT}; font-size: 13pt; }}
#ThinkingText {{ background: #17181d; border: none; border-left: 3px solid #3a3d49; color: {theme.DIM};
                 font-size: 11pt; font-style: italic; padding-left: 6px; }}
#ThinkingToggle {{ background: transparent; border: none; color: {theme.DIM}; font-size: 11pt; font-weight: 600;
                   padding: 2px 0px; }}
#ThinkingToggle:hover {{ color: {theme.TEXT}; }}
#ReplyFigures {{ color: #a9acb8; font-size: 10.5pt; }}
#ReplyNote {{ color: {theme.WARNING}; font-size: 11pt; }}
#Turn {{ background: #1b1c22; border: 1px solid #2c2e36; border-radius: 10px; }}
#Turn QLabel {{ background: transparent; }}
#TurnPrompt {{ color: #f2f3f5; font-size: 12pt; }}
#TurnMeta {{ color: #8b8e99; font-size: 10pt; font-weight: 600; }}
#ModeBadge {{ border-radius: 9px; padding: 1px 10px; font-size: 10pt; font-weight: 700; color: #101115; }}
"""


def mode_badge(think: bool | str | None) -> QLabel:
    """A coloured pill naming the thinking mode."""
    badge = QLabel(mode_text(think))
    badge.setObjectName("ModeBadge")
    colour = theme.WARNING if think not in (False, None) else theme.ACCENT
    badge.setStyleSheet(f"background: {colour};")
    return badge


class GrowingText(QTextEdit):
    """Read-only text as tall as its content (the page scrolls, not it), up to `max_height_px`,
    beyond which it scrolls itself and follows the newest line unless the user scrolled up."""

    def __init__(self, parent: QWidget | None = None, max_height_px: int | None = None) -> None:
        super().__init__(parent)
        self._max_height_px = max_height_px
        self.setReadOnly(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded if max_height_px
                                        else Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(lambda _size: self._fit())
        self._fit()

    def append_text(self, text: str) -> None:
        """Add text at the end without moving a user's selection."""
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 2
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        if at_end:
            bar.setValue(bar.maximum())

    def _fit(self) -> None:
        height = max(int(self.document().size().height()) + 2 * self.frameWidth() + 2, 24)
        if self._max_height_px:
            height = min(height, self._max_height_px)
        if height != self.height():
            self.setFixedHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit()


class ThinkingSection(QWidget):
    """The thinking trace: a toggle that says how much thinking there was, over dimmed text."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.toggle = QToolButton()
        self.toggle.setObjectName("ThinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setChecked(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.toggle.setCursor(Qt.CursorShape.PointingHandCursor)
        self.text = GrowingText(max_height_px=THINKING_MAX_HEIGHT_PX)
        self.text.setObjectName("ThinkingText")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.text)
        self._summary = ""
        self.toggle.toggled.connect(self._set_expanded)
        self.set_summary(0, None, live=True)
        self.hide()

    def _set_expanded(self, expanded: bool) -> None:
        self.text.setVisible(expanded)
        self._show_summary()

    @property
    def expanded(self) -> bool:
        """True when the trace is shown."""
        return self.toggle.isChecked()

    def set_expanded(self, expanded: bool) -> None:
        """Show or fold the trace."""
        self.toggle.setChecked(expanded)

    def append(self, text: str) -> None:
        """Add thinking text, keeping the newest line in view."""
        self.show()
        self.text.append_text(text)

    def set_summary(self, tokens: int, thinking_ms: float | None, live: bool) -> None:
        """The toggle's words: 'Thinking… 120 tokens' while it streams, 'Thought for 2.31 s · 412 tokens' after."""
        if live:
            self._summary = f"Thinking…  {tokens:,d} tokens"
        else:
            took = f" for {fmt_ms(thinking_ms)}" if thinking_ms else ""
            self._summary = f"Thought{took} · {tokens:,d} tokens"
        self._show_summary()

    def _show_summary(self) -> None:
        self.toggle.setText(("▾  " if self.expanded else "▸  ") + self._summary)

    def plain_text(self) -> str:
        """The whole trace."""
        return self.text.toPlainText()


def _tint_code_blocks(document: QTextDocument) -> None:
    """Give fenced and indented code blocks a darker panel, as code reads in a chat window."""
    cursor = QTextCursor(document)
    block = document.begin()
    while block.isValid():
        fmt = block.blockFormat()
        if fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or block.charFormat().fontFixedPitch():
            fmt.setBackground(QColor(CODE_BACKGROUND))
            fmt.setLeftMargin(max(fmt.leftMargin(), 6.0))
            cursor.setPosition(block.position())
            cursor.setBlockFormat(fmt)
        block = block.next()


class ReplyView(QWidget):
    """One reply: thinking trace, answer, and then its figures, a stop note or the server's error, and the events
    the server's watchdog saw while it ran."""

    def __init__(self, show_figures: bool = True, parent: QWidget | None = None, *,
                 words: ReplyWords, empty_text: str = "") -> None:
        super().__init__(parent)
        self._show_figures = show_figures
        self._words = words
        self.thinking = ThinkingSection()
        self.answer = GrowingText()
        self.answer.setObjectName("ReplyAnswer")
        self.answer.setPlaceholderText(empty_text)  # what an empty reply says until its request is sent
        self.note = QLabel()
        self.note.setObjectName("ReplyNote")
        self.note.setWordWrap(True)
        self.note.hide()
        self.error = InlineMessage(prominent=True)
        self.figures = QLabel()
        self.figures.setObjectName("ReplyFigures")
        self.figures.setWordWrap(True)
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures.hide()
        self.events = ReplyEvents()  # what the server did without saying so while it ran
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        for widget in (self.thinking, self.answer, self.note, self.error, self.figures, self.events):
            layout.addWidget(widget)
        self._outcome: ReplyOutcome | None = None
        self._answer = ""  # exactly as streamed
        self._markdown = True
        self._ended = False
        self.stopped = False

    def set_waiting(self, text: str = WAITING_TEXT) -> None:
        """The request is on its way (or queued, in `text`'s words): say so until text arrives."""
        if not self._ended:
            self.answer.setPlaceholderText(text)

    def append(self, thinking: str, content: str) -> None:
        """Add newly arrived text (shown plain while it streams; cheap at any token rate)."""
        if thinking:
            self.thinking.append(thinking)
        if content:
            self._answer += content
            self.answer.append_text(content)

    def set_markdown(self, on: bool) -> None:
        """Show the finished answer rendered as Markdown (headings, lists, code) or as plain text."""
        if on != self._markdown:
            self._markdown = on
            if self._ended:
                self._render()

    @property
    def markdown(self) -> bool:
        return self._markdown

    def _render(self) -> None:
        if self._markdown:
            self.answer.setMarkdown(self._answer)
            _tint_code_blocks(self.answer.document())
        else:
            self.answer.setPlainText(self._answer)

    def set_live(self, stats: ReplyStats) -> None:
        """Refresh the counts while the reply streams."""
        if stats.thinking_tokens:
            self.thinking.set_summary(stats.thinking_tokens, stats.thinking_ms, live=stats.first_answer_ms is None)

    def finish(self, outcome: ReplyOutcome | None, stopped: bool = False) -> None:
        """Show how the reply ended (outcome None: stopped before anything came back)."""
        self._outcome = outcome
        stats = outcome.stats if outcome is not None else None
        if stats is not None and stats.thinking_tokens:
            self.thinking.set_summary(stats.thinking_tokens, stats.thinking_ms, live=False)
        if outcome is not None and outcome.error is not None:
            self.error.show_error(outcome.error.user_text())
        if stopped or (outcome is not None and outcome.stopped):
            self.stopped = True
            tokens = stats.streamed_tokens if stats is not None else 0
            self.note.setText(f"■ Stopped after {tokens:,d} tokens.")
            self.note.show()
        self._ended = True
        if self._answer and self._markdown:
            self._render()
        if not self._answer:
            self.answer.setPlaceholderText("" if outcome is not None and outcome.error else "(no answer text)")
            if outcome is not None and outcome.error is not None:
                self.answer.hide()
        if self._show_figures and stats is not None and (stats.finished or stats.streamed_tokens):
            self.figures.setText(figures_line(stats, self._words))
            self.figures.show()
        self.events.show_events(outcome.events if outcome is not None else ())

    def show_note(self, text: str) -> None:
        """Add a line under the reply (how it ended, e.g. at its output cap); nothing for ''."""
        if text:
            self.note.setText(f"{self.note.text()}  {text}".strip() if self.note.isVisibleTo(self) else text)
            self.note.show()

    @property
    def outcome(self) -> ReplyOutcome | None:
        """How the reply ended, once it did."""
        return self._outcome

    def answer_text(self) -> str:
        """The answer so far, exactly as streamed (Markdown source, not the rendering)."""
        return self._answer

    def record(self, prompt: str, model: str, think: bool | str | None, system: str = "") -> TurnRecord:
        """This reply, with what was asked, as a document record (for export)."""
        outcome = self._outcome
        error = outcome.error.user_text() if outcome is not None and outcome.error is not None else ""
        return TurnRecord(prompt, model, think, thinking=self.thinking.plain_text(), answer=self._answer,
                          stats=outcome.stats if outcome is not None else None, error=error, stopped=self.stopped,
                          system=system)


class TurnView(QFrame):
    """One turn of the conversation: what was asked (and how), then the reply."""

    def __init__(self, prompt: str, model: str, think: bool | str | None, system: str = "",
                 parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self.setObjectName("Turn")
        self.prompt, self.model, self.think, self.system = prompt, model, think, system
        meta = QHBoxLayout()
        meta.setSpacing(8)
        you = QLabel("YOU")
        you.setObjectName("TurnMeta")
        meta.addWidget(you)
        meta.addStretch(1)
        model_label = QLabel(model)
        model_label.setObjectName("TurnMeta")
        meta.addWidget(model_label)
        meta.addWidget(mode_badge(think))
        self.prompt_label = QLabel(html.escape(_shorten(prompt)).replace("\n", "<br>"))
        self.prompt_label.setObjectName("TurnPrompt")
        self.prompt_label.setWordWrap(True)
        self.prompt_label.setTextFormat(Qt.TextFormat.RichText)
        self.prompt_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.prompt_label.setToolTip(prompt[:4000] if len(prompt) > len(_shorten(prompt)) else "")
        rule = QFrame()
        rule.setFrameShape(QFrame.Shape.HLine)
        rule.setStyleSheet("color: #2c2e36;")
        self.reply = ReplyView(words=words)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(16, 12, 16, 12)
        layout.setSpacing(8)
        layout.addLayout(meta)
        layout.addWidget(self.prompt_label)
        layout.addWidget(rule)
        layout.addWidget(self.reply)

    def record(self) -> TurnRecord:
        """The turn as a document record (for export)."""
        return self.reply.record(self.prompt, self.model, self.think, self.system)


def _shorten(prompt: str, limit: int = 600) -> str:
    """A long prompt (a pasted document) shown by its start and its size."""
    if len(prompt) <= limit:
        return prompt
    return f"{prompt[:limit].rstrip()} … (+{len(prompt) - limit:,d} characters)"


class Conversation(QScrollArea):
    """The turns, newest at the bottom; follows new text unless the user scrolled up."""

    def __init__(self, parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self.words = words  # the server's names for a reply's figures
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        body = QWidget()
        body.setObjectName("ConversationBody")
        self._layout = QVBoxLayout(body)
        self._layout.setContentsMargins(4, 4, 12, 4)
        self._layout.setSpacing(12)
        self.placeholder = QLabel("Pick a model, choose Thinking or Non-thinking, type a prompt and press Send "
                                  "(Ctrl+Enter). Replies stream here with their figures.")
        self.placeholder.setObjectName("Dim")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setStyleSheet("font-size: 13pt; padding: 40px;")
        self._layout.addWidget(self.placeholder)
        self._layout.addStretch(1)
        self.setWidget(body)
        self.turns: list[TurnView] = []
        self._markdown = True
        self._follow = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - 8

    def _on_range(self, _low: int, high: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(high)

    def add_turn(self, prompt: str, model: str, think: bool | str | None, system: str = "") -> TurnView:
        """Append a turn and follow it."""
        self.placeholder.hide()
        turn = TurnView(prompt, model, think, system, words=self.words)
        turn.reply.set_markdown(self._markdown)
        turn.reply.set_waiting()  # a turn is added as its request goes out
        self._layout.insertWidget(self._layout.count() - 1, turn)
        self.turns.append(turn)
        self._follow = True
        return turn

    def set_markdown(self, on: bool) -> None:
        """Render finished answers as Markdown (True) or show them as plain text."""
        self._markdown = on
        for turn in self.turns:
            turn.reply.set_markdown(on)

    def records(self) -> list[TurnRecord]:
        """Every turn as a document record, oldest first."""
        return [turn.record() for turn in self.turns]

    def clear(self) -> None:
        """Remove every turn."""
        for turn in self.turns:
            self._layout.removeWidget(turn)
            turn.deleteLater()
        self.turns = []
        self.placeholder.show()


__all__ = ["Conversation", "GrowingText", "REPLY_STYLE", "ReplyView", "ThinkingSection", "TurnView", "WAITING_TEXT",
           "mode_badge"]
