"""Figures of a streamed reply, of a burst of replies, and what thinking costs, from the stream itself.

Times are milliseconds measured from when the request went out on the client's monotonic clock
(the transport's stamp, so connecting and scheduling are not counted); rates are tokens per second.
Servers send one token per stream line, so counting the lines that carry thinking or answer text
counts tokens; the server's own output count is reported beside it. Field names are neutral; the
JSON keys and labels keep the names the exports have always had (eval_count, …), so exports and the
figures shown do not change.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any
from collections.abc import Sequence

from app.core.console.reply_words import ReplyWords
from app.core.replies import FinalFigures, StreamChunk


@dataclass(frozen=True)
class ReplyStats:
    """Everything measured about one reply; None where it is unknown (a stopped or failed reply)."""

    ttft_ms: float | None  # request sent -> first token of any kind
    first_answer_ms: float | None  # request sent -> first answer token (after any thinking)
    thinking_tokens: int  # counted from the stream
    answer_tokens: int  # counted from the stream
    wall_ms: float  # request sent -> last line received (or stop/failure)
    output_tokens: int | None = None  # the server's own count of generated tokens
    decode_tokens_per_s: float | None = None  # output_tokens / decode time, as the server measured it
    prompt_tokens: int | None = None
    prompt_tokens_per_s: float | None = None
    load_ms: float | None = None
    total_ms: float | None = None  # the server's total_duration
    done_reason: str | None = None  # "stop", "length", … ; None when the reply did not finish

    @property
    def streamed_tokens(self) -> int:
        """Thinking plus answer tokens counted from the stream."""
        return self.thinking_tokens + self.answer_tokens

    @property
    def finished(self) -> bool:
        """True when the server sent its final line."""
        return self.done_reason is not None

    @property
    def thinking_ms(self) -> float | None:
        """Time spent thinking: first token -> first answer token (ms); 0 without thinking."""
        if self.thinking_tokens == 0:
            return 0.0
        if self.ttft_ms is None or self.first_answer_ms is None:
            return None
        return self.first_answer_ms - self.ttft_ms

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of every figure (keys carry units)."""
        return {
            "ttft_ms": self.ttft_ms, "first_answer_ms": self.first_answer_ms,
            "thinking_tokens": self.thinking_tokens, "answer_tokens": self.answer_tokens,
            "eval_count": self.output_tokens, "eval_tokens_per_s": self.decode_tokens_per_s,
            "prompt_eval_count": self.prompt_tokens, "prompt_tokens_per_s": self.prompt_tokens_per_s,
            "load_ms": self.load_ms, "total_ms": self.total_ms, "wall_ms": self.wall_ms,
            "done_reason": self.done_reason,
        }


class ReplyMeter:
    """Accumulates one reply's chunks; `snapshot`/`finish` turn them into ReplyStats.

    Not thread-safe: one stream feeds one meter.
    """

    def __init__(self, sent_at_s: float) -> None:
        self.sent_at_s = sent_at_s  # replaced by the transport's stamp when the first line carries one
        self.lines = 0
        self.thinking_tokens = 0
        self.answer_tokens = 0
        self.first_token_at_s: float | None = None
        self.first_answer_at_s: float | None = None
        self.last_line_at_s = sent_at_s
        self.final: FinalFigures | None = None

    def add(self, chunk: StreamChunk) -> tuple[int, int]:
        """Count one stream line; returns the (thinking, answer) tokens it carried."""
        if self.lines == 0 and chunk.request_sent_s is not None:
            self.sent_at_s = chunk.request_sent_s
        self.lines += 1
        self.last_line_at_s = chunk.t_monotonic
        thinking = 1 if chunk.thinking else 0
        answer = 1 if chunk.content else 0
        if (thinking or answer) and self.first_token_at_s is None:
            self.first_token_at_s = chunk.t_monotonic
        if answer and self.first_answer_at_s is None:
            self.first_answer_at_s = chunk.t_monotonic
        self.thinking_tokens += thinking
        self.answer_tokens += answer
        if chunk.done and chunk.final is not None:
            self.final = chunk.final
        return thinking, answer

    def _since_sent_ms(self, t: float | None) -> float | None:
        return None if t is None else (t - self.sent_at_s) * 1e3

    def snapshot(self, now_s: float) -> ReplyStats:
        """The figures so far; server figures only once its final line arrived."""
        final = self.final or FinalFigures()
        end = self.last_line_at_s if self.final is not None else now_s
        return ReplyStats(
            ttft_ms=self._since_sent_ms(self.first_token_at_s),
            first_answer_ms=self._since_sent_ms(self.first_answer_at_s),
            thinking_tokens=self.thinking_tokens, answer_tokens=self.answer_tokens,
            wall_ms=max(0.0, (end - self.sent_at_s) * 1e3),
            output_tokens=final.output_tokens, decode_tokens_per_s=final.decode_tokens_per_s,
            prompt_tokens=final.prompt_tokens, prompt_tokens_per_s=final.prompt_tokens_per_s,
            load_ms=final.load_ms, total_ms=final.total_ms,
            done_reason=final.done_reason if self.final is not None else None,
        )


