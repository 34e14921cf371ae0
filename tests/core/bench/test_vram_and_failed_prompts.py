"""A point's VRAM in words (the server's own peak, the card's, the estimate against the server's) and the failed
prompts across a sweep's points, from the figures and records a sweep keeps; and both read back from what earlier
releases saved (the card's peak under its earlier name, a rate-sweep step's likewise)."""

from __future__ import annotations

from app.core.bench.capacity import CapacityStep
from app.core.bench.failed_prompts import failed_prompt_lines, failed_prompts, failures_at
from app.core.bench.outcome import PointStatus
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import GpuFigures, PointResult, ServerPeakUnknown, SweepPoint
from app.core.bench.vram import card_cell, error_words, estimate_lines, peak_cell, unknown_note
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings

PLAN = LoadPlan("m", prompts=(BenchPrompt("hello", "Say hello."), BenchPrompt("abc", "Recite\nthe alphabet.")))


def _ok(index: int) -> RequestRecord:
    return RequestRecord(index, 0.0, 0.0, 1.0, first_token_s=0.1, output_tokens=8, output_chunks=8)


def _cut(index: int, tokens: int = 3, kind: str = "unfinished") -> RequestRecord:
    return RequestRecord(index, 0.0, 0.0, 0.5, first_token_s=0.1, output_tokens=tokens, output_chunks=tokens,
                         error=f"the server ended the reply without its final record, after {tokens} tokens",
                         error_kind=kind)


def _point(index: int, records: tuple[RequestRecord, ...], gpu: GpuFigures = GpuFigures(),
           estimate: float | None = None) -> PointResult:
    point = SweepPoint(index, ServerSettings(num_parallel=index + 1), index + 1)
    return PointResult(point, PointStatus.UNSTABLE, stats=summarize(records, LatencyTargets()), records=records,
                       gpu=gpu, estimate_peak_mib=estimate)


def test_peak_vram_is_the_servers_own_and_the_card_never_stands_in() -> None:
    known = _point(0, (), GpuFigures(card_peak_mib=134_758.0, server_peak_mib=15_872.0), estimate=15_360.0)
    assert (peak_cell(known), card_cell(known)) == ("15.5", "131.6")
    assert known.estimate_error_mib == -512.0 and round(known.estimate_error_pct or 0, 2) == -3.23
    assert error_words(known) == "estimated 15.00 GiB, the server's own peak 15.50 GiB: 512 MiB (3.2 %) low"
    elsewhere = _point(1, (), GpuFigures(card_peak_mib=134_758.0, server_unknown=ServerPeakUnknown.NOT_HERE),
                       estimate=15_360.0)
    assert (peak_cell(elsewhere), card_cell(elsewhere)) == ("n/a", "131.6") and elsewhere.estimate_error_mib is None
    assert error_words(elsewhere) == ("estimated 15.00 GiB, the server's own peak not known (its processes are not "
                                      "visible from here: another user's, on another machine or behind a proxy)")
    unread = _point(2, ())
    assert (peak_cell(unread), card_cell(unread), error_words(unread)) == ("—", "—", "")
    assert estimate_lines([known, elsewhere, unread], ("parallel",)) == [
        "parallel 1: estimated 15.00 GiB, the server's own peak 15.50 GiB: 512 MiB (3.2 %) low; card 131.6 GiB",
        "parallel 2: estimated 15.00 GiB, the server's own peak not known (its processes are not visible from here: "
        "another user's, on another machine or behind a proxy); card 131.6 GiB"]
    assert "(its processes are not visible from here: another user's, on another machine or behind a proxy)" in unknown_note(
        [known, elsewhere])
    assert unknown_note([known, unread]) == ""


