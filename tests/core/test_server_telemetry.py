"""The neutral server-telemetry types: rates from counter deltas, KV fill from slots, the ring's rows."""

from __future__ import annotations

import math

from app.core.server_telemetry import (RateTracker, ServerColumn, ServerReading, ServerTelemetryRing, SlotState,
                                       kv_fill_from_slots, sample_row)


def slot(i: int, busy: bool, tokens: int | None = None, decoded: int | None = None, n_ctx: int | None = 1024):
    return SlotState(i, busy, n_ctx, tokens, None, None, decoded)


def test_kv_fill_counts_busy_slots_over_all_context() -> None:
    assert kv_fill_from_slots((slot(0, True, 512), slot(1, False, 900))) == 0.25
    assert kv_fill_from_slots((slot(0, True, 4096),)) == 1.0  # clamped
    assert kv_fill_from_slots((slot(0, True, 10, n_ctx=None),)) is None
    assert kv_fill_from_slots(()) is None


def test_a_reported_kv_ratio_wins_over_the_slots_estimate() -> None:
    reading = ServerReading(at=0.0, kv_cache_ratio=0.5, slots=(slot(0, True, 10),))
    assert RateTracker().sample(reading).kv_cache_fill == 0.5


def test_rates_need_two_readings_and_reset_forgets_the_first() -> None:
    tracker = RateTracker()
    first = tracker.sample(ServerReading(at=1.0, prompt_tokens_total=10.0, predicted_tokens_total=0.0))
    assert first.prompt_tokens_per_s is None and first.generation_tokens_per_s is None
    second = tracker.sample(ServerReading(at=1.5, prompt_tokens_total=30.0, predicted_tokens_total=5.0))
    assert second.prompt_tokens_per_s == 40.0 and second.generation_tokens_per_s == 10.0
    tracker.reset()  # a restarted server counts from 0 again: no negative or huge first rate
    assert tracker.sample(ServerReading(at=2.0, prompt_tokens_total=0.0)).prompt_tokens_per_s is None


def test_missing_counters_give_no_rate_and_no_slots_give_no_slot_counts() -> None:
    tracker = RateTracker()
    tracker.sample(ServerReading(at=0.0))
    sample = tracker.sample(ServerReading(at=1.0, requests_deferred=3, slots_reason="HTTP 501"))
    assert sample.generation_tokens_per_s is None and sample.slots_total is None and not sample.reports_slots
    assert sample.requests_deferred == 3 and sample.slots_reason == "HTTP 501"


def test_rows_carry_every_column_with_nan_for_missing() -> None:
    tracker = RateTracker()
    sample = tracker.sample(ServerReading(at=0.0, requests_deferred=1, requests_processing=2,
                                          slots=(slot(0, True, 256, 3), slot(1, False))))
    row = sample_row(sample)
    assert len(row) == ServerColumn.COUNT
    assert row[ServerColumn.SLOTS_BUSY] == 1 and row[ServerColumn.SLOTS_TOTAL] == 2
    assert row[ServerColumn.KV_FILL_PCT] == 12.5 and math.isnan(row[ServerColumn.GENERATION_TOKENS_PER_S])
    ring = ServerTelemetryRing(history_s=3.0, interval_s=1.0)
    for i in range(6):
        ring.append(tracker.sample(ServerReading(at=float(i + 1), slots=(slot(0, bool(i % 2), 10),))))
    ring.gap(7.0)
    t, rows = ring.view()
    assert list(t) == [4.0, 5.0, 6.0, 7.0] and ring.capacity == 4
    assert list(rows[:3, ServerColumn.SLOTS_BUSY]) == [1.0, 0.0, 1.0] and math.isnan(rows[3, 0])
    assert ring.latest is not None and ring.latest.at == 6.0
