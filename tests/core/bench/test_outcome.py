"""A point's failure kind: set by the sweep where the failure is found, read back from a saved point,
and shown in words written in one place."""

from __future__ import annotations

import pytest

from app.core.bench.contention import Contention, ContentionKind
from app.core.bench.outcome import (ERROR_WORDS, FAILURE_WORDS, REASONS, REQUEST_FAILURES, FailureKind, PointStatus,
                                    failure_of_saved, request_failure)
from app.core.bench.run import result_from_json, result_to_json
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import PointResult, SweepPoint
from app.core.server.settings import ServerSettings
from app.adapters.storage.saved_format import SAVED_FORMAT

TARGETS = LatencyTargets(2000, 100)


def test_every_kind_has_its_words_and_every_request_error_class_a_kind() -> None:
    assert set(FAILURE_WORDS) == set(FailureKind)
    assert all(w.cell and w.mark for w in FAILURE_WORDS.values())
    assert set(REQUEST_FAILURES) == set(ERROR_WORDS)


def test_failed_requests_name_the_first_class_met_or_the_most_common() -> None:
    errors = {"timeout": 1, "oom": 3}
    assert request_failure(errors) is FailureKind.TIMEOUT
    assert request_failure(errors, most_common=True) is FailureKind.OUT_OF_MEMORY
    assert request_failure({"something new": 2}) is FailureKind.REQUEST_ERROR
    assert request_failure({}) is FailureKind.REQUEST_ERROR


def _records(*kinds: str) -> tuple[RequestRecord, ...]:
    return tuple(RequestRecord(i, 0.0, 0.0, 0.5, first_token_s=None if kind else 0.1, output_tokens=0 if kind else 10,
                               error=kind, error_kind=kind) for i, kind in enumerate(kinds))


# The reasons the sweep writes with each kind (app/services/bench: sweep_runner and sweep_words).
SWEEP_OUTCOMES = [
    (PointStatus.SKIPPED, FailureKind.INVALID_SETTINGS, REASONS[FailureKind.INVALID_SETTINGS], ()),
    (PointStatus.SKIPPED, FailureKind.PREDICTED_SPILL, "predicted to spill to CPU (12/41 layers on GPU)", ()),
    (PointStatus.SKIPPED, FailureKind.PREDICTED_OUT_OF_MEMORY,
     "predicted to run the computer out of memory (70.1 GiB of RAM needed, 16.0 GiB available)", ()),
    (PointStatus.SKIPPED, FailureKind.PREDICTED_WONT_LOAD, "predicted not to load (30.2 GiB needed, 23.5 GiB free)", ()),
    (PointStatus.FAILED, FailureKind.NO_START, "server did not start", ()),
    (PointStatus.FAILED, FailureKind.OUT_OF_MEMORY, "out of memory at load", ()),
    (PointStatus.FAILED, FailureKind.HOST_OUT_OF_MEMORY, "the computer ran out of memory at load", ()),
    (PointStatus.FAILED, FailureKind.CRASHED, "server crashed at load", ()),
    (PointStatus.FAILED, FailureKind.LOAD_ERROR, "model did not load", ()),
    (PointStatus.FAILED, FailureKind.SPILLED, "spilled to CPU (48%/52% CPU/GPU)", ()),
    (PointStatus.FAILED, FailureKind.CRASHED, "server crashed during the run", ("", "")),
    (PointStatus.FAILED, FailureKind.SPILLED, "spilled to CPU during the run (100% CPU)", ("", "")),
    *[(PointStatus.FAILED, REQUEST_FAILURES[k], f"every request failed ({ERROR_WORDS[k]})", (k, k))
      for k in ERROR_WORDS],
    (PointStatus.UNSTABLE, FailureKind.TIMEOUT, "2 of 4 failed (out of memory ×1, timed out ×1)",
     ("", "oom", "timeout", "timeout")),
    (PointStatus.CANCELLED, FailureKind.CANCELLED, "", ()),
    (PointStatus.OK, None, "", ("", "")),
    (PointStatus.OK, None, "on the CPU (no GPU)", ("",)),
]


@pytest.mark.parametrize(("status", "kind", "reason", "errors"), SWEEP_OUTCOMES)
def test_a_saved_point_reads_back_with_the_kind_the_sweep_gave_it(status, kind, reason, errors) -> None:
    records = _records(*errors)
    result = PointResult(SweepPoint(3, ServerSettings(num_parallel=4), 4), status, reason,
                         summarize(records, TARGETS) if records else None, records, failure=kind)
    saved = result_to_json(result)
    assert "failure" not in saved  # the saved format is the previous release's
    assert result_from_json(saved, TARGETS, SAVED_FORMAT).failure is kind


def test_a_contended_point_reads_back_as_contended_even_with_a_failed_request() -> None:
    contention = Contention(ContentionKind.CPU, cpu_others_pct=31.0, cpu_idle_pct=10.0, cores=8)
    result = PointResult(SweepPoint(0, ServerSettings(), 1), PointStatus.UNSTABLE, contention.short_text(),
                         summarize(_records("", "", "timeout"), TARGETS), _records("", "", "timeout"), contention=contention, failure=FailureKind.CONTENDED)
    assert result_from_json(result_to_json(result), TARGETS, SAVED_FORMAT).failure is FailureKind.CONTENDED
    assert failure_of_saved(PointStatus.UNSTABLE, "1 of 3 failed (timed out ×1)", {"timeout": 1},
                            contention.short_text()) is FailureKind.TIMEOUT
