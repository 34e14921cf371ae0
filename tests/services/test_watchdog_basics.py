"""The watchdog's contract on made-up but well-formed readings: one event per episode, typed, with evidence."""

from __future__ import annotations

import math

from app.core.models import RunningModel
from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import ServerSample
from app.core.telemetry import GpuSample, GpuSlowdown
from app.core.watch.events import EventKind, Severity, Source, WatchEvent, events_from_json, spoiling
from app.core.watch.signals import Asked, ReplyFacts
from app.services.watchdog import Watchdog


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def _dog() -> tuple[Watchdog, Clock]:
    clock = Clock()
    return Watchdog(subject="http://127.0.0.1:1", clock=clock, monotonic=clock), clock


def _server(**kw: object) -> ServerSample:
    base: dict[str, object] = dict(at=0.0, slots_total=None, slots_busy=None, requests_processing=None,
                                   requests_deferred=None, kv_cache_fill=None, prompt_tokens_per_s=None,
                                   generation_tokens_per_s=None, prompt_tokens_total=None, predicted_tokens_total=None)
    base.update(kw)
    return ServerSample(**base)  # type: ignore[arg-type]


def test_a_cut_prompt_is_severe_and_spoils_the_measurement() -> None:
    dog, _ = _dog()
    seen: list[WatchEvent] = []
    dog.subscribe(seen.append)
    made = dog.feed_reply(ReplyFacts(model="m", at=1_000.0, prompt_sent=5000, prompt_counted=True, prompt_used=514,
                                     context_per_slot=1024))
    assert [e.kind for e in made] == [EventKind.PROMPT_TRUNCATED] and seen == made
    assert made[0].severity is Severity.SEVERE and spoiling(made) == tuple(made)
    assert made[0].evidence[0].source is Source.REPLY and made[0].evidence[0].figures["prompt_tokens_used"] == 514
    assert events_from_json([e.to_json() for e in made]) == tuple(made)


def test_a_full_prompt_raises_nothing() -> None:
    dog, _ = _dog()
    assert dog.feed_reply(ReplyFacts(model="m", at=1.0, prompt_sent=500, prompt_counted=True, prompt_used=500)) == []


def test_a_lasting_condition_is_one_event_until_it_clears() -> None:
    dog, clock = _dog()
    full = [dog.feed_server(_server(kv_cache_fill=0.97)) for _ in range(5)]
    assert [len(x) for x in full] == [1, 0, 0, 0, 0] and full[0][0].kind is EventKind.KV_CACHE_FULL
    for _ in range(3):
        assert dog.feed_server(_server(kv_cache_fill=0.1)) == []
    assert dog.feed_server(_server(kv_cache_fill=0.99)) == []  # full again at once (a shift emptied it): one episode
    for _ in range(3):
        assert dog.feed_server(_server(kv_cache_fill=0.1)) == []
    clock.t += 31  # WatchLimits.repeat_s after it cleared: a new episode
    assert [e.kind for e in dog.feed_server(_server(kv_cache_fill=0.99))] == [EventKind.KV_CACHE_FULL]


def test_fewer_slots_than_asked_from_the_slots_endpoint() -> None:
    dog, _ = _dog()
    dog.expect(Asked(parallel=4, context_per_slot=None, model="m"))
    made = dog.feed_server(_server(slots_total=1))
    assert [e.kind for e in made] == [EventKind.FEWER_SLOTS]
    assert dog.feed_server(_server(slots_total=1)) == []


def test_a_spill_only_where_a_gpu_is() -> None:
    spilled = RunningModel(name="m", model="m", size_bytes=10 * 1024 ** 3, size_vram_bytes=0)
    dog, _ = _dog()
    assert dog.feed_loaded([spilled]) == []  # no GPU known: a CPU model is by design
    dog.gpu_present(True)
    dog.expect(Asked(fits_on_gpu=True, model="m"))
    made = dog.feed_loaded([spilled])
    assert [(e.kind, e.severity) for e in made] == [(EventKind.LAYERS_ON_CPU, Severity.SEVERE)]
    assert [e.kind for e in dog.feed_loaded([])] == [EventKind.MODEL_UNLOADED]


def test_a_cold_load_only_in_the_middle_of_work() -> None:
    dog, clock = _dog()
    assert dog.feed_reply(ReplyFacts(model="m", at=clock.t, load_s=3.0)) == []  # the first load is expected
    clock.t += 60
    made = dog.feed_reply(ReplyFacts(model="m", at=clock.t, load_s=2.5, ttft_s=2.7))
    assert [e.kind for e in made] == [EventKind.COLD_LOAD]


def test_gpu_slowdowns_and_vram_from_others() -> None:
    dog, _ = _dog()

    def gpu(used: float, server: float, slow: frozenset[GpuSlowdown] = frozenset()) -> GpuSample:
        return GpuSample(t=0, memory_used_mib=used, memory_total_mib=24_000, server_memory_mib=server,
                         utilization_pct=99, power_w=440, temperature_c=88, slowdowns=slow)

    assert dog.feed_gpu(gpu(16_000, 15_000)) == []
    made = dog.feed_gpu(gpu(16_000, 15_000, frozenset({GpuSlowdown.THERMAL})))
    assert [(e.kind, e.severity) for e in made] == [(EventKind.GPU_SLOWDOWN, Severity.SEVERE)]
    made = dog.feed_gpu(gpu(23_500, 15_000))
    assert [e.kind for e in made] == [EventKind.VRAM_FROM_OTHERS]
    assert not math.isnan(made[0].evidence[0].figures["others_rise_mib"])


def test_a_crash_and_a_restart_behind_the_apps_back() -> None:
    dog, _ = _dog()
    dog.feed_status(ServerStatus(ServerState.RUNNING_MANAGED, pid=10))
    assert [e.kind for e in dog.feed_status(ServerStatus(ServerState.RUNNING_MANAGED, pid=11))] == [
        EventKind.SERVER_RESTARTED]
    made = dog.feed_status(ServerStatus(ServerState.CRASHED, exit_code=-9, last_log_lines=("killed",)))
    assert [(e.kind, e.severity) for e in made] == [(EventKind.SERVER_CRASHED, Severity.SEVERE)]
    assert dog.feed_status(ServerStatus(ServerState.STOPPED)) == []


def test_counters_falling_mean_a_restart() -> None:
    dog, _ = _dog()
    dog.feed_server(_server(prompt_tokens_total=900.0, predicted_tokens_total=400.0))
    assert [e.kind for e in dog.feed_server(_server(prompt_tokens_total=10.0, predicted_tokens_total=4.0))] == [
        EventKind.SERVER_RESTARTED]


def test_a_backlog_line_gives_an_event_dated_when_it_was_logged() -> None:
    from app.core.watch.signals import PromptCut, ServerListening

    dog, clock = _dog()
    old = clock.t - 3600
    (cut,) = dog.feed_signal(PromptCut("truncating input prompt", sent=5000, kept=514, logged_at=old))
    assert cut.at == old and cut.mono == clock.t - 3600  # where it happened on the live axis: off its left edge
    (live,) = dog.feed_signal(PromptCut("truncating input prompt", sent=900, kept=512, logged_at=clock.t - 1))
    assert live.at == clock.t  # a line logged just now is dated by the watchdog's own clock
    dog.feed_signal(ServerListening("Listening on", logged_at=old))
    (restart,) = dog.feed_signal(ServerListening("Listening on", logged_at=old + 60))
    assert restart.kind is EventKind.SERVER_RESTARTED and restart.at == old + 60
    assert dog.between(clock.t - 10, clock.t) == (live,)
