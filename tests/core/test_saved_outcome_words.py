"""Outcomes are enums whose values are the words the previous release saved in its histories, JSON and
CSV exports: a value changed here would make old files read as something else."""

from __future__ import annotations

import json

from app.core.bench.outcome import PointStatus, RunStatus, saved_point_status, saved_run_status
from app.core.memory.verdict import Verdict, saved_verdict


def test_verdict_values_are_the_saved_words() -> None:
    assert {v.name: v.value for v in Verdict} == {
        "FITS": "fits", "TIGHT": "tight", "SPILLS": "spills", "WONT_LOAD": "wont_load",
        "UNKNOWN": "unknown", "INVALID": "invalid"}
    assert json.dumps({"predicted_verdict": Verdict.WONT_LOAD}) == '{"predicted_verdict": "wont_load"}'


def test_a_saved_verdict_reads_back_as_the_enum() -> None:
    assert saved_verdict("spills") is Verdict.SPILLS
    assert saved_verdict(None) is None and saved_verdict("") is None and saved_verdict("roomy") is None


def test_point_status_values_are_the_saved_words() -> None:
    assert {s.name: s.value for s in PointStatus} == {
        "OK": "ok", "UNSTABLE": "unstable", "FAILED": "failed", "SKIPPED": "skipped", "CANCELLED": "cancelled"}
    assert json.dumps([PointStatus.FAILED]) == '["failed"]' and f"{PointStatus.SKIPPED}" == "skipped"


def test_run_status_values_are_the_saved_words() -> None:
    assert {s.name: s.value for s in RunStatus} == {
        "RUNNING": "running", "FINISHED": "finished", "CANCELLED": "cancelled", "INTERRUPTED": "interrupted",
        "UNREADABLE": "unreadable"}
    assert json.dumps({"status": RunStatus.CANCELLED}) == '{"status": "cancelled"}'


def test_saved_statuses_read_back_as_the_enums() -> None:
    assert [saved_point_status(w) for w in ("ok", "unstable", "failed", "skipped", "cancelled")] == list(PointStatus)
    # What the previous release did with a status it did not know: shown as a failure.
    assert saved_point_status("exploded") is PointStatus.FAILED and saved_point_status(None) is PointStatus.FAILED
    assert [saved_run_status(w) for w in ("running", "finished", "cancelled", "interrupted")] == list(RunStatus)[:4]
    assert saved_run_status("half-done") is RunStatus.UNREADABLE and saved_run_status(3) is RunStatus.UNREADABLE
