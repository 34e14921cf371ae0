"""What a demo step's figures say: live figures over streaming and finished replies, and the headlines."""

from __future__ import annotations

import pytest

from app.core.bench.stats import LatencyTargets
from app.core.console.reply_stats import ReplyStats, summarize_burst
from app.core.demo.headlines import (burst_headline, first_sentence, live_requests, parallel_headline, reply_rate,
                                     seconds_words, short_reason, sweep_figures, sweep_headline)
from tests.core.demo.sweep_runs import kept_run


def stats(ttft_ms: float | None, tokens: int, wall_ms: float, *, rate: float | None = None,
          done: bool = False) -> ReplyStats:
    return ReplyStats(ttft_ms=ttft_ms, first_answer_ms=ttft_ms, thinking_tokens=0, answer_tokens=tokens,
                      wall_ms=wall_ms, output_tokens=tokens if done else None, decode_tokens_per_s=rate,
                      done_reason="stop" if done else None)


def test_a_streaming_reply_s_rate_is_its_tokens_since_the_first_and_a_finished_one_the_server_s() -> None:
    assert reply_rate(stats(200.0, 11, 1200.0)) == pytest.approx(10.0)  # 10 tokens after the first, in 1 s
    assert reply_rate(stats(200.0, 11, 1200.0, rate=12.5, done=True)) == 12.5
    assert reply_rate(stats(None, 0, 500.0)) is None and reply_rate(stats(100.0, 1, 500.0)) is None


def test_live_figures_take_the_medians_of_the_replies_streaming_and_every_token_over_the_time() -> None:
    streaming = [stats(100.0, 11, 1100.0), stats(300.0, 21, 1300.0), stats(None, 0, 1300.0)]
    finished = [stats(200.0, 30, 900.0, rate=40.0, done=True)]
    live = live_requests(streaming, finished, sent=4, done=1, in_flight=3, elapsed_s=2.0)
    assert (live.sent, live.finished, live.in_flight) == (4, 1, 3)
    assert live.per_request_tps == pytest.approx(15.0)  # median of 10 and 20: the streaming ones only
    assert live.ttft_ms == 200.0 and live.aggregate_tps == pytest.approx((11 + 21 + 30) / 2.0)
    over = live_requests([], finished, sent=4, done=4, in_flight=0, elapsed_s=2.0)
    assert over.per_request_tps == 40.0  # none streams: the finished ones'
    nothing = live_requests([], [], sent=2, done=0, in_flight=2, elapsed_s=0.5)
    assert (nothing.per_request_tps, nothing.ttft_ms, nothing.aggregate_tps) == (None, None, None)


def test_headlines_say_the_numbers_a_room_reads() -> None:
    replies = [stats(800.0, 40, 8_000.0, rate=5.2, done=True) for _ in range(8)]
    summary = summarize_burst(replies)
    assert burst_headline(summary) == "8 users: 40 tok/s together, 5.2 tok/s each, TTFT 0.8 s"
    one = summarize_burst([stats(250.0, 96, 2_000.0, rate=48.0, done=True)])
    assert burst_headline(one) == "One user: 48 tok/s, TTFT 0.2 s, 96 tokens"
    lost = summarize_burst(replies[:6] + [None, None], failed=2)
    assert burst_headline(lost).endswith("(2 of 8 did not finish)")
    assert parallel_headline([(1, 12.0), (8, 41.0)], 8) == \
        "8 users: parallel 8 gives 41 tok/s together, ×3.4 parallel 1's 12.0 tok/s"
    assert parallel_headline([(1, 12.0), (2, 20.5), (4, None)], 4) == \
        "4 users: parallel 1: 12.0 tok/s, parallel 2: 20 tok/s, parallel 4: — tok/s"
    assert seconds_words(None) == "—" and seconds_words(12_400.0) == "12 s" and seconds_words(45.0) == "0.04 s"
    assert first_sentence("Recommended: parallel 2. It gives more.") == "Recommended: parallel 2."
    assert burst_headline(summary, each=5.0) == "8 users: 40 tok/s together, 5.0 tok/s each, TTFT 0.8 s"


def test_a_server_s_reason_is_cut_to_its_first_clause_for_a_room() -> None:
    llama = ("this model's chat template has no thinking mode (it reads neither enable_thinking nor a <think> "
             "block), so thinking is not sent.")
    assert short_reason(llama) == "this model's chat template has no thinking mode"
    assert short_reason('it has no "thinking" capability (the server lists: completion)') == \
        'it has no "thinking" capability'
    assert short_reason("the port is taken.") == "the port is taken"


def test_a_sweep_s_headline_is_its_recommendation_or_in_a_few_words_why_there_is_none() -> None:
    run = kept_run("SmolLM2")
    assert sweep_headline(run, run.recommendation).startswith("Recommended: parallel 2, ")
    assert sweep_headline(run, run.recommendation).endswith(" tok/s within the targets")
    assert sweep_figures(run) == {"parallel 1": pytest.approx(80.0), "parallel 2": pytest.approx(160.0)}
    strict = kept_run("SmolLM2", LatencyTargets(ttft_p95_ms=1.0))  # no first token comes within 1 ms
    assert sweep_headline(strict, strict.recommendation) == \
        "No recommendation: no point met the targets; the fastest, parallel 2, reached 160 tok/s"
