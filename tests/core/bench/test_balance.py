"""Each backend's share behind a balancer and the verdict on the spread, in the table, JSON, CSV and report; the
figures are the ones llama-server's counters gave in tests/cli/test_bench_balancer.py (it keeps no request
counter) and a vLLM-like server's request counter (request_success_total)."""

from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given, settings, strategies as st

from app.core.bench.balance import (Balance, BackendShare, BalanceVerdict, Figure, FigureSource, Measure, judge)
from app.core.bench.run import result_from_json, result_to_json, run_to_csv, run_to_markdown, table_header, table_rows
from app.adapters.storage.saved_format import SAVED_FORMAT
from tests.core.bench.test_point_events import TARGETS, make_run

NOT_COUNTED = Figure.unavailable("not counted by this server")


def llama(name: str, generated: float, prompt: float = 40.0) -> BackendShare:
    """A llama-server's figures: tokens from its counters, requests not counted."""
    return BackendShare(name, f"http://{name}", NOT_COUNTED, Figure(prompt, FigureSource.SERVER_COUNTER),
                        Figure(generated, FigureSource.SERVER_COUNTER))


def counted(name: str, requests: float, generated: float) -> BackendShare:
    return replace(llama(name, generated), requests=Figure(requests, FigureSource.SERVER_COUNTER))


def test_an_even_split_of_tokens_is_even_and_the_shares_add_up() -> None:
    balance = judge([llama("a", 64), llama("b", 64)])
    assert balance.verdict is BalanceVerdict.EVEN and balance.measure is Measure.GENERATED_TOKENS
    assert [b.generated_tokens.share_pct for b in balance.backends] == [50.0, 50.0]
    assert [b.requests.share_pct for b in balance.backends] == [None, None]  # nothing counted: no share made up
    assert balance.cell() == "a 50% / b 50%" and not balance.warns
    lines = balance.lines()
    assert lines[0] == ("a (http://a): requests: not counted by this server; prompt tokens evaluated 40 = 50% "
                        "(from its counter); generated tokens 64 = 50% (from its counter)")
    assert lines[-1] == "Spread even on generated tokens: 0 points off an even split, largest/smallest 1.00."


def test_five_of_eight_is_still_even_but_three_to_one_is_uneven() -> None:
    assert judge([llama("a", 5 * 16), llama("b", 3 * 16)]).verdict is BalanceVerdict.EVEN  # 12.5 points off
    uneven = judge([llama("a", 9 * 16), llama("b", 3 * 16)])
    assert uneven.verdict is BalanceVerdict.UNEVEN and uneven.warns
    assert uneven.off_points == 25.0 and uneven.ratio == 3.0
    assert uneven.cell() == "a 75% / b 25% (UNEVEN)"


def test_requests_are_judged_where_every_backend_counts_them() -> None:
    balance = judge([counted("a", 6, 60), counted("b", 2, 100)])
    assert balance.measure is Measure.REQUESTS and balance.verdict is BalanceVerdict.UNEVEN
    assert balance.cell() == "a 75% / b 25% (UNEVEN)"
    # One backend without a request counter: judged on tokens, its requests said not counted.
    mixed = judge([counted("a", 6, 60), llama("b", 60)])
    assert mixed.measure is Measure.GENERATED_TOKENS and mixed.verdict is BalanceVerdict.EVEN
    assert mixed.backends[0].requests.share_pct is None


def test_a_backend_that_did_nothing_is_idle_and_one_not_read_is_unknown() -> None:
    idle = judge([llama("a", 128), llama("b", 0, prompt=0)])
    assert idle.verdict is BalanceVerdict.ONE_BACKEND_IDLE and idle.warns and idle.ratio is None
    assert idle.cell() == "a 100% / b 0% (a backend idle)"
    down = Figure.unavailable("it did not answer after the point (connection refused)")
    unknown = judge([llama("a", 128), BackendShare("b", "http://b", down, down, down)])
    assert unknown.verdict is BalanceVerdict.UNKNOWN and not unknown.warns
    assert unknown.reason == "b: it did not answer after the point (connection refused)"
    assert unknown.cell() == "a ? / b ?"
    assert unknown.backends[0].generated_tokens.value == 128  # a's own figure is still there
    assert judge([llama("a", 0), llama("b", 0)]).verdict is BalanceVerdict.UNKNOWN  # no work seen
    assert judge([llama("a", 10)]).verdict is BalanceVerdict.UNKNOWN  # one backend is no spread


def test_the_shares_ride_in_the_table_json_csv_report_and_the_saved_result() -> None:
    run = make_run((), ())
    even, uneven = judge([llama("a", 64), llama("b", 64)]), judge([llama("a", 96), llama("b", 32)])
    run = replace(run, results=(replace(run.results[0], balance=even), replace(run.results[1], balance=uneven)))
    assert table_header(run.results)[-2] == "Behind the balancer"
    assert [row[-2] for row in table_rows(run.results)] == ["a 50% / b 50%", "a 75% / b 25% (UNEVEN)"]
    csv_lines = run_to_csv(run).splitlines()
    assert csv_lines[0].endswith(",balance,balance_verdict,balance_measure")
    assert csv_lines[2].endswith(",a 75% / b 25% (UNEVEN),uneven,generated_tokens")
    report = run_to_markdown(run, {})
    assert "## Behind the balancer" in report and "### parallel 2: a 75% / b 25% (UNEVEN) ⚠" in report
    from app.core.bench.run import run_to_json
    points = json.loads(json.dumps(run_to_json(run, SAVED_FORMAT)))["points"]
    assert points[1]["balance_verdict"] == "uneven"
    assert points[1]["balance"]["backends"][0]["generated_tokens"] == {
        "value": 96.0, "source": "server_counter", "why": "", "share_pct": 75.0}
    back = result_from_json(json.loads(json.dumps(result_to_json(run.results[1]))), TARGETS, SAVED_FORMAT)
    assert back.balance == uneven
    assert result_from_json(result_to_json(make_run(()).results[0]), TARGETS, SAVED_FORMAT).balance is None


SCALAR = st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=6)
FIGURE = st.dictionaries(st.sampled_from(["value", "source", "why", "share_pct"]),
                         SCALAR | st.sampled_from([s.value for s in FigureSource]), max_size=4)
BACKEND = st.dictionaries(st.sampled_from(["name", "url", "requests", "prompt_tokens", "generated_tokens"]),
                          SCALAR | FIGURE, max_size=5)


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["backends", "verdict", "measure", "off_points", "ratio", "reason"]),
                       SCALAR | st.lists(BACKEND | SCALAR, max_size=3)
                       | st.sampled_from([v.value for v in BalanceVerdict] + [m.value for m in Measure]), max_size=6))
def test_a_damaged_saved_balance_reads_as_something_or_nothing_never_an_error(data: dict) -> None:
    balance = Balance.from_json(data)
    if balance is not None:
        balance.cell()
        balance.lines()
        json.dumps(balance.to_json())