def test_figures_saved_before_the_server_and_the_card_were_told_apart_read_as_the_cards() -> None:
    old = GpuFigures.from_json({"vram_peak_mib": 134_758.0, "vram_baseline_mib": 118_000.0, "util_mean_pct": 90.0,
                                "power_mean_w": None, "energy_j": None})
    assert (old.card_peak_mib, old.card_baseline_mib, old.server_peak_mib) == (134_758.0, 118_000.0, None)
    assert old.server_unknown is ServerPeakUnknown.NOT_RECORDED
    kept_both = GpuFigures.from_json({"vram_peak_mib": 134_758.0, "server_peak_mib": 15_872.0})
    assert (kept_both.card_peak_mib, kept_both.server_peak_mib, kept_both.server_unknown) == (134_758.0, 15_872.0,
                                                                                              None)
    new = GpuFigures(card_peak_mib=1.0, server_peak_mib=None, server_unknown=ServerPeakUnknown.NOT_ATTRIBUTED)
    assert GpuFigures.from_json(new.to_json()) == new
    assert GpuFigures.from_json({"server_unknown": "something later", "card_peak_mib": 2.0}).server_unknown is \
        ServerPeakUnknown.NOT_RECORDED
    assert GpuFigures.from_json(None) == GpuFigures()


def test_a_rate_sweep_step_saved_before_keeps_its_cards_peak_as_the_cards() -> None:
    saved = {"factor": 1.0, "offered_rps": 1.0, "vram_peak_mib": 134_758.0, "gpu_util_pct": 50.0}
    old = CapacityStep.from_json(saved, [], LatencyTargets(), {})
    assert (old.vram_peak_mib, old.card_peak_mib) == (None, 134_758.0)
    new = CapacityStep.from_json({**saved, "vram_peak_mib": 15_872.0, "card_peak_mib": 134_758.0}, [],
                                 LatencyTargets(), {})
    assert (new.vram_peak_mib, new.card_peak_mib) == (15_872.0, 134_758.0)


def test_a_prompt_failing_at_every_point_is_found_and_said_once() -> None:
    # Four requests a point over two prompts: prompt 2 (requests 1 and 3) ends without its final record everywhere;
    # prompt 1 failed once, at one point, otherwise.
    first = _point(0, (_ok(0), _cut(1), _ok(2), _cut(3)))
    second = _point(1, (_cut(0, 5, "dropped"), _cut(1), _ok(2), _cut(3, 4)))
    third = _point(2, ())  # not measured: it sent nothing
    prompts = failed_prompts([first, second, third], PLAN)
    cut, other = prompts
    assert (cut.key, cut.index, cut.every_point, cut.points_words(), cut.requests_words()) == (
        "prompt 2 of 2", 1, True, "2 of 2 points", "4 of 4 requests")
    assert cut.tokens_words() == "3–4" and cut.kinds == ("unfinished",) and cut.preview == "Recite the alphabet."
    assert (other.key, other.every_point, other.points_words(), other.kind_words()) == (
        "prompt 1 of 2", False, "1 of 2 points", "connection dropped")
    assert [f.request for _p, f in failures_at(prompts, 1)] == [1, 3, 0]
    lines = failed_prompt_lines(prompts)
    assert lines[0] == ("prompt 2 of 2 (“Recite the alphabet.”) failed at every point that sent it (2 of 2 points, "
                        "4 of 4 requests: reply ended without its final record, after 3–4 tokens): it fails for what "
                        "it asks, not for the setting.")
    assert lines[1:] == ["", "Failed prompts:",
                         "  prompt 2 of 2 “Recite the alphabet.”: reply ended without its final record, after 3–4 "
                         "tokens; 2 of 2 points, 4 of 4 requests",
                         "  prompt 1 of 2 “Say hello.”: connection dropped, after 5 tokens; 1 of 2 points, 1 of 4 "
                         "requests"]
    assert failed_prompts([_point(0, (_ok(0), _ok(1)))], PLAN) == [] and failed_prompt_lines([]) == []


def test_a_prompt_sent_at_one_point_only_is_no_finding_and_a_scenario_groups_by_class() -> None:
    alone = failed_prompts([_point(0, (_cut(1),))], PLAN)
    assert alone[0].every_point is False and alone[0].finding() == ""
    made = RequestRecord(7, 0.0, 0.0, 1.0, error="x", error_kind="timeout", request_class="chat", conversation=2,
                         turn=1)
    [chat] = failed_prompts([_point(0, (made,)), _point(1, (made,))], PLAN)
    assert (chat.key, chat.index, chat.preview, chat.every_point) == ("class “chat”", None, "a “chat” request", True)
