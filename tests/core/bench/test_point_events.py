"""A sweep point's events: one that spoils a measurement keeps the point out of the recommendation (and off
the Pareto front), the run's JSON gives them back with the point's verdict, and the exports show them.

The events are the watchdog's, with the figures real servers gave: Ollama 0.32.15 at a context of 1024 used
514 of a ~5,000-token prompt (200 OK, no log line); /api/ps of qwen3:14b with 13,728,960,512 of its
26,403,534,848 bytes in VRAM (tests/data/ollama/ps_partial_offload.json)."""

from __future__ import annotations

import csv
import io
import json

from app.core.bench.outcome import FailureKind, PointStatus, RunStatus, failure_of_saved
from app.core.bench.recommend import pareto_front, recommend
from app.core.bench.run import SweepRun, point_row, run_from_json, run_to_csv, run_to_json, run_to_markdown
from app.core.bench.run_events import kind_counts, point_event_lines, point_mark, summary_lines, tooltip_text
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import PointResult, SweepAxes, SweepSpec, spoiled_reason
from app.core.bench.workload import LoadPlan
from app.core.bench.sweep import Fingerprint
from app.core.saved_format import SavedFormat
from app.core.server.settings import ServerSettings
from app.core.watch.events import EventKind, Evidence, Severity, Source, WatchEvent

TARGETS = LatencyTargets(2000, 200)
SAVED = SavedFormat()
AT = 1_796_000_000.0

SPILL = WatchEvent(EventKind.LAYERS_ON_CPU, Severity.SEVERE, AT + 5,
                   "qwen3:14b holds 11.8 GiB in host memory (48%/52% CPU/GPU) although it was priced to fit on the "
                   "GPU: the layers there run at the CPU's speed.", "Free GPU memory.",
                   (Evidence(Source.LOADED, "qwen3:14b: size 26403534848 B, size_vram 13728960512 B (48%/52% CPU/GPU)",
                             {"size_bytes": 26403534848.0, "size_vram_bytes": 13728960512.0}),), "qwen3:14b")
CUT = WatchEvent(EventKind.PROMPT_TRUNCATED, Severity.SEVERE, AT + 7,
                 "The server used 514 of the 5012 prompt tokens sent (counted in the server's tokens) at a context of "
                 "1024 tokens per slot and said nothing: the answer is to a prompt that was not asked.",
                 "Raise the context per slot.", (Evidence(Source.REPLY, "prompt tokens sent 5012, used by the server 514",
                                                          {"prompt_tokens_sent": 5012.0, "prompt_tokens_used": 514.0}),),
                 "qwen3:14b")
UNLOADED = WatchEvent(EventKind.MODEL_UNLOADED, Severity.INFO, AT + 9, "qwen3:0.6b left memory.", "Raise the keep-alive.",
                      (Evidence(Source.LOADED, "qwen3:0.6b is no longer in the loaded models"),), "qwen3:0.6b")


def records(tokens_per_request: int, seconds: float) -> tuple[RequestRecord, ...]:
    return tuple(RequestRecord(i, 0.0, 0.0, seconds, first_token_s=0.1, output_tokens=tokens_per_request,
                               output_chunks=tokens_per_request, itl_s=(0.01,) * (tokens_per_request - 1))
                 for i in range(4))


def make_run(*events_per_point: tuple[WatchEvent, ...]) -> SweepRun:
    """Points at parallel 1, 2, 4 ...; the higher the parallel, the faster; each point with its events (a point
    with a spoiling one is judged as the runner judges it: unstable, for that)."""
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=tuple(2 ** i for i in range(len(events_per_point)))),
                     LoadPlan("qwen3:14b", requests=4), TARGETS)
    plan = spec.plan()
    results = []
    for point, events in zip(plan.points, events_per_point):
        recs = records(20 * (point.index + 1), 1.0)
        result = PointResult(point, PointStatus.OK, stats=summarize(recs, TARGETS), records=recs, events=events)
        if result.spoiled:
            result = PointResult(point, PointStatus.UNSTABLE, spoiled_reason(result.spoiled_by), result.stats, recs,
                                 failure=FailureKind.SPOILED, detail=events[0].summary, events=events)
        results.append(result)
    run = SweepRun(spec, Fingerprint(model="qwen3:14b"), plan.points, plan.varying, tuple(results),
                   started_at="2026-11-30T10:00:00+00:00")
    return run.finished(RunStatus.FINISHED, "2026-11-30T10:05:00+00:00")


def test_a_spoiled_point_is_never_recommended_however_fast() -> None:
    run = make_run((), (UNLOADED,), (SPILL,))
    one, two, four = run.results
    assert four.spoiled and four.spoiled_by == (EventKind.LAYERS_ON_CPU,) and four.status is PointStatus.UNSTABLE
    assert not two.spoiled and two.status is PointStatus.OK  # a model unloaded: worth knowing, figures still its own
    rec = run.recommendation
    assert rec is not None and rec.index == two.point.index and rec.spoiled == (four.point.index,)
    assert "Left out, not stable because of what the server did meanwhile: parallel 4 (layers on the CPU)." in rec.text
    assert four.point.index not in pareto_front(run.results)
    assert four.stable_text() == "⚠ not stable: layers on the CPU"
    # Judged from its events alone: a result read back as OK with a spoiling event is not recommended either.
    ok_but_spoiled = PointResult(four.point, PointStatus.OK, stats=four.stats, records=four.records, events=(CUT,))
    again = recommend([one, two, ok_but_spoiled], TARGETS)
    assert again.index == two.point.index and again.spoiled == (four.point.index,)
    assert ok_but_spoiled.stable_text() == "⚠ not stable: prompt cut short"


