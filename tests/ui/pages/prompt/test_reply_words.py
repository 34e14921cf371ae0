"""The Prompt page names a reply's figures as its backend's server does: Ollama's eval_count and
done_reason, llama-server's predicted_n and finish_reason."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel

from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.ollama.spec import OLLAMA
from app.core.console.reply_stats import ReplyStats, figures_line
from app.ui.pages.prompt.ab import AbView
from app.ui.pages.prompt.burst import BurstView
from app.ui.pages.prompt.controls import ConsoleControls
from app.ui.pages.prompt.figures import ReplyFigures

STATS = ReplyStats(ttft_ms=120.0, first_answer_ms=120.0, thinking_tokens=0, answer_tokens=31, wall_ms=900.0,
                   output_tokens=32, decode_tokens_per_s=40.0, total_ms=880.0, done_reason="stop")


def _headers(view: BurstView) -> list[str]:
    return [view.table.horizontalHeaderItem(i).text() for i in range(view.table.columnCount())]


def test_llama_server_figures_carry_its_own_field_names(qtbot):
    words = LLAMA_SERVER.reply_words
    figures = ReplyFigures(words=words)
    qtbot.addWidget(figures)
    figures.show_stats(STATS)
    assert figures.tiles["total"].detail == "finish_reason: stop"
    assert figures.tiles["decode"].detail == "predicted_n 32"
    assert "predicted_n 32" in figures_line(STATS, words) and "finish_reason stop" in figures_line(STATS, words)
    controls = ConsoleControls(words=words)
    qtbot.addWidget(controls)
    hints = " ".join(label.text() for label in controls.findChildren(QLabel))
    assert "chat_template_kwargs.enable_thinking" in hints and "think field" not in hints
    burst = BurstView(words=words)
    qtbot.addWidget(burst)
    assert "predicted\ntokens" in _headers(burst) and "eval\ncount" not in _headers(burst)
    ab = AbView(words=words)
    qtbot.addWidget(ab)
    assert "predicted_n" in [label.text() for label in ab.left.findChildren(QLabel)]


def test_ollama_keeps_the_names_its_users_know(qtbot):
    words = OLLAMA.reply_words
    figures = ReplyFigures(words=words)
    qtbot.addWidget(figures)
    figures.show_stats(STATS)
    assert figures.tiles["total"].detail == "done_reason: stop" and figures.tiles["decode"].detail == "eval_count 32"
    burst = BurstView(words=words)
    qtbot.addWidget(burst)
    assert "eval\ncount" in _headers(burst)
