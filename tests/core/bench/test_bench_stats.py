"""Benchmark statistics against hand-computed cases, and the workload plan the generator sends."""

from __future__ import annotations

import math

import pytest

from app.core.bench.stats import EMPTY, LatencyTargets, RequestRecord, distribution, meets_targets, summarize
from app.core.bench.workload import BenchPrompt, LoadPlan, PromptFileError, parse_prompt_file, prompt_sets


def rec(index: int, start: float, first: float, end: float, tokens: int, **kw) -> RequestRecord:
    return RequestRecord(index=index, scheduled_s=start, sent_s=kw.pop("sent", start), end_s=end,
                         first_token_s=first, output_tokens=tokens, output_chunks=tokens, **kw)


# ---- distribution -------------------------------------------------------------------------------------


def test_distribution_of_four_values_by_hand():
    d = distribution([4.0, 1.0, 3.0, 2.0])
    # Linear interpolation between order statistics: rank = q * (n - 1) on 1, 2, 3, 4.
    assert (d.n, d.mean, d.min, d.max) == (4, 2.5, 1.0, 4.0)
    assert d.p50 == pytest.approx(2.5)
    assert d.p90 == pytest.approx(3.7)  # rank 2.7: 3 + 0.7 * (4 - 3)
    assert d.p95 == pytest.approx(3.85)
    assert d.p99 == pytest.approx(3.97)


def test_distribution_scales_skips_none_and_nan_and_reports_empty():
    d = distribution([0.1, None, math.nan, 0.3], scale=1e3)
    assert d.n == 2 and d.mean == pytest.approx(200.0) and d.p50 == pytest.approx(200.0)
    assert distribution([]) == EMPTY
    assert math.isnan(EMPTY.p95)
    assert EMPTY.as_flat("ttft_ms")["ttft_ms_p95"] is None  # JSON has no NaN


def test_distribution_of_one_value_is_that_value_everywhere():
    d = distribution([7.0])
    assert (d.mean, d.p50, d.p90, d.p99, d.min, d.max) == (7.0, 7.0, 7.0, 7.0, 7.0, 7.0)


# ---- one request --------------------------------------------------------------------------------------


def test_request_figures_from_its_times():
    r = rec(0, start=1.0, first=1.25, end=2.25, tokens=11, sent=1.5, load_s=0.05, prompt_eval_s=0.05,
            eval_s=1.0)
    assert r.ok
    assert r.ttft_s == pytest.approx(0.25)  # from the arrival, not the send: queueing counts
    assert r.queue_s == pytest.approx(0.5)
    assert r.e2e_s == pytest.approx(1.25)
    assert r.tpot_s == pytest.approx(0.1)  # (2.25 - 1.25) / (11 - 1)
    assert r.wait_s == pytest.approx(0.2)  # 0.25 TTFT - 0.05 server prompt time
    assert r.server_decode_tokens_per_s == pytest.approx(11.0)


def test_a_single_token_has_no_tpot_and_a_failure_is_not_ok():
    assert rec(0, 0, 0.1, 0.1, 1).tpot_s is None
    failed = RequestRecord(0, 0.0, 0.0, 0.2, error="server busy", error_kind="queue_full")
    assert not failed.ok and failed.ttft_s is None


def test_request_record_survives_json():
    r = rec(3, 0.5, 0.6, 1.0, 5, itl_s=(0.1, 0.1000004, 0.2), done_reason="length", prompt_tokens=40)
    back = RequestRecord.from_json(r.to_json())
    assert back.itl_s == (0.1, 0.1, 0.2)  # microsecond precision kept
    assert back.index == 3 and back.done_reason == "length" and back.prompt_tokens == 40


# ---- a point ------------------------------------------------------------------------------------------


def test_summary_of_four_requests_by_hand():
    records = [
        rec(0, 0.0, 0.2, 1.2, 11, itl_s=(0.1,) * 10),
        rec(1, 0.0, 0.4, 1.4, 11, itl_s=(0.1,) * 10),
        rec(2, 1.2, 1.4, 2.4, 21, itl_s=(0.05,) * 20),
        RequestRecord(3, 1.4, 1.4, 4.0, error="llama runner process has terminated: cudaMalloc failed: out of memory",
                      error_kind="oom"),
        rec(9, -5.0, -4.0, -1.0, 100, warmup=True),  # warm-up: never counted
    ]
    s = summarize(records, LatencyTargets(ttft_p95_ms=300, tpot_p95_ms=80))
    assert (s.requests, s.requests_ok, s.requests_failed) == (4, 3, 1)
    assert s.success_rate == 0.75
    assert s.duration_s == pytest.approx(4.0)  # first arrival 0.0 to last end 4.0
    assert s.output_tokens == 43
    assert s.output_tokens_per_s == pytest.approx(43 / 4.0)
    assert s.requests_per_s == pytest.approx(3 / 4.0)
    assert s.ttft_ms.mean == pytest.approx((200 + 400 + 200) / 3)
    assert s.ttft_ms.p50 == pytest.approx(200)
    assert s.tpot_ms.mean == pytest.approx((100 + 100 + 50) / 3)
    assert s.itl_ms.n == 40 and s.itl_ms.p50 == pytest.approx(75.0)  # twenty 100 ms and twenty 50 ms gaps
    assert s.e2e_ms.max == pytest.approx(1400)
    # Goodput: request 0 (ttft 200, tpot 100 > 80) misses, request 1 misses TTFT, request 2 meets both.
    assert s.goodput_rps == pytest.approx(1 / 4.0)
    assert s.goodput_share == pytest.approx(0.25)
    assert s.errors == {"oom": 1}
    assert "out of memory" in s.first_error
    assert s.request_tokens_per_s.max == pytest.approx(20.0)


