"""TTFT split into the client queue, the server wait, the prefill and the rest; the prefill rate over the tokens
the server evaluated; the cache-hit share; and where a point's requests waited, on the two axes of a front end's
concurrency cap and the server's parallel slots. Records are built from what the real servers send."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from app.adapters.storage.saved_format import SAVED_FORMAT
from app.backends import registry
from app.backends.llama_server.wire import final_figures
from app.backends.ollama.wire import parse_final
from app.core.bench.outcome import PointStatus
from app.core.bench.run import SweepRun, run_from_json, run_to_csv, run_to_json, run_to_markdown
from app.core.bench.scenario import BUILTIN_SCENARIOS
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import Fingerprint, PointResult, ServerFigures, SweepAxes, SweepSpec
from app.core.bench.waiting import WaitPlace, axes_title, wait_split, waits_lines
from app.core.bench.workload import LoadPlan
from app.core.replies import FinalFigures
from app.core.server.settings import ServerSettings

# llama-server b6000-era `timings` of a conversation's second turn: 236 prompt tokens served from the slot's cache
LLAMA_TIMINGS = {"cache_n": 236, "prompt_n": 18, "prompt_ms": 45.0, "prompt_per_token_ms": 2.5,
                 "prompt_per_second": 400.0, "predicted_n": 8, "predicted_ms": 105.0,
                 "predicted_per_token_ms": 15.0, "predicted_per_second": 66.7}
# The real Ollama 0.32.15's final lines for the same 410-token prompt sent twice: the second was served from the
# runner's cache (20 ms instead of 1.46 s) and still counts all 410 prompt tokens.
OLLAMA_FIRST = {"model": "smollm2", "created_at": "2026-12-02T07:02:56.972224446Z", "done": True,
                "done_reason": "length", "total_duration": 2148946017, "load_duration": 549064032,
                "prompt_eval_count": 410, "prompt_eval_duration": 1463791000, "eval_count": 8,
                "eval_duration": 129316000}
OLLAMA_CACHED = {"model": "smollm2", "created_at": "2026-12-02T07:02:57.131583893Z", "done": True,
                 "done_reason": "length", "total_duration": 158125404, "load_duration": 2911878,
                 "prompt_eval_count": 410, "prompt_eval_duration": 19654000, "eval_count": 8,
                 "eval_duration": 131501000}


def record(final: FinalFigures, *, index: int = 0, scheduled: float = 0.0, sent: float, first: float,
           end: float) -> RequestRecord:
    """A record as the load generator makes it from a reply's final figures (times in s)."""
    return RequestRecord(index, scheduled, sent, end, first_token_s=first, output_tokens=final.output_tokens or 0,
                         output_chunks=final.output_tokens or 0, prompt_tokens=final.prompt_tokens,
                         prompt_eval_s=final.prompt_ms / 1e3 if final.prompt_ms is not None else None,
                         eval_s=final.decode_ms / 1e3 if final.decode_ms is not None else None,
                         total_s=final.total_ms / 1e3 if final.total_ms is not None else None,
                         cached_prompt_tokens=final.cached_prompt_tokens,
                         server_busy_s=final.busy_ms / 1e3 if final.busy_ms is not None else None)


def test_llama_server_timings_split_ttft_into_four_parts_that_add_up() -> None:
    final = final_figures("stop", LLAMA_TIMINGS, None)
    assert final.busy_ms == pytest.approx(150.0)  # prompt_ms + predicted_ms: from the slot's prompt start
    # arrived at 0, held 0.4 s by the front end's cap, sent at 0.4; the server began its prefill at 0.7
    r = record(final, sent=0.4, first=0.4 + 0.3 + 0.045 + 0.002, end=0.4 + 0.3 + 0.150 + 0.001)
    assert r.queue_s == pytest.approx(0.4)
    assert r.server_wait_s == pytest.approx(0.301)
    assert r.prompt_eval_s == pytest.approx(0.045)
    assert r.first_token_rest_s == pytest.approx(0.001)
    assert r.queue_s + r.server_wait_s + r.prompt_eval_s + r.first_token_rest_s == pytest.approx(r.ttft_s)
    # 18 tokens evaluated in 45 ms; the 236 from the cache took no prefill
    assert r.prefill_tokens_per_s == pytest.approx(400.0)
    assert r.delivered_prompt_tokens == 254


