"""Figures of a reply, a burst and the cost of thinking, from streams built line by line."""

from __future__ import annotations

import pytest

from app.core.replies import FinalFigures, StreamChunk
from app.core.console.reply_stats import (ReplyMeter, ReplyStats, figure_rows, fmt_ms, fmt_rate, summarize_burst,
                                  thinking_cost)

SENT = 100.0


def chunk(t: float, content: str = "", thinking: str = "", final: FinalFigures | None = None) -> StreamChunk:
    return StreamChunk(content=content, thinking=thinking, done=final is not None, t_monotonic=t, final=final)


FINAL = FinalFigures(done_reason="stop", total_ms=2000.0, load_ms=500.0, prompt_tokens=40, prompt_ms=20.0,
                     output_tokens=5, decode_ms=100.0)


def feed(lines: list[StreamChunk]) -> ReplyMeter:
    meter = ReplyMeter(SENT)
    for line in lines:
        meter.add(line)
    return meter


def test_times_and_counts_come_from_the_stream_and_rates_from_the_final_line() -> None:
    meter = feed([chunk(100.05),  # a line that carries no text is not a token
                  chunk(100.25, thinking="Let"), chunk(100.30, thinking=" me"),
                  chunk(100.80, content="Four"), chunk(100.85, content="."), chunk(100.90, content=" Done"),
                  chunk(100.95, final=FINAL)])
    stats = meter.snapshot(now_s=999.0)
    assert stats.ttft_ms == pytest.approx(250.0)
    assert stats.first_answer_ms == pytest.approx(800.0)
    assert stats.thinking_ms == pytest.approx(550.0)
    assert (stats.thinking_tokens, stats.answer_tokens, stats.streamed_tokens) == (2, 3, 5)
    assert stats.output_tokens == 5 and stats.decode_tokens_per_s == pytest.approx(50.0)
    assert stats.prompt_tokens == 40 and stats.prompt_tokens_per_s == pytest.approx(2000.0)
    assert (stats.load_ms, stats.total_ms) == (pytest.approx(500.0), pytest.approx(2000.0))
    assert stats.wall_ms == pytest.approx(950.0)  # to the final line, not to `now`
    assert stats.done_reason == "stop" and stats.finished


def test_add_reports_what_each_line_carried() -> None:
    meter = ReplyMeter(SENT)
    assert meter.add(chunk(100.1, thinking="a")) == (1, 0)
    assert meter.add(chunk(100.2, content="b")) == (0, 1)
    assert meter.add(chunk(100.3)) == (0, 0)


def test_a_reply_still_streaming_or_stopped_has_no_server_figures() -> None:
    stats = feed([chunk(100.2, content="Hi"), chunk(100.3, content="!")]).snapshot(now_s=101.0)
    assert stats.done_reason is None and not stats.finished
    assert stats.output_tokens is None and stats.decode_tokens_per_s is None and stats.total_ms is None
    assert stats.wall_ms == pytest.approx(1000.0)
    assert stats.thinking_ms == 0.0  # no thinking at all


def test_a_reply_cut_during_thinking_has_no_first_answer() -> None:
    stats = feed([chunk(100.1, thinking="hm")]).snapshot(now_s=100.5)
    assert stats.first_answer_ms is None and stats.thinking_ms is None


def test_to_json_has_every_figure_the_cli_promises() -> None:
    data = feed([chunk(100.1, content="x"), chunk(100.2, final=FINAL)]).snapshot(100.2).to_json()
    for key in ("ttft_ms", "first_answer_ms", "thinking_tokens", "answer_tokens", "eval_count",
                "eval_tokens_per_s", "prompt_eval_count", "prompt_tokens_per_s", "load_ms", "total_ms",
                "done_reason"):
        assert key in data


def _stats(ttft: float, wall: float, eval_count: int = 100, rate: float | None = 50.0,
           done: str | None = "stop") -> ReplyStats:
    return ReplyStats(ttft_ms=ttft, first_answer_ms=ttft, thinking_tokens=0, answer_tokens=eval_count,
                      wall_ms=wall, output_tokens=eval_count if done else None,
                      decode_tokens_per_s=rate if done else None, done_reason=done)


