"""A full KV cache's evidence names where the fill was read: the server's own ratio or its slots."""

from __future__ import annotations

from app.core.server_telemetry import ServerSample, SlotState
from app.core.watch.events import EventKind, Source
from app.services.watchdog import Watchdog


def sample(fill: float, slots: tuple[SlotState, ...] = ()) -> ServerSample:
    return ServerSample(at=0.0, slots_total=len(slots) or None, slots_busy=None, requests_processing=None,
                        requests_deferred=None, kv_cache_fill=fill, prompt_tokens_per_s=None,
                        generation_tokens_per_s=None, prompt_tokens_total=None, predicted_tokens_total=None,
                        slots=slots)


def test_a_fill_read_from_the_slots_says_so() -> None:
    slot = SlotState(id=0, busy=True, n_ctx=256, prompt_tokens=251, prompt_processed=251, cached_tokens=0, decoded=3)
    [event] = Watchdog(subject="s").feed_server(sample(251 / 256, (slot,)))
    assert event.kind is EventKind.KV_CACHE_FULL
    assert event.evidence[0].source is Source.SLOTS
    assert event.evidence[0].text == "slots fill 0.98 (slot 0 251 of 256 tokens)"


def test_the_servers_own_ratio_is_metrics() -> None:
    slot = SlotState(id=0, busy=True, n_ctx=256, prompt_tokens=10, prompt_processed=10, cached_tokens=0, decoded=3)
    [event] = Watchdog(subject="s").feed_server(sample(0.97, (slot,)))
    assert event.evidence[0].source is Source.METRICS and event.evidence[0].text == "KV-cache usage 0.97"
