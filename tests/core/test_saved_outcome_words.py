"""Outcomes are enums whose values are the words the previous release saved in its histories, JSON and
CSV exports: a value changed here would make old files read as something else."""

from __future__ import annotations

import json

from app.core.memory.verdict import Verdict, saved_verdict


def test_verdict_values_are_the_saved_words() -> None:
    assert {v.name: v.value for v in Verdict} == {
        "FITS": "fits", "TIGHT": "tight", "SPILLS": "spills", "WONT_LOAD": "wont_load",
        "UNKNOWN": "unknown", "INVALID": "invalid"}
    assert json.dumps({"predicted_verdict": Verdict.WONT_LOAD}) == '{"predicted_verdict": "wont_load"}'


def test_a_saved_verdict_reads_back_as_the_enum() -> None:
    assert saved_verdict("spills") is Verdict.SPILLS
    assert saved_verdict(None) is None and saved_verdict("") is None and saved_verdict("roomy") is None
