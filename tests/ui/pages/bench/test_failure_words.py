"""The results table and the throughput chart say why a point failed from its failure kind, never by
searching its reason's sentence."""

from __future__ import annotations

from dataclasses import replace

import pyqtgraph as pg

from app.core.bench.outcome import FAILURE_WORDS, FailureKind, PointStatus
from app.ui.pages.bench.results import RunView
from tests.adapters.storage.test_history import make_run
from tests.ui.page_context import run_documents


def _shown(qtbot, run) -> tuple[str, list[str]]:
    """The failed point's "Stable?" cell and the chart's marks for points that did not run."""
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.set_run(run)
    table = view.table
    cell = table.item(len(run.results) - 1, table.columnCount() - 1).text()
    texts = [item.textItem.toPlainText() for item in view.charts.throughput.plot.getPlotItem().items
             if isinstance(item, pg.TextItem)]
    marks = [t for t in texts if not t.replace(".", "").isdigit()]  # the measured points carry their tokens/s
    return cell, marks


def test_the_failed_point_is_shown_by_its_kind_whatever_its_sentence_says(qtbot):
    run = make_run()
    failed = run.results[-1]
    assert failed.status is PointStatus.FAILED and failed.reason == "out of memory at load"
    assert _shown(qtbot, run) == ("✖ OOM", ["OOM"])

    # The same sentence with another kind: the words follow the kind.
    crashed = replace(run, results=run.results[:-1] + (replace(failed, failure=FailureKind.CRASHED),))
    cell, marks = _shown(qtbot, crashed)
    assert cell == f"✖ {FAILURE_WORDS[FailureKind.CRASHED].cell}" == "✖ crashed" and "OOM" not in marks
    # And a sentence that speaks of memory with a kind that does not: no OOM.
    spilled = replace(failed, reason="the memory was fine", failure=FailureKind.SPILLED)
    cell, marks = _shown(qtbot, replace(run, results=run.results[:-1] + (spilled,)))
    assert (cell, marks) == ("✖ CPU spill", ["spill"])


def test_a_skipped_point_says_estimate_by_its_kind(qtbot):
    run = make_run()
    skipped = replace(run.results[-1], status=PointStatus.SKIPPED, reason="left out",
                      failure=FailureKind.PREDICTED_OUT_OF_MEMORY)
    assert _shown(qtbot, replace(run, results=run.results[:-1] + (skipped,))) == ("skipped (estimate)", ["OOM"])
    invalid = replace(skipped, reason="predicted to spill to CPU (1/2 layers on GPU)",
                      failure=FailureKind.INVALID_SETTINGS)
    assert _shown(qtbot, replace(run, results=run.results[:-1] + (invalid,))) == ("skipped", ["skipped"])