@dataclass(frozen=True)
class BurstSummary:
    """Aggregate figures of N copies of one request sent at once (ms, tokens/s)."""

    requested: int
    completed: int
    failed: int
    stopped: int
    wall_ms: float  # first request sent -> last reply over
    output_tokens: int  # sum of the server's output counts over completed replies
    aggregate_tokens_per_s: float | None  # output_tokens / wall time: what the server delivered
    mean_decode_tokens_per_s: float | None  # mean of each reply's own decode rate
    ttft_min_ms: float | None
    ttft_median_ms: float | None
    ttft_max_ms: float | None

    @property
    def ttft_spread_ms(self) -> float | None:
        """Slowest minus fastest time to first token: queueing shows up here (ms)."""
        if self.ttft_min_ms is None or self.ttft_max_ms is None:
            return None
        return self.ttft_max_ms - self.ttft_min_ms

    @property
    def speedup(self) -> float | None:
        """Aggregate rate over one reply's mean decode rate (about 1 when nothing runs in parallel)."""
        if not self.aggregate_tokens_per_s or not self.mean_decode_tokens_per_s:
            return None
        return self.aggregate_tokens_per_s / self.mean_decode_tokens_per_s

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict of the summary."""
        return {"requested": self.requested, "completed": self.completed, "failed": self.failed,
                "stopped": self.stopped, "wall_ms": self.wall_ms, "eval_tokens": self.output_tokens,
                "aggregate_tokens_per_s": self.aggregate_tokens_per_s,
                "mean_decode_tokens_per_s": self.mean_decode_tokens_per_s,
                "ttft_min_ms": self.ttft_min_ms, "ttft_median_ms": self.ttft_median_ms,
                "ttft_max_ms": self.ttft_max_ms, "ttft_spread_ms": self.ttft_spread_ms}


def summarize_burst(replies: Sequence[ReplyStats | None], failed: int = 0, stopped: int = 0) -> BurstSummary:
    """Aggregate a burst: `replies` holds each finished reply's stats (None for one that never started)."""
    done = [r for r in replies if r is not None and r.finished]
    wall = max((r.wall_ms for r in replies if r is not None), default=0.0)
    output_tokens = sum(r.output_tokens or 0 for r in done)
    ttfts = sorted(r.ttft_ms for r in done if r.ttft_ms is not None)
    rates = [r.decode_tokens_per_s for r in done if r.decode_tokens_per_s]
    return BurstSummary(
        requested=len(replies), completed=len(done), failed=failed, stopped=stopped, wall_ms=wall,
        output_tokens=output_tokens,
        aggregate_tokens_per_s=output_tokens / (wall / 1e3) if wall > 0 and output_tokens else None,
        mean_decode_tokens_per_s=statistics.fmean(rates) if rates else None,
        ttft_min_ms=ttfts[0] if ttfts else None,
        ttft_median_ms=statistics.median(ttfts) if ttfts else None,
        ttft_max_ms=ttfts[-1] if ttfts else None,
    )


@dataclass(frozen=True)
class ThinkingCost:
    """What thinking added to the same prompt: tokens and waiting (ms). Load time is left out,
    since whichever reply ran first may have paid for loading the model."""

    thinking_tokens: int
    extra_tokens: int | None  # output tokens with thinking minus without
    extra_first_answer_ms: float | None
    extra_total_ms: float | None
    token_ratio: float | None  # output tokens with thinking / without

    def summary(self) -> str:
        """One sentence for a user, e.g. '+412 tokens, +3.2 s to the first answer token'."""
        parts = []
        if self.extra_tokens is not None:
            parts.append(f"{self.extra_tokens:+,d} tokens")
        if self.token_ratio is not None:
            parts.append(f"×{self.token_ratio:.1f} generated")
        if self.extra_first_answer_ms is not None:
            parts.append(f"{self.extra_first_answer_ms / 1e3:+.1f} s to the first answer token")
        if self.extra_total_ms is not None:
            parts.append(f"{self.extra_total_ms / 1e3:+.1f} s in total")
        return ", ".join(parts) if parts else "not measurable (a reply did not finish)"