def test_ollama_counts_cached_tokens_in_so_its_prefill_rate_and_cache_share_are_not_claimed() -> None:
    first, cached = parse_final(OLLAMA_FIRST), parse_final(OLLAMA_CACHED)
    assert first.cached_prompt_tokens is None and cached.cached_prompt_tokens is None
    assert cached.busy_ms == pytest.approx(19.654 + 131.501)  # its scheduler and slot wait left out
    records = [record(first, index=0, sent=0.0, first=2.0, end=2.15),
               record(cached, index=1, scheduled=2.2, sent=2.2, first=2.24, end=2.37)]
    stats = summarize(records, LatencyTargets(None, None))
    # 410 tokens "in 20 ms" would be 20,000 tokens/s: Ollama does not say its cache served them
    assert stats.prefill_tokens_per_s.n == 0 and math.isnan(stats.cache_hit_share)
    assert stats.server_prompt_tokens_per_s.max == pytest.approx(410 / 0.019654)  # the old column, as it was
    assert stats.prefill_ms.n == 2 and stats.server_wait_ms.n == 2
    # loading is server wait: the first request's 0.55 s load is in it
    assert records[0].server_wait_s == pytest.approx(2.15 - (1.463791 + 0.129316))


def test_a_point_summarises_each_part_and_the_cache_share() -> None:
    final = final_figures("stop", LLAMA_TIMINGS, None)
    fresh = final_figures("stop", {**LLAMA_TIMINGS, "cache_n": 0, "prompt_n": 254, "prompt_ms": 635.0}, None)
    records = [record(final, index=0, sent=0.0, first=0.05, end=0.16),
               record(fresh, index=1, sent=0.0, first=0.652, end=0.755)]
    stats = summarize(records, LatencyTargets(None, None))
    assert stats.cache_hit_share == pytest.approx(236 / (254 * 2))
    assert stats.prefill_tokens_per_s.mean == pytest.approx(400.0)
    assert stats.prefill_ms.mean == pytest.approx((45.0 + 635.0) / 2)
    assert stats.server_wait_ms.max == pytest.approx(15.0)
    flat = stats.flat()
    for key in ("server_wait_ms_mean", "server_wait_ms_p95", "prefill_ms_p95", "first_token_rest_ms_mean",
                "prefill_tokens_per_s_mean", "cache_hit_share"):
        assert flat[key] is not None


def test_records_saved_before_the_split_load_with_its_parts_unknown() -> None:
    old = {"index": 0, "scheduled_s": 0.0, "sent_s": 0.1, "end_s": 1.0, "first_token_s": 0.5, "output_tokens": 4,
           "prompt_tokens": 30, "prompt_eval_s": 0.2, "itl_s": [0.1, 0.1, 0.1]}
    r = RequestRecord.from_json(old)
    assert r.server_wait_s is None and r.first_token_rest_s is None and r.prefill_tokens_per_s is None
    assert "server_busy_s" not in r.to_json()  # written as before when unknown
    stats = summarize([r], LatencyTargets(None, None))
    assert stats.server_wait_ms.n == 0 and stats.queue_ms.mean == pytest.approx(100.0)
    assert stats.wait_ms.mean == pytest.approx(300.0)  # the old lumped wait keeps its meaning
    assert wait_split(stats).most is WaitPlace.PREFILL  # the parts that are known still compare


