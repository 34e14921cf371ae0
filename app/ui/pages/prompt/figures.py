"""Big, projector-readable tiles with a reply's figures (live while it streams, the server's after)."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.core.console.reply_stats import ReplyStats, fmt_count, fmt_ms, fmt_rate
from app.core.console.reply_words import ReplyWords
from app.ui.widgets import plots
from app.ui.pages.dashboard.tiles import NO_DATA, TILE_STYLE, StatTile
from app.ui.widgets.tile_grid import TileGrid

LIVE = "live estimate"


def live_decode_rate(stats: ReplyStats) -> float | None:
    """Tokens/s seen so far, from the first token to the last line (an estimate until the end)."""
    if stats.ttft_ms is None or stats.streamed_tokens < 2:
        return None
    seconds = (stats.wall_ms - stats.ttft_ms) / 1e3
    return (stats.streamed_tokens - 1) / seconds if seconds > 0 else None


class ReplyFigures(QWidget):
    """Eight tiles: first token, first answer, decode rate, total; thinking, answer, prompt, load."""

    def __init__(self, columns: int = 4, parent: QWidget | None = None, *, words: ReplyWords) -> None:
        super().__init__(parent)
        self._words = words  # the server's names for the figures
        self.setObjectName("ReplyFiguresPanel")
        self.setStyleSheet(TILE_STYLE)
        spec = [
            ("ttft", "Time to first token", plots.CYAN),
            ("first_answer", "First answer token", plots.YELLOW),
            ("decode", "Decode", plots.GREEN),
            ("total", "Total", plots.LIMIT_GREY),
            ("thinking", "Thinking tokens", plots.ORANGE),
            ("answer", "Answer tokens", plots.VIOLET),
            ("prompt", "Prompt", plots.MAGENTA),
            ("load", "Load", plots.RED),
        ]
        self.tiles: dict[str, StatTile] = {}
        for key, title, colour in spec:
            tile = StatTile(title, colour)
            tile.setMinimumWidth(150)
            self.tiles[key] = tile
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(TileGrid(list(self.tiles.values()), max_columns=columns, spacing=8))  # fewer where narrow
        self.clear()

    def clear(self) -> None:
        """Dashes everywhere: no reply yet."""
        for tile in self.tiles.values():
            tile.set_text(NO_DATA, " ")

    def show_stats(self, stats: ReplyStats, live: bool = False) -> None:
        """Show a reply's figures; `live` marks estimates taken from the stream so far."""
        t = self.tiles
        t["ttft"].set_text(fmt_ms(stats.ttft_ms), "from sending")
        t["first_answer"].set_text(fmt_ms(stats.first_answer_ms),
                                   f"thought for {fmt_ms(stats.thinking_ms)}" if stats.thinking_tokens
                                   else "no thinking")
        if live or stats.decode_tokens_per_s is None:
            rate = live_decode_rate(stats)
            t["decode"].set_text(fmt_rate(rate), LIVE if rate is not None else self._words.decode_source)
        else:
            t["decode"].set_text(fmt_rate(stats.decode_tokens_per_s),
                                 f"{self._words.output_count} {fmt_count(stats.output_tokens)}")
        if stats.total_ms is not None:
            t["total"].set_text(fmt_ms(stats.total_ms), f"{self._words.stop_field}: {stats.done_reason or '—'}")
        else:
            t["total"].set_text(fmt_ms(stats.wall_ms), "so far" if live else "not finished")
        t["thinking"].set_text(fmt_count(stats.thinking_tokens), "from the stream")
        t["answer"].set_text(fmt_count(stats.answer_tokens),
                             f"{self._words.output_count} {fmt_count(stats.output_tokens)}"
                             if stats.output_tokens is not None
                             else "from the stream")
        if stats.prompt_tokens is not None:
            t["prompt"].set_text(f"{fmt_count(stats.prompt_tokens)} tok", fmt_rate(stats.prompt_tokens_per_s))
        else:
            t["prompt"].set_text(NO_DATA, "reported at the end")
        if stats.load_ms is None:
            t["load"].set_text(NO_DATA, "reported at the end")
        else:
            t["load"].set_text(fmt_ms(stats.load_ms),
                               "model was loaded" if stats.load_ms > 500 else "already in memory")

    def value(self, key: str) -> str:
        """The big text of one tile (for tests and screenshots)."""
        return self.tiles[key].value


__all__ = ["ReplyFigures", "live_decode_rate"]