def test_when_every_measured_point_is_spoiled_nothing_is_recommended_and_the_text_says_which() -> None:
    rec = make_run((SPILL,), (CUT, SPILL)).recommendation
    assert rec is not None and rec.index is None and rec.spoiled == (0, 1)
    assert rec.text.startswith("No measured point's numbers are its settings' own, so nothing is recommended (the "
                               "server did something that skews the figures at parallel 1 (layers on the CPU); "
                               "parallel 2 (prompt cut short, layers on the CPU))")
    assert list(rec.to_json()["spoiled"]) == [0, 1]
    # A recommendation that left nothing out saves no "spoiled" key, as documents before it did not.
    assert "spoiled" not in make_run((), ()).recommendation.to_json()


def test_a_run_document_gives_back_each_points_events_and_verdict() -> None:
    run = make_run((UNLOADED,), (SPILL, CUT))
    doc = json.loads(json.dumps(run_to_json(run, SAVED, with_records=True)))
    again = run_from_json(doc, SAVED)
    assert [r.events for r in again.results] == [r.events for r in run.results]
    assert [r.failure for r in again.results] == [None, FailureKind.SPOILED]  # read back from what is saved
    assert again.results[1].spoiled_by == (EventKind.LAYERS_ON_CPU, EventKind.PROMPT_TRUNCATED)
    assert again.recommendation == run.recommendation and again.recommendation.spoiled == (1,)
    assert again.results[1].events[0].evidence[0].figures["size_vram_bytes"] == 13728960512.0
    # The points' rows (the --json points) say it too.
    row = doc["points"][1]
    assert (row["event_count"], row["events_worst"], row["spoiled_by"]) == (2, "severe", ["layers_on_cpu",
                                                                                         "prompt_truncated"])
    assert [e["kind"] for e in row["events"]] == ["layers_on_cpu", "prompt_truncated"]
    assert point_row(run.results[0])["spoiled_by"] == [] and point_row(run.results[0])["events_worst"] == "info"
    # An entry it cannot read (a newer kind, a damaged one) is skipped; the rest of the point reads.
    doc["results"][1]["events"].insert(0, {"kind": "a_kind_from_later", "severity": "severe", "at": AT})
    doc["results"][1]["events"].append("not an event")
    assert run_from_json(doc, SAVED).results[1].events == (SPILL, CUT)
    # A point saved before events were watched reads with none.
    del doc["results"][0]["events"]
    assert run_from_json(doc, SAVED).results[0].events == ()
    assert failure_of_saved(PointStatus.UNSTABLE, "not stable: cold load", None, "") is FailureKind.SPOILED


def test_the_exports_show_the_events() -> None:
    run = make_run((), (SPILL, CUT))
    rows = list(csv.DictReader(io.StringIO(run_to_csv(run))))
    assert [(r["event_count"], r["events_worst"], r["spoiled_by"]) for r in rows] == [
        ("0", "", ""), ("2", "severe", "layers_on_cpu prompt_truncated")]
    markdown = run_to_markdown(run, {})
    assert "## Server events" in markdown and "### parallel 2" in markdown
    assert "| severe | prompt cut short | The server used 514 of the 5012 prompt tokens sent" in markdown
    assert "not stable: layers on the CPU, prompt cut short" in markdown  # the table's Stable? column


def test_the_words_for_a_terminal_and_a_tooltip() -> None:
    run = make_run((UNLOADED,), (SPILL, CUT))
    lines = point_event_lines(run)
    assert lines[0] == "parallel 1: 1 event"
    assert lines[2] == "      loaded models: qwen3:0.6b is no longer in the loaded models"
    assert lines[3] == "parallel 2: 2 events; not stable (layers on the CPU, prompt cut short)"
    assert lines[4].endswith("SEVERE layers on the CPU: " + SPILL.summary)
    assert lines[5] == "      loaded models: " + SPILL.evidence[0].text
    summary = summary_lines(run)
    assert summary[0] == "Server events in this run: 3 events"
    assert summary[1] == "  1 × layers on the CPU (severe, not stable) at parallel 2"
    assert summary[2] == "    what to do: Free GPU memory."
    assert [c.kind for c in kind_counts(run)] == [EventKind.LAYERS_ON_CPU, EventKind.PROMPT_TRUNCATED,
                                                  EventKind.MODEL_UNLOADED]
    assert point_mark(run.results[1]) == "2 · severe" and point_mark(make_run(()).results[0]) == ""
    tip = tooltip_text(run.results[1])
    assert tip.splitlines()[0] == "Not stable: layers on the CPU, prompt cut short."
    assert "severe — prompt cut short: The server used 514" in tip
    assert tooltip_text(run.results[0]).startswith("Seen while it ran (its figures are still its own).")