def _point_records(queue: float, server_wait: float, n: int = 4) -> tuple[RequestRecord, ...]:
    final = final_figures("stop", LLAMA_TIMINGS, None)
    return tuple(record(final, index=i, scheduled=i * 0.01, sent=i * 0.01 + queue,
                        first=i * 0.01 + queue + server_wait + 0.046, end=i * 0.01 + queue + server_wait + 0.151)
                 for i in range(n))


def test_waiting_moves_between_the_front_end_and_the_server_with_the_cap() -> None:
    capped = summarize(_point_records(queue=0.6, server_wait=0.0), LatencyTargets(None, None))
    uncapped = summarize(_point_records(queue=0.0, server_wait=0.6), LatencyTargets(None, None))
    assert wait_split(capped, requests_deferred_max=0).most is WaitPlace.FRONT_END
    split = wait_split(uncapped, requests_deferred_max=3)
    assert split.most is WaitPlace.SERVER and split.slot_wait is True
    assert split.most_words == "server: waiting for a slot"
    assert wait_split(uncapped, requests_deferred_max=0).most_words == "server queue (no slot wait seen)"
    assert wait_split(uncapped).most_words == "server queue/slot"  # the server said nothing of its slots


def scenario_run() -> SweepRun:
    scenario = BUILTIN_SCENARIOS["code-review"]
    plan = LoadPlan("smollm2", requests=4, scenario=scenario)
    spec = SweepSpec(ServerSettings(), SweepAxes(parallel=(1, 4), concurrency=(3, 0)), plan, LatencyTargets())
    planned = spec.plan()
    results = []
    for p in planned.points:
        capped = p.concurrency == 3
        records = _point_records(queue=0.6 if capped else 0.0, server_wait=0.0 if capped else 0.6)
        deferred = 0 if capped else 2
        results.append(PointResult(p, PointStatus.OK, stats=summarize(records, spec.targets), records=records,
                                   server=ServerFigures(samples=3, slots_total=p.parallel, slots_busy_max=1,
                                                        requests_deferred_max=deferred)))
    return SweepRun(spec, Fingerprint(model="smollm2", backend_kind="llama-server"), planned.points,
                    planned.varying, tuple(results)).finished("finished", "")


def test_the_table_names_both_axes_and_where_requests_waited_in_every_export() -> None:
    run = scenario_run()
    lines = waits_lines(run.results, run.varying, closed=False)
    assert lines[0] == axes_title(("parallel", "concurrency"), False)
    assert "front-end concurrency cap × server parallel slots" in lines[0]
    assert "Front-end cap" in lines[1] and "Parallel slots" in lines[1]
    body = lines[2:-1]
    assert len(body) == 4 and lines[-1].startswith("Client queue: arrival to sent")
    assert all(("front-end queue" in line) == (" 3 " in line) for line in body)
    assert sum("server: waiting for a slot" in line for line in body) == 2
    assert sum(" none " in line for line in body) == 2  # a cap of 0 is no cap
    markdown = run_to_markdown(run, registry.display_names())
    assert "## Where requests waited before their first token — front-end concurrency cap × server parallel slots" \
        in markdown
    rows = list(csv.DictReader(io.StringIO(run_to_csv(run))))
    assert {row["waited_most"] for row in rows} == {"front_end", "server"}
    assert all(float(row["prefill_tokens_per_s_mean"]) == pytest.approx(400.0) for row in rows)
    data = json.loads(json.dumps(run_to_json(run, SAVED_FORMAT, with_records=True)))
    point = data["points"][0]
    assert point["waited_for_slot"] in (True, False) and point["server_wait_ms_p95"] is not None
    back = run_from_json(data, SAVED_FORMAT)
    assert [r.stats for r in back.results] == [r.stats for r in run.results]  # recomputed from the records


def test_a_closed_loop_names_clients_not_a_cap() -> None:
    assert axes_title(("parallel", "concurrency"), closed=True) == "Where requests waited before their first token"