def test_summary_flat_keys_are_what_the_json_needs():
    s = summarize([rec(0, 0.0, 0.1, 1.1, 11)])
    flat = s.flat()
    for key in ("requests_ok", "requests_failed", "output_tokens_per_s", "ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p95",
                "tpot_ms_p50", "tpot_ms_p95", "e2e_ms_p95", "itl_ms_p99", "goodput_rps"):
        assert key in flat
    assert flat["wait_ms_p95"] is None  # no server durations: unknown, not zero


def test_summary_with_no_requests_is_empty_not_an_error():
    s = summarize([])
    assert s.requests == 0 and s.output_tokens_per_s == 0.0 and math.isnan(s.success_rate)


def test_meets_targets_checks_p95s_and_success():
    fast = [rec(i, 0.0, 0.1, 1.0, 10) for i in range(100)]
    s = summarize(fast)
    assert meets_targets(s, LatencyTargets(200, 110, 0.99))
    assert not meets_targets(s, LatencyTargets(50, 110, 0.99))  # TTFT 100 ms > 50
    assert not meets_targets(s, LatencyTargets(200, 90, 0.99))  # TPOT 100 ms > 90
    one_bad = fast[:99] + [RequestRecord(99, 0.0, 0.0, 1.0, error="x", error_kind="server")]
    assert meets_targets(summarize(one_bad), LatencyTargets(200, 110, 0.99))  # 99 % is enough
    two_bad = fast[:98] + [RequestRecord(i, 0.0, 0.0, 1.0, error="x", error_kind="server") for i in (98, 99)]
    assert not meets_targets(summarize(two_bad), LatencyTargets(200, 110, 0.99))
    assert not meets_targets(summarize([]), LatencyTargets())
    assert LatencyTargets(2000, 100).describe() == "TTFT p95 ≤ 2000 ms, TPOT p95 ≤ 100 ms, ≥ 99 % success"


# ---- the workload plan --------------------------------------------------------------------------------


def test_chat_request_is_seeded_capped_and_cycles_the_prompts():
    plan = LoadPlan("qwen3:14b", prompts=(BenchPrompt("a", "hi", system="be brief"), BenchPrompt("b", "yo")),
                    num_predict=64, think=False, seed=10)
    request = plan.chat_request(3)
    assert request.think is False and request.model == "qwen3:14b"
    assert (request.seed, request.max_tokens) == (13, 64)
    assert request.messages == ({"role": "user", "content": "yo"},)  # request 3 -> prompt 3 % 2
    assert plan.chat_request(0).messages[0] == {"role": "system", "content": "be brief"}
    assert LoadPlan("m", think=None).chat_request(0).think is None  # the model decides


def test_plan_problems_say_what_to_fix():
    assert LoadPlan("m").problems() == []
    assert any("model" in p for p in LoadPlan(" ").problems())
    assert any("not both" in p for p in LoadPlan("m", requests=4, duration_s=2.0).problems())
    assert any("rate" in p for p in LoadPlan("m", mode="open", rate_rps=0).problems())
    assert any("clients" in p.lower() for p in LoadPlan("m", concurrency=0).problems())
    assert LoadPlan("m", mode="open", rate_rps=2.0, concurrency=0).problems() == []  # no cap is fine


def test_requests_per_client_settles_per_point():
    plan = LoadPlan("m", requests=None, requests_per_client=4)
    assert plan.problems() == []
    assert plan.for_point(1).requests == 8  # at least eight for meaningful percentiles
    assert plan.for_point(8).requests == 32 and plan.for_point(8).concurrency == 8
    assert "4 requests per client" in plan.describe()


def test_plan_survives_json():
    plan = LoadPlan("m", mode="open", rate_rps=3.5, concurrency=2, requests=None, duration_s=10.0, think="high",
                    prompts=(BenchPrompt("x", "text", "sys"),))
    assert LoadPlan.from_json(plan.to_json()) == plan


def test_prompt_sets_come_from_the_console_presets():
    sets = prompt_sets()
    assert "ai-trends-essay-zh" in sets and "mixed" in sets
    assert sets["ai-trends-essay-zh"][0].text.startswith("请用中文写一篇")


@pytest.mark.parametrize("text, expected", [
    ("first prompt\n\nsecond prompt\n", ["first prompt", "second prompt"]),
    ('{"prompt": "a"}\n{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "b"}]}\n',
     ["a", "b"]),
    ('["a", {"prompt": "b", "name": "named"}]', ["a", "b"]),
])
def test_prompt_file_formats(text, expected):
    assert [p.text for p in parse_prompt_file(text)] == expected


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ('{"prompt": "a"}\n{"oops"\n', "line 2"),
    ('[1, 2]', "entry 1"),
    ('{"messages": []}', "needs a non-empty"),
    ("[not json", "not a JSON array"),
])
def test_prompt_file_errors_name_the_place(text, words):
    with pytest.raises(PromptFileError, match=words):
        parse_prompt_file(text, "prompts.jsonl")
