"""The rate ladder and its judgement (app/core/bench/capacity.py)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.bench.capacity import (MAX_LADDER_STEPS, SECONDS_PER_DAY, Capacity, CapacityError, CapacityStatus,
                                     MissKind, RateLadder, at_factor, capacity_lines, capacity_markdown,
                                     capacity_to_csv, check_scalable, class_rates, judge_step, open_rate,
                                     make_ladder, parse_rate_spec, rate_sweep_refusal, step_duration, STEP_SECONDS)
from app.core.bench.scenario import BUILTIN_SCENARIOS, Arrival, Length, RequestClass, Scenario
from app.core.bench.stats import ClassTargets, LatencyTargets, RequestRecord

LOOSE = LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None, min_success=0.99)
QA = Scenario("qa", (RequestClass("qa", Length.fixed(20), Length.fixed(10), Arrival("poisson", 2.0),
                                  targets=ClassTargets(e2e_p95_ms=8000)),))


def record(i: int, cls: str, arrival: float, ttft: float, e2e: float, kind: str = "") -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=arrival, sent_s=arrival, end_s=arrival + e2e,
                         first_token_s=arrival + ttft, output_tokens=10, request_class=cls,
                         error="the server cut it" if kind else "", error_kind=kind)


def steady(cls: str, rate: float, n: int, ttft: float, e2e: float, grow: float = 0.0) -> list[RequestRecord]:
    """n arrivals at `rate`, each taking `e2e` s (plus `grow` s more per earlier arrival: a growing queue)."""
    return [record(i, cls, i / rate, ttft + grow * i, e2e + grow * i) for i in range(n)]


def served_by(capacity_rps: float, scenario: Scenario = QA):
    """A server that answers in 1 s up to `capacity_rps` and queues beyond it."""
    def measure(factor: float) -> list[RequestRecord]:
        rate = open_rate(scenario) * factor
        grow = max(0.0, 1 / capacity_rps - 1 / rate)  # each arrival waits for the backlog before it
        return steady(scenario.classes[0].name, rate, 24, 0.2, 1.0, grow)
    return measure


def sweep(ladder: RateLadder, measure, scenario: Scenario = QA, targets: LatencyTargets = LOOSE) -> Capacity:
    capacity = Capacity(scenario, ladder, targets=targets)
    order = 0
    while (factor := capacity.next_factor()) is not None:
        capacity = capacity.with_step(judge_step(factor, measure(factor), scenario, targets, ladder, order=order))
        order += 1
        assert order < 100
    return capacity


# ---- the spelling of --rate-sweep ----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "ladder"), [
    ("", RateLadder()), (None, RateLadder()), ("0.5:8", RateLadder(start=0.5, stop=8.0)),
    ("0.5:", RateLadder(start=0.5)), (":8", RateLadder(stop=8.0)), (" 2 : 4 ", RateLadder(start=2.0, stop=4.0)),
    ("0.5,1,2,4", RateLadder(rates=(0.5, 1.0, 2.0, 4.0))), ("3", RateLadder(rates=(3.0,)))])
def test_rate_spec_spellings(text: str | None, ladder: RateLadder) -> None:
    assert parse_rate_spec(text) == ladder


@pytest.mark.parametrize(("text", "words"), [
    ("abc", "not a number"), ("8:0.5", "below the start"), ("0:1", "above 0"), ("1:2:3", "START:STOP"),
    (":", "START:STOP"), (",", "give rates"), ("nan", "above 0"), ("inf:", "above 0"), ("1,-2", "above 0"),
    ("1,x", "not a number"), ("20000", "at most")])
def test_rate_spec_nonsense_is_refused_with_words(text: str, words: str) -> None:
    with pytest.raises(CapacityError, match=words):
        parse_rate_spec(text)


def test_ladder_problems_name_the_field() -> None:
    assert RateLadder(refine=11).problems() == ["the refining steps (11) must be from 0 to 10"]
    assert "growth" in RateLadder(growth=1.0).problems()[0]
    assert RateLadder().problems() == []


# ---- the scenario at a factor --------------------------------------------------------------------------

def test_only_open_loop_classes_are_scaled() -> None:
    closed = RequestClass("chat", Length.fixed(5), Length.fixed(5), Arrival("closed", 0.0, 3))
    scenario = Scenario("m", (*BUILTIN_SCENARIOS["mixed"].classes, closed))
    doubled = at_factor(scenario, 2.0)
    assert [c.arrival.rate_rps for c in doubled.classes[:3]] == [2.0, 0.4, 1.0]
    assert doubled.classes[3] == closed
    assert class_rates(scenario, 2.0) == {"customer-qa": 2.0, "long-document": 0.4, "code-review": 1.0}
    assert open_rate(doubled) == pytest.approx(3.4)


def test_a_scenario_without_an_open_loop_class_is_refused() -> None:
    with pytest.raises(CapacityError, match="no open-loop class"):
        check_scalable(BUILTIN_SCENARIOS["content-generation"])
    with pytest.raises(CapacityError):
        at_factor(BUILTIN_SCENARIOS["content-generation"], 2.0)


# ---- judging one step ----------------------------------------------------------------------------------

def test_a_step_within_every_target_meets_them() -> None:
    step = judge_step(1.0, steady("qa", 2.0, 20, 0.2, 1.0), QA, LOOSE)
    assert step.met and step.misses == ()
    assert step.offered_rps == 2.0 and step.offered_per_class == {"qa": 2.0}
    assert step.arrival_rps == pytest.approx(2.0)
    assert step.achieved_rps == pytest.approx(2.0)


def test_a_class_target_missed_is_data_and_words() -> None:
    step = judge_step(1.0, steady("qa", 2.0, 20, 0.2, 9.1), QA, LOOSE)
    assert not step.met
    miss = step.misses[0]
    assert (miss.kind, miss.metric, miss.class_name, miss.limit) == (MissKind.CLASS_TARGET, "e2e_p95_ms", "qa", 8000)
    assert miss.measured == pytest.approx(9100)
    assert miss.words() == "qa E2E P95 9.1 s > 8 s"


def test_run_targets_count_too() -> None:
    targets = LatencyTargets(ttft_p95_ms=500, tpot_p95_ms=None, min_success=0.5)
    step = judge_step(1.0, steady("qa", 2.0, 20, 0.9, 1.0), QA, targets)
    assert [(m.kind, m.metric) for m in step.misses] == [(MissKind.LATENCY_TARGET, "ttft_p95_ms")]
    assert step.misses[0].words() == "TTFT P95 900 ms > 500 ms"


def test_any_failed_or_truncated_request_is_a_miss() -> None:
    records = steady("qa", 2.0, 20, 0.2, 1.0)
    records[3] = record(3, "qa", 1.5, 0.2, 1.0, kind="truncated")
    records[5] = record(5, "qa", 2.5, 0.2, 1.0, kind="timeout")
    step = judge_step(1.0, records, QA, LatencyTargets(None, None, min_success=0.5))
    kinds = {m.kind: m for m in step.misses}
    assert set(kinds) == {MissKind.TRUNCATED, MissKind.FAILED}
    assert kinds[MissKind.TRUNCATED].words() == "1 of 20 requests cut by the server (the server cut it)"
    assert kinds[MissKind.FAILED].measured == 1 and kinds[MissKind.FAILED].detail == "timeout"


def test_a_server_that_falls_behind_misses_even_without_targets() -> None:
    scenario = Scenario("q", (RequestClass("q", Length.fixed(5), Length.fixed(5), Arrival("poisson", 4.0)),))
    # Arrivals at 4/s, served at 2/s: every request waits 0.25 s longer than the one before it.
    step = judge_step(1.0, steady("q", 4.0, 40, 0.1, 0.5, grow=0.25), scenario, LOOSE)
    assert [m.kind for m in step.misses] == [MissKind.FELL_BEHIND]
    assert step.achieved_rps == pytest.approx(2.0, rel=0.1)
    assert step.misses[0].words().startswith("the server fell behind: served 2.")


def test_a_step_whose_load_never_arrived_misses_instead_of_passing_any_rate() -> None:
    """Conversations whose turns wait for replies (or a request count a high rate spends at once) cannot load the
    server at the offered rate: 9 requests arriving at 1/s do not measure 100/s, whatever their latency."""
    scenario = Scenario("c", (RequestClass("c", Length.fixed(5), Length.fixed(5), Arrival("poisson", 0.5), turns=3),))
    step = judge_step(200.0, steady("c", 1.0, 9, 0.1, 0.5), scenario, LOOSE)
    assert step.offered_rps == pytest.approx(100.0)
    assert [m.kind for m in step.misses] == [MissKind.LOAD_NOT_REACHED]
    assert step.misses[0].words().startswith("the load was not reached: 1.00/s of 100.00/s offered arrived")
    assert not judge_step(2.0, steady("c", 1.0, 9, 0.1, 0.5), scenario, LOOSE).misses  # 1/s offered, 1/s came
    assert not judge_step(4.0, steady("c", 1.0, 9, 0.1, 0.5), scenario, LOOSE).misses  # half of it: Poisson noise


def test_a_ladder_stopped_by_a_load_that_never_arrived_gives_a_lower_bound_not_a_capacity() -> None:
    scenario = Scenario("c", (RequestClass("c", Length.fixed(5), Length.fixed(5), Arrival("poisson", 0.5), turns=3),))
    # Nine requests of three-turn conversations: about 1/s arrives whatever the rate asked.
    capacity = sweep(RateLadder(rates=(1.0, 2.0, 8.0), refine=0), lambda _f: steady("c", 1.0, 9, 0.1, 0.5), scenario)
    assert [s.met for s in capacity.steps] == [True, True, False]
    assert capacity.status is CapacityStatus.LOAD_LIMITED and capacity.sustainable_rps == pytest.approx(2.0)
    assert capacity.summary().startswith("sustainable: at least 2 requests/s ≈ at least 173,000 requests a day; "
                                         "no higher rate could be measured; broke at 8/s: the load was not reached")


def test_a_step_that_measured_nothing_misses() -> None:
    step = judge_step(1.0, [], QA, LOOSE, failure="the server crashed", failure_detail="exit 1")
    assert [m.kind for m in step.misses] == [MissKind.NOT_MEASURED]
    assert "the server crashed: exit 1" in step.misses[0].words()


# ---- the ladder ----------------------------------------------------------------------------------------

def test_the_ladder_climbs_then_bisects_and_reports_the_last_good_rate() -> None:
    ladder = RateLadder(refine=2)
    # Base 2/s: steps 1, 1.5, 2.25 (served at 2/s: 89 % kept up), 3.375 (59 %: misses), then 2.81 and 2.53 miss.
    capacity = sweep(ladder, served_by(2.0))
    in_order = [round(s.offered_rps, 3) for s in sorted(capacity.steps, key=lambda s: s.order)]
    assert in_order == [1.0, 1.5, 2.25, 3.375, 2.812, 2.531]
    rates = [s.offered_rps for s in capacity.steps]
    assert rates == sorted(rates)
    assert capacity.status is CapacityStatus.FOUND
    assert capacity.sustainable_rps == pytest.approx(2.25)
    assert capacity.requests_per_day == pytest.approx(2.25 * SECONDS_PER_DAY)
    assert capacity.class_mix == {"qa": pytest.approx(2.25)}
    assert capacity.broke_at is not None and capacity.broke_at.offered_rps == pytest.approx(2.53125)
    assert capacity.broke_by[0].kind is MissKind.FELL_BEHIND
    assert capacity.summary() == ("sustainable: 2.25 requests/s ≈ 194,000 requests a day; broke at 2.53/s: the "
                                  "server fell behind: served 2.00/s of 2.53/s arriving")


def test_never_met_and_never_broke() -> None:
    never = sweep(RateLadder(), lambda f: steady("qa", 2 * f, 12, 0.2, 9.5))
    assert never.status is CapacityStatus.NEVER_MET and never.sustainable_rps is None
    assert len(never.steps) == 1 and never.requests_per_day is None
    assert never.summary().startswith("not sustainable even at the lowest rate tried, 1 requests/s: qa E2E P95")
    always = sweep(RateLadder(rates=(1.0, 2.0, 4.0)), lambda f: steady("qa", 2 * f, 12, 0.2, 1.0))
    assert always.status is CapacityStatus.NEVER_BROKE
    assert always.sustainable_rps == 4.0
    assert always.summary().startswith("sustainable: at least 4 requests/s ≈ at least 346,000 requests a day; no step")


def test_explicit_rates_run_ascending_and_stop_at_the_first_miss() -> None:
    ladder = RateLadder(rates=(8.0, 1.0, 4.0, 2.0), refine=0)
    capacity = sweep(ladder, served_by(3.0))
    assert [s.offered_rps for s in sorted(capacity.steps, key=lambda s: s.order)] == [1.0, 2.0, 4.0]


def test_a_geometric_ladder_without_a_stop_is_bounded() -> None:
    factors = RateLadder().ladder(1.0)
    assert len(factors) == MAX_LADDER_STEPS and factors[0] == 0.5
    assert all(b == pytest.approx(a * 1.5) for a, b in zip(factors, factors[1:]))
    assert RateLadder(start=1.0, stop=5.0).ladder(2.0) == (0.5, 0.75, 1.125, 1.6875, 2.5)


@settings(max_examples=150, deadline=None)
@given(threshold=st.floats(0.05, 40.0), start=st.floats(0.1, 3.0), refine=st.integers(0, 5),
       growth=st.floats(1.1, 3.0))
def test_any_monotone_server_gives_a_consistent_capacity(threshold: float, start: float, refine: int,
                                                         growth: float) -> None:
    """Met exactly up to `threshold` req/s: the ladder ends, the sustainable rate is the highest met step below
    the lowest missed one, within the threshold, and requests/day follows."""
    ladder = RateLadder(start=start, refine=refine, growth=growth)

    def measure(factor: float) -> list[RequestRecord]:
        return steady("qa", 2 * factor, 10, 0.2, 1.0 if 2 * factor <= threshold else 9.0)

    capacity = sweep(ladder, measure)
    assert len(capacity.steps) <= MAX_LADDER_STEPS + refine
    rates = [s.offered_rps for s in capacity.steps]
    assert rates == sorted(rates)
    if start > threshold:
        assert capacity.status is CapacityStatus.NEVER_MET and len(capacity.steps) == 1
        return
    rate = capacity.sustainable_rps
    assert rate is not None and rate <= threshold
    assert capacity.requests_per_day == pytest.approx(rate * SECONDS_PER_DAY)
    if capacity.status is CapacityStatus.FOUND:
        bad = capacity.broke_at
        assert bad is not None and bad.offered_rps > threshold
        assert rate == max(s.offered_rps for s in capacity.steps if s.met and s.offered_rps < bad.offered_rps)
        assert sum(1 for s in capacity.steps if rate < s.offered_rps < bad.offered_rps) == 0


# ---- keeping it ----------------------------------------------------------------------------------------

def test_json_round_trip_keeps_the_judgement_and_the_figures() -> None:
    scenario = BUILTIN_SCENARIOS["mixed"].scaled(0.01)
    ladder = RateLadder(start=0.5, refine=1)
    capacity = sweep(ladder, lambda f: [r for i, c in enumerate(scenario.classes) for r in
                                        steady(c.name, c.arrival.rate_rps * f * 2, 8, 0.1 * f, 0.5 * f + i)],
                     scenario, LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None))
    assert capacity.status is CapacityStatus.FOUND
    text = json.dumps(capacity.to_json(with_records=True))
    back = Capacity.from_json(json.loads(text))
    assert back.status is capacity.status and back.sustainable_rps == capacity.sustainable_rps
    assert back.broke_by == capacity.broke_by and back.class_mix == capacity.class_mix
    assert [s.stats for s in back.steps] == [s.stats for s in capacity.steps]
    assert [s.classes for s in back.steps] == [s.classes for s in capacity.steps]
    assert back.scenario == capacity.scenario and back.ladder == capacity.ladder
    # Without the requests (the exports) the judgement still reads back; the statistics are empty.
    light = Capacity.from_json(json.loads(json.dumps(capacity.to_json())))
    assert light.sustainable_rps == capacity.sustainable_rps and light.steps[0].stats.requests == 0
    assert capacity.to_json()["requests_per_day"] == pytest.approx(capacity.sustainable_rps * SECONDS_PER_DAY)


def test_absent_fields_read_with_defaults() -> None:
    bare = Capacity.from_json({"scenario": QA.to_json()})
    assert bare.steps == () and bare.status is CapacityStatus.INCOMPLETE and bare.ladder == RateLadder()
    step_only = Capacity.from_json({"scenario": QA.to_json(), "steps": [{"factor": 1.0, "offered_rps": 2.0,
                                                                          "misses": [{"kind": "new_kind"}]}]})
    assert step_only.steps[0].misses[0].kind is MissKind.NOT_MEASURED
    assert step_only.status is CapacityStatus.NEVER_MET


def test_exports_carry_every_step() -> None:
    capacity = sweep(RateLadder(refine=1), served_by(3.2))
    csv_lines = capacity_to_csv(capacity).splitlines()
    assert len(csv_lines) == 1 + len(capacity.steps) and csv_lines[0].startswith("setting,factor,offered_rps")
    lines = capacity_lines(capacity)
    assert lines[-1] == capacity.summary() and len(lines) == 1 + 1 + len(capacity.steps) + 2
    markdown = capacity_markdown(capacity)
    assert markdown.count("\n| ") == 1 + len(capacity.steps) and capacity.summary() in markdown
    assert math.isclose(capacity.requests_per_day or 0, (capacity.sustainable_rps or 0) * 86_400)


# ---- what the CLI and the Benchmark page both build -----------------------------------------------------

def test_make_ladder_reads_the_spelling_and_the_refining_steps() -> None:
    assert make_ladder("1,2", 3) == RateLadder(rates=(1.0, 2.0), refine=3)
    assert make_ladder("", None) == RateLadder()
    with pytest.raises(CapacityError, match="the stop \\(1\\) is below the start \\(8\\)"):
        make_ladder("8:1")
    with pytest.raises(CapacityError, match="the refining steps \\(11\\) must be from 0 to 10"):
        make_ladder("0.5:8", 11)


def test_a_rate_sweep_is_refused_with_the_reason_where_no_rate_can_rise() -> None:
    assert rate_sweep_refusal(QA) == ""
    assert "one prompt at one load has no classes to raise" in rate_sweep_refusal(None)
    assert "content-generation has no open-loop class" in rate_sweep_refusal(BUILTIN_SCENARIOS["content-generation"])


def test_each_step_lasts_the_default_seconds_unless_a_stop_is_asked() -> None:
    assert step_duration(None, None) == STEP_SECONDS
    assert step_duration(None, 5.0) == 5.0
    assert step_duration(12, None) is None