def _minus_load(value_ms: float | None, load_ms: float | None) -> float | None:
    return None if value_ms is None else value_ms - (load_ms or 0.0)


def thinking_cost(thinking: ReplyStats, plain: ReplyStats) -> ThinkingCost:
    """Compare a reply with thinking against the same prompt without it."""
    extra_tokens = ratio = None
    if thinking.output_tokens is not None and plain.output_tokens is not None:
        extra_tokens = thinking.output_tokens - plain.output_tokens
        ratio = thinking.output_tokens / plain.output_tokens if plain.output_tokens else None
    first_t = _minus_load(thinking.first_answer_ms, thinking.load_ms)
    first_p = _minus_load(plain.first_answer_ms, plain.load_ms)
    total_t = _minus_load(thinking.total_ms, thinking.load_ms)
    total_p = _minus_load(plain.total_ms, plain.load_ms)
    return ThinkingCost(
        thinking_tokens=thinking.thinking_tokens, extra_tokens=extra_tokens,
        extra_first_answer_ms=None if first_t is None or first_p is None else first_t - first_p,
        extra_total_ms=None if total_t is None or total_p is None else total_t - total_p,
        token_ratio=ratio,
    )


def fmt_ms(ms: float | None) -> str:
    """A duration for people: '85 ms', '1.24 s', '2 min 05 s'; '—' when unknown."""
    if ms is None:
        return "—"
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1e3:.2f} s"
    minutes, seconds = divmod(ms / 1e3, 60)
    return f"{minutes:.0f} min {seconds:02.0f} s"


def fmt_rate(tokens_per_s: float | None) -> str:
    """'48.3 tok/s'; '—' when unknown."""
    return "—" if tokens_per_s is None else f"{tokens_per_s:,.1f} tok/s"


def fmt_count(n: int | None) -> str:
    """'1,234'; '—' when unknown."""
    return "—" if n is None else f"{n:,d}"


def figure_rows(stats: ReplyStats) -> list[tuple[str, str]]:
    """(label, value) for every figure of a reply, in reading order."""
    return [
        ("time to first token", fmt_ms(stats.ttft_ms)),
        ("first answer token", fmt_ms(stats.first_answer_ms)),
        ("thinking tokens", fmt_count(stats.thinking_tokens)),
        ("answer tokens", fmt_count(stats.answer_tokens)),
        ("eval_count", fmt_count(stats.output_tokens)),
        ("decode", fmt_rate(stats.decode_tokens_per_s)),
        ("prompt tokens", fmt_count(stats.prompt_tokens)),
        ("prompt rate", fmt_rate(stats.prompt_tokens_per_s)),
        ("load", fmt_ms(stats.load_ms)),
        ("total", fmt_ms(stats.total_ms)),
        ("done_reason", stats.done_reason or "not finished"),
    ]



def mode_text(think: bool | str | None) -> str:
    """'Thinking', 'Non-thinking', 'Thinking: high' or 'Model default' for a think value."""
    if think is None:
        return "Model default"
    if isinstance(think, str):
        return f"Thinking: {think}"
    return "Thinking" if think else "Non-thinking"


def figures_line(stats: ReplyStats, words: ReplyWords) -> str:
    """The reply's figures on one line (the server's counts under its own names)."""
    parts = [f"TTFT {fmt_ms(stats.ttft_ms)}", f"first answer {fmt_ms(stats.first_answer_ms)}",
             f"thinking {fmt_count(stats.thinking_tokens)} · answer {fmt_count(stats.answer_tokens)} tok",
             f"{words.output_count} {fmt_count(stats.output_tokens)}", f"decode {fmt_rate(stats.decode_tokens_per_s)}",
             f"prompt {fmt_count(stats.prompt_tokens)} tok @ {fmt_rate(stats.prompt_tokens_per_s)}",
             f"load {fmt_ms(stats.load_ms)}", f"total {fmt_ms(stats.total_ms)}",
             f"{words.stop_field} {stats.done_reason or '—'}"]
    return "   ·   ".join(parts)


__all__ = ["BurstSummary", "ReplyMeter", "ReplyStats", "ThinkingCost", "summarize_burst", "thinking_cost",
           "figure_rows", "figures_line", "fmt_count", "fmt_ms", "fmt_rate", "mode_text"]
