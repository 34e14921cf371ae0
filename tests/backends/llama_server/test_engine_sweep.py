"""A benchmark sweep on the real llama-server with the bundled SmolLM2 model: parallel 1, 2 and 4,
each with 4 concurrent clients. The records must agree with what the server itself reports: every
request succeeds, /slots shows exactly the point's parallel busy at most, the clients beyond it
wait (requests deferred in /metrics, and a time to first token longer than a whole decode)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.backends.llama_server.metrics import LlamaServerTelemetry
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.stats import LatencyTargets
from app.core.bench.outcome import PointStatus
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.state import ServerState
from app.core.server_telemetry import ServerSample
from app.services.bench.sweep_runner import SweepRunner
from tests.backends.llama_server.test_supervisor import START_S, make_llama  # noqa: F401 - the fixture

PARALLEL = (1, 2, 4)
CLIENTS = 4
SWEEP_S = 600.0  # a ceiling for a loaded 2-core machine; the sweep takes well under a minute when idle


async def watch(telemetry: LlamaServerTelemetry, seen: list[ServerSample], stop: asyncio.Event) -> None:
    """Sample /slots and /metrics every 50 ms until stop (a server restarting in between is skipped)."""
    while not stop.is_set():
        try:
            seen.append(await telemetry.sample())
        except Exception:  # noqa: BLE001 - between points the server restarts and answers nothing
            pass
        try:
            await asyncio.wait_for(stop.wait(), 0.05)
        except TimeoutError:
            pass


@pytest.mark.engine
def test_a_sweep_agrees_with_the_servers_own_slots_and_queue(make_llama, bundled_model: Path) -> None:  # noqa: F811
    h = make_llama(num_parallel=1)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    base = h.supervisor.settings
    plan = LoadPlan(model=str(bundled_model), prompts=(BenchPrompt("story", "Tell a story about a lighthouse."),),
                    requests=8, num_predict=24, think=False, warmup_requests=0)
    spec = SweepSpec(base, SweepAxes(parallel=PARALLEL, concurrency=(CLIENTS,)), plan, LatencyTargets(60_000, 10_000))
    seen: list[ServerSample] = []

    async def sweep():
        telemetry = LlamaServerTelemetry(base.base_url)
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch(telemetry, seen, stop))
        try:
            return await SweepRunner(h.supervisor, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client,
                                     server_telemetry=LLAMA_SERVER.server_telemetry, sample_interval_s=0.05).run(spec)
        finally:
            stop.set()
            await watcher
            await telemetry.aclose()

    run = h.run(sweep(), timeout=SWEEP_S)
    assert [r.point.parallel for r in run.results] == list(PARALLEL)
    for result in run.results:
        assert result.status == PointStatus.OK, (result.point.parallel, result.reason, result.detail)
        assert len(result.records) == 8 and all(r.ok for r in result.records), result.records
        assert all(0 < r.output_tokens <= 24 for r in result.records)  # the server's own counts, capped
        during = [s for s in seen if s.slots_total == result.point.parallel]
        assert during, f"no sample while parallel {result.point.parallel} ran"
        busy = [s.slots_busy for s in during if s.slots_busy is not None]
        assert max(busy) == result.point.parallel  # all its slots at work, never more
        # A sample taken while the server restarts may lack /metrics (None): only the answered ones count.
        waiting = max((s.requests_deferred for s in during if s.requests_deferred is not None), default=0)
        assert waiting <= CLIENTS - result.point.parallel
        if result.point.parallel < CLIENTS:
            assert waiting >= 1, f"parallel {result.point.parallel}: no request waited"
        # The sweep's own record of the server agrees: its slots, and its counter of generated tokens
        # grew by exactly what the requests received.
        figures = result.server
        assert figures.samples >= 2 and figures.slots_total == result.point.parallel, figures
        assert figures.slots_busy_max == result.point.parallel, figures
        assert figures.generated_tokens == sum(r.output_tokens for r in result.records), figures
        assert figures.generation_tokens_per_s is not None and figures.generation_tokens_per_s > 0
        assert figures.requests_deferred_max is not None and figures.requests_deferred_max <= CLIENTS - result.point.parallel
    # At parallel 1 the three clients beyond the slot wait for whole replies: their first token comes
    # later than a whole decode of another request takes.
    first = run.results[0].records
    decode = min(r.end_s - r.first_token_s for r in first if r.first_token_s is not None)
    ttft = max(r.first_token_s - r.sent_s for r in first if r.first_token_s is not None)
    assert ttft > decode, (ttft, decode)
    # Put back as it was.
    assert h.supervisor.settings == base and h.supervisor.status.state is ServerState.RUNNING_MANAGED
