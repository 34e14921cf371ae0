"""/metrics and /slots parsing on the recorded answers of the real llama-server (tests/data/llama_server/)."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings

from app.backends.llama_server.metrics import error_text, parse_metrics, parse_slots, reading_from
from app.core.server_telemetry import RateTracker, SlotState
from tests.backends.llama_server.metrics_property import (DATA, check_metrics_text, check_slots_document,
                                                          metrics_texts, recorded, slots_documents)

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_idle_metrics_of_the_real_server_read_every_counter_and_gauge() -> None:
    m = parse_metrics(recorded("metrics_idle.txt"))
    assert m.skipped == 0
    for name in ("prompt_tokens_total", "tokens_predicted_total", "requests_processing", "requests_deferred",
                 "n_decode_total", "prompt_tokens_seconds", "predicted_tokens_seconds"):
        assert m.get(f"llamacpp:{name}") == 0.0, name
    assert m.get("llamacpp:kv_cache_usage_ratio") is None  # this llama-server no longer reports it


def test_busy_metrics_show_two_processing_and_one_deferred() -> None:
    m = parse_metrics(recorded("metrics_busy.txt"))
    assert (m.get("llamacpp:requests_processing"), m.get("llamacpp:requests_deferred")) == (2.0, 1.0)


def test_the_predicted_counter_after_the_load_is_the_replies_predicted_n_sum() -> None:
    replies = json.loads(recorded("replies_timings.json"))
    m = parse_metrics(recorded("metrics_after.txt"))
    assert m.get("llamacpp:tokens_predicted_total") == sum(r["timings"]["predicted_n"] for r in replies)
    assert m.get("llamacpp:prompt_tokens_total") == sum(r["timings"]["prompt_n"] for r in replies)
    assert m.get("llamacpp:prompt_tokens_cached_total") == sum(r["timings"]["cache_n"] for r in replies)


def test_labels_special_values_and_timestamps() -> None:
    text = ('# HELP x y\n# TYPE x gauge\nx{a="1",b="q\\"uote"} 2.5 1700000000\nx{b="q\\"uote",a="1"} 3\n'
            'y NaN\nz +Inf\nw -Inf\nv 1e3\n')
    m = parse_metrics(text)
    assert m.get("x", a="1", b='q"uote') == 3.0  # labels in any order name one series; the last value wins
    assert m.get("x") is None
    assert m.get("y") is None and m.get("z") is None and m.get("w") is None  # not finite: no usable value
    assert math.isinf(m.values[("z", ())]) and math.isnan(m.values[("y", ())])
    assert m.get("v") == 1000.0 and m.skipped == 0


def test_malformed_lines_are_skipped_and_counted() -> None:
    text = "ok 1\nno_value\nbad{a=1} 2\nunterminated{a=\"x 3\nthree 1 2 3\n9starts_with_digit 1\nnum abc\n"
    m = parse_metrics(text)
    assert m.get("ok") == 1.0 and m.skipped == 6


def test_busy_slots_of_the_real_server() -> None:
    slots, skipped = parse_slots(json.loads(recorded("slots_busy.json")))
    assert skipped == 0 and [s.id for s in slots] == [0, 1]
    assert all(s.busy and s.n_ctx == 1024 for s in slots)
    first = slots[0]
    assert (first.prompt_tokens, first.prompt_processed, first.cached_tokens) == (42, 41, 0)
    assert first.decoded == 1 and slots[1].decoded == 2


def test_idle_slots_carry_no_task_figures() -> None:
    for name in ("slots_idle.json", "slots_after.json"):
        slots, skipped = parse_slots(json.loads(recorded(name)))
        assert skipped == 0 and len(slots) == 2
        assert all(not s.busy and s.decoded is None and s.prompt_tokens is None for s in slots), name


def test_older_slot_shape_state_and_top_level_decoded() -> None:
    older = [{"id": 1, "state": 1, "n_ctx": 512, "n_past": 30, "n_decoded": 7, "next_token": {"n_remain": 3}},
             {"id": 0, "state": 0, "n_ctx": 512}]
    slots, skipped = parse_slots(older)
    assert skipped == 0
    assert slots == (SlotState(0, False, 512, None, None, None, None), SlotState(1, True, 512, 30, None, None, 7))
    assert parse_slots([{"id": 0, "state": 1, "next_token": {"n_decoded": 4}}])[0][0].decoded == 4


def test_not_supported_answers_keep_the_servers_words() -> None:
    for name in ("slots_disabled.json", "metrics_disabled.json"):
        status = int((DATA / f"{name}.status").read_text())
        assert status == 501
        text = error_text(status, recorded(name))
        assert text.startswith("HTTP 501: This server does not support") and "Start it with" in text
    assert error_text(500, "not json") == "HTTP 500: not json"


def test_rates_come_from_counter_deltas_and_the_busy_slots() -> None:
    tracker = RateTracker()
    busy, _ = parse_slots(json.loads(recorded("slots_busy.json")))
    after, _ = parse_slots(json.loads(recorded("slots_after.json")))
    first = tracker.sample(reading_from(parse_metrics(recorded("metrics_busy.txt")), busy, at=10.0))
    assert first.generation_tokens_per_s is None and first.slots_busy == 2 and first.requests_deferred == 1
    assert first.kv_cache_fill == (42 + 43) / 2048
    second = tracker.sample(reading_from(parse_metrics(recorded("metrics_after.txt")), after, at=12.0))
    # 144 generated in all, of which the busy slots had shown 1 + 2 already.
    assert second.generation_tokens_per_s == (144 - 3) / 2.0
    assert second.prompt_tokens_per_s == (83 - 41) / 2.0
    assert second.slots_busy == 0 and second.kv_cache_fill == 0.0


def test_a_counter_that_dips_never_gives_a_negative_rate() -> None:
    tracker = RateTracker()
    slot = SlotState(0, True, 100, 10, 10, 0, 5)
    tracker.sample(reading_from(parse_metrics("llamacpp:tokens_predicted_total 0\n"), (slot,), at=0.0))
    # The request finished between the two reads: /metrics before, /slots after.
    dip = tracker.sample(reading_from(parse_metrics("llamacpp:tokens_predicted_total 0\n"),
                                      (SlotState(0, False, 100, None, None, None, None),), at=1.0))
    assert dip.generation_tokens_per_s == 0.0
    caught_up = tracker.sample(reading_from(parse_metrics("llamacpp:tokens_predicted_total 8\n"),
                                            (SlotState(0, False, 100, None, None, None, None),), at=2.0))
    assert caught_up.generation_tokens_per_s == 3.0  # 8 in all: the 5 seen earlier are not counted twice


@FUZZ
@given(text=metrics_texts())
def test_fuzzed_metrics_never_raise(text: str) -> None:
    check_metrics_text(text)


@FUZZ
@given(document=slots_documents())
def test_fuzzed_slots_never_raise(document) -> None:
    check_slots_document(document)