def test_burst_summary_aggregates_over_the_wall_time() -> None:
    replies = [_stats(100, 2100), _stats(120, 2120), _stats(2100, 4100), _stats(2150, 4000),
               _stats(300, 900, done=None)]  # stopped: not counted as completed
    summary = summarize_burst(replies, failed=0, stopped=1)
    assert (summary.requested, summary.completed, summary.stopped) == (5, 4, 1)
    assert summary.wall_ms == 4100
    assert summary.output_tokens == 400
    assert summary.aggregate_tokens_per_s == pytest.approx(400 / 4.1)
    assert summary.mean_decode_tokens_per_s == pytest.approx(50.0)
    assert (summary.ttft_min_ms, summary.ttft_max_ms, summary.ttft_spread_ms) == (100, 2150, 2050)
    assert summary.ttft_median_ms == pytest.approx(1110.0)
    assert summary.speedup == pytest.approx(400 / 4.1 / 50.0)
    assert summary.to_json()["ttft_spread_ms"] == 2050


def test_burst_with_nothing_finished_has_no_rates() -> None:
    summary = summarize_burst([None, _stats(0, 500, done=None)], failed=1)
    assert summary.completed == 0 and summary.failed == 1
    assert summary.aggregate_tokens_per_s is None and summary.ttft_spread_ms is None and summary.speedup is None


def test_thinking_cost_leaves_load_time_out() -> None:
    with_thinking = ReplyStats(ttft_ms=3050, first_answer_ms=6050, thinking_tokens=300, answer_tokens=100,
                               wall_ms=8050, output_tokens=400, total_ms=8050, load_ms=3000, done_reason="stop")
    without = ReplyStats(ttft_ms=60, first_answer_ms=60, thinking_tokens=0, answer_tokens=100, wall_ms=2060,
                         output_tokens=100, total_ms=2060, load_ms=10, done_reason="stop")
    cost = thinking_cost(with_thinking, without)
    assert cost.thinking_tokens == 300 and cost.extra_tokens == 300 and cost.token_ratio == 4.0
    assert cost.extra_first_answer_ms == pytest.approx(3050 - 50)
    assert cost.extra_total_ms == pytest.approx(5050 - 2050)
    assert cost.summary() == "+300 tokens, ×4.0 generated, +3.0 s to the first answer token, +3.0 s in total"


def test_thinking_cost_of_an_unfinished_pair_is_not_measurable() -> None:
    cut = ReplyStats(ttft_ms=None, first_answer_ms=None, thinking_tokens=0, answer_tokens=0, wall_ms=5)
    assert thinking_cost(cut, cut).summary() == "not measurable (a reply did not finish)"


@pytest.mark.parametrize("ms, text", [(None, "—"), (0.034, "0.0 ms"), (7.25, "7.2 ms"), (85.4, "85 ms"),
                                      (1240, "1.24 s"), (125_000, "2 min 05 s")])
def test_durations_read_naturally(ms: float | None, text: str) -> None:
    assert fmt_ms(ms) == text


def test_figure_rows_name_every_figure() -> None:
    rows = dict(figure_rows(feed([chunk(100.1, content="x"), chunk(100.2, final=FINAL)]).snapshot(100.2)))
    assert rows["decode"] == fmt_rate(50.0) == "50.0 tok/s"
    assert rows["done_reason"] == "stop" and rows["load"] == "500 ms"


def test_the_clock_starts_when_the_request_went_out_not_when_it_was_asked_for() -> None:
    # Asked for at SENT; connecting and scheduling took 150 ms before the transport wrote the request.
    meter = ReplyMeter(SENT)
    went_out = SENT + 0.150
    for t, content in ((100.25, ""), (100.30, "a"), (100.40, "b")):
        meter.add(StreamChunk(content=content, thinking="", done=False, t_monotonic=t, request_sent_s=went_out))
    stats = meter.snapshot(now_s=100.5)
    assert stats.ttft_ms == pytest.approx(150.0) and stats.first_answer_ms == pytest.approx(150.0)
    assert stats.wall_ms == pytest.approx(350.0)  # not finished: up to now, from when it went out
    # A reply that never got a line keeps the time it was asked for.
    assert ReplyMeter(SENT).snapshot(now_s=100.5).wall_ms == pytest.approx(500.0)
