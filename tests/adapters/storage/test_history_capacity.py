"""A run with a rate sweep is kept in the history with every step's requests, and reads back judged alike;
runs without one (every run stored before rate sweeps) read with no capacity."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace

from app.adapters.storage.history import BenchHistory
from app.core.bench.capacity import Capacity, CapacityStatus, RateLadder, judge_step
from app.core.bench.outcome import RunStatus
from app.core.bench.scenario import BUILTIN_SCENARIOS
from app.core.bench.stats import LatencyTargets, RequestRecord
from tests.adapters.storage.test_history import make_run

TARGETS = LatencyTargets(ttft_p95_ms=None, tpot_p95_ms=None)


def step_records(rate: float, e2e: float) -> list[RequestRecord]:
    return [RequestRecord(index=i, scheduled_s=i / rate, sent_s=i / rate, end_s=i / rate + e2e,
                          first_token_s=i / rate + 0.1, output_tokens=5, itl_s=(0.01, 0.02),
                          request_class="customer-qa") for i in range(8)]


def capacity() -> Capacity:
    scenario = BUILTIN_SCENARIOS["customer-qa"]  # TTFT avg ≤ 500 ms, P95 ≤ 600 ms; 1 req/s
    out = Capacity(scenario, RateLadder(refine=1), setting="parallel 4 · no client cap", targets=TARGETS,
                   notes=("The rate sweep ran at the sweep's one setting (parallel 4 · no client cap).",))
    for order, (factor, e2e) in enumerate(((0.5, 0.3), (0.75, 0.4), (1.125, 0.9))):
        records = step_records(factor, e2e)
        if e2e > 0.5:
            records = [replace(r, first_token_s=r.scheduled_s + 0.8) for r in records]  # TTFT 800 ms: misses
        out = out.with_step(judge_step(factor, records, scenario, TARGETS, out.ladder, order=order,
                                       vram_peak_mib=812.5, gpu_util_pct=64.0))
    return out


def test_a_run_with_a_capacity_reads_back_with_its_steps_and_judgement(tmp_path):
    kept = capacity()
    assert kept.status is CapacityStatus.FOUND and kept.sustainable_rps == 0.75
    run = replace(make_run(points=1), capacity=kept, status=RunStatus.FINISHED)
    history = BenchHistory(tmp_path / "h.sqlite3")
    run_id = history.save(run)
    back = history.load(run_id).capacity
    assert back is not None
    assert back.status is CapacityStatus.FOUND and back.sustainable_rps == 0.75
    assert back.requests_per_day == 0.75 * 86_400 and back.class_mix == {"customer-qa": 0.75}
    assert back.broke_by == kept.broke_by and back.notes == kept.notes and back.setting == kept.setting
    assert [s.records for s in back.steps] == [s.records for s in kept.steps]
    assert [s.stats for s in back.steps] == [s.stats for s in kept.steps]
    assert [(s.vram_peak_mib, s.gpu_util_pct) for s in back.steps] == [(812.5, 64.0)] * 3


def test_the_run_document_has_a_capacity_section_only_when_there_is_one(tmp_path):
    history = BenchHistory(tmp_path / "h.sqlite3")
    plain = history.save(make_run(points=1))
    with_capacity = history.save(replace(make_run(points=1), capacity=capacity()))
    with sqlite3.connect(tmp_path / "h.sqlite3") as conn:
        docs = dict(conn.execute("SELECT id, doc FROM runs").fetchall())
    assert "capacity" not in json.loads(docs[plain])
    section = json.loads(docs[with_capacity])["capacity"]
    assert section["status"] == "found" and len(section["steps"][0]["records"]) == 8
    assert history.load(plain).capacity is None


def test_a_damaged_capacity_section_loses_only_itself(tmp_path):
    history = BenchHistory(tmp_path / "h.sqlite3")
    run_id = history.save(replace(make_run(points=1), capacity=capacity()))
    with sqlite3.connect(tmp_path / "h.sqlite3") as conn:
        doc = json.loads(conn.execute("SELECT doc FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
        doc["capacity"]["scenario"] = {"name": "x", "classes": "not a list"}
        conn.execute("UPDATE runs SET doc = ? WHERE id = ?", (json.dumps(doc), run_id))
    run = history.load(run_id)
    assert run.capacity is None and len(run.results) == 1
