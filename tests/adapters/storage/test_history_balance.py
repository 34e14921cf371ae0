"""A point's shares behind a balancer in the benchmark history: kept in the point's document and given back with
the run, without a new format (a point kept before there were any reads as not measured at a balancer)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from app.adapters.storage.history import BenchHistory
from app.core.bench.balance import BalanceVerdict, judge
from tests.core.bench.test_balance import llama
from tests.core.bench.test_point_events import make_run


def test_a_points_shares_come_back_from_the_history(tmp_path: Path) -> None:
    path = tmp_path / "benchmarks.sqlite3"
    run = make_run((), ())
    uneven = judge([llama("a", 96), llama("b", 32)])
    run = replace(run, results=(run.results[0], replace(run.results[1], balance=uneven)))
    run_id = BenchHistory(path).save(run)
    loaded = BenchHistory(path).load(run_id)
    assert [r.balance for r in loaded.results] == [None, uneven]
    assert loaded.results[1].balance is not None and loaded.results[1].balance.verdict is BalanceVerdict.UNEVEN
