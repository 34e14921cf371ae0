"""A sweep on the real llama-server with the bundled SmolLM2 model, whose slot context the server caps without
a word to the request: asked for 16384 tokens per slot, above the model's training context (8192), it logs a
warning, serves 8192 per slot and answers every request. The runner's watchdog reads the smaller context in
the server's own /slots: that point is not stable and is not recommended, however fast it ran; the point at
2048 is. (A prompt longer than a slot is refused by this llama-server with a 400 that names both sizes, not
cut: the sweep fails such a point openly, see test_prompt_lengths_engine.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import llama_server_settings
from app.core.bench.outcome import FailureKind, PointStatus
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings
from app.core.watch.events import EventKind, Source
from app.services.bench.sweep_runner import SweepRunner
from app.services.bench.sweep_watch import ServerFeed
from tests.backends.llama_server.engine_child import free_port

pytestmark = pytest.mark.engine
SWEEP_S = 600.0  # a ceiling for a loaded 2-core machine; about a minute when it is busy, less when idle
TRAINING_CONTEXT = 8192  # SmolLM2-135M-Instruct's


@pytest.fixture
def supervised(supervisor_loop: LoopThread, tmp_path: Path, llama_server_binary: Path,
               bundled_model: Path) -> Iterator[tuple[LlamaServerSupervisor, ServerFeed]]:
    """A supervisor of the bundled model reporting its log lines and statuses to a ServerFeed."""
    feed = ServerFeed()
    base = ServerSettings(backend="llama_server", port=free_port(), context_length=2048)
    settings = llama_server_settings(base, binary=str(llama_server_binary), model_path=str(bundled_model), threads=2)
    supervisor = LlamaServerSupervisor(settings, on_status=feed.on_status, on_log=feed.on_log, start_timeout_s=180.0,
                                       stop_grace_s=5.0, health_interval_s=0.2, runtime_dir=tmp_path / "run")
    yield supervisor, feed
    supervisor_loop.run(supervisor.close(), 60)


@pytest.mark.parametrize("read_log", [True, False], ids=["log-and-slots", "slots-only"])
def test_a_slot_context_the_server_capped_makes_the_point_not_stable(supervised, supervisor_loop: LoopThread,
                                                                    bundled_model: Path, read_log: bool) -> None:
    supervisor, feed = supervised
    plan = LoadPlan(model=str(bundled_model), prompts=(BenchPrompt("story", "Tell a story about a lighthouse."),),
                    requests=2, num_predict=8, think=False, warmup_requests=0)
    spec = SweepSpec(supervisor.settings, SweepAxes(parallel=(1,), context_lengths=(2048, 16384)), plan,
                     LatencyTargets(60_000, 10_000))
    runner = SweepRunner(supervisor, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client,
                         server_telemetry=LLAMA_SERVER.server_telemetry, sample_interval_s=0.1,
                         planner=LLAMA_SERVER.planner, server_feed=feed,
                         log_signals=LLAMA_SERVER.log_signals if read_log else None)
    run = supervisor_loop.run(runner.run(spec), SWEEP_S)

    fits, capped = run.results
    assert (fits.point.settings.context_length, capped.point.settings.context_length) == (2048, 16384)
    assert all(r.ok for r in fits.records + capped.records)  # the server answered every request
    assert fits.status is PointStatus.OK and not fits.spoiled, fits.events
    assert capped.status is PointStatus.UNSTABLE and capped.failure is FailureKind.SPOILED
    assert EventKind.SMALLER_CONTEXT in capped.spoiled_by and capped.reason.startswith("not stable: ")
    # Said once, where the server says it first: its launch log ("n_ctx_slot = 8192") or, without a log reader, its
    # /slots ("n_ctx": 8192); the same capped context read again is the same episode.
    [seen] = [e for e in capped.events if e.kind is EventKind.SMALLER_CONTEXT]
    assert seen.evidence[0].figures == {"context_per_slot": TRAINING_CONTEXT, "context_per_slot_asked": 16384}
    if read_log:
        assert seen.evidence[0].source is Source.LOG and f"n_ctx_slot = {TRAINING_CONTEXT}" in seen.evidence[0].text
    else:
        assert seen.evidence[0].source is Source.SLOTS and seen.evidence[0].text == f"slot n_ctx {TRAINING_CONTEXT}"
    rec = run.recommendation
    assert rec is not None and rec.index == fits.point.index and rec.spoiled == (capped.point.index,)
    # The sweep's own restarts (one per point, and putting the server back) are not restarts behind its back.
    assert not [e for e in runner.watch.events() if e.kind in (EventKind.SERVER_RESTARTED, EventKind.SERVER_CRASHED)]
    assert supervisor.settings.context_length == 2048
