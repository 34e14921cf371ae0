"""A sweep on the real llama-server with the bundled SmolLM2, measured by the real contention probe:
one point runs alone, and while the next one measures the test starts real processes that burn every
core. The quiet point stays stable; the contended one says what competed, is not stable, and the
recommendation leaves it out."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from app.adapters.telemetry.contention import PsutilContentionProbe, contention_probes
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.contention import Contention, ContentionKind
from app.core.bench.stats import LatencyTargets
from app.core.bench.outcome import PointStatus
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.state import ServerState
from app.services.bench.sweep_runner import SweepProgress, SweepRunner
from tests.backends.llama_server.test_supervisor import make_llama  # noqa: F401 - the fixture

SWEEP_S = 600.0  # a ceiling for a loaded 2-core machine; the sweep takes well under a minute when idle
BURN_S = 120.0  # each burner ends by itself after this, whatever happens to the test
BURN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def quiet_or_not(server_pids: list[int]) -> Contention:
    """What other programs take of the CPU before the sweep, over a window in which this process burns a
    second of CPU (as it will driving the load). On CI nothing else runs and this is NONE; on a machine
    shared with other work it may not be, and the quiet point is then expected to say so."""
    probe = PsutilContentionProbe()
    probe.begin(server_pids)
    own = psutil.Process().cpu_times()
    while sum(psutil.Process().cpu_times()[:2]) - sum(own[:2]) < 1.0:
        pass
    return probe.end(server_pids)


@pytest.mark.engine
@pytest.mark.timeout(SWEEP_S + 60)
def test_a_point_measured_while_other_processes_take_the_cpu_is_not_stable(make_llama, bundled_model: Path) -> None:  # noqa: F811
    h = make_llama(num_parallel=1)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    base = h.supervisor.settings
    plan = LoadPlan(model=str(bundled_model), prompts=(BenchPrompt("story", "Tell a story about a lighthouse."),),
                    requests=6, num_predict=32, think=False, warmup_requests=1)
    # The same setting twice: only the competition differs between the points.
    spec = SweepSpec(base, SweepAxes(parallel=(1,), concurrency=(2, 3)), plan, LatencyTargets(60_000, 10_000))
    burners: list[subprocess.Popen[bytes]] = []
    background = quiet_or_not(h.supervisor.server_pids())

    def on_progress(progress: SweepProgress) -> None:
        # The second point warms up: burning processes on all cores but one, so the machine has no core to
        # spare whatever its size (started on the loop thread; Popen returns at once). Started before its
        # window opens, they burn through all of it however fast the engine answers (a window of a second
        # or so here: started as it opened, they would still be starting when it closed). More would starve
        # the engine's spinning threads for minutes on 2 cores.
        if progress.point == 1 and progress.phase == "warm-up" and not burners:
            burners.extend(subprocess.Popen([sys.executable, "-c", BURN, str(BURN_S)])
                           for _ in range(max(1, min((psutil.cpu_count() or 1) - 1, 32))))

    async def sweep():
        runner = SweepRunner(h.supervisor, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client,
                             server_pids=h.supervisor.server_pids, contention=contention_probes(None),
                             sample_interval_s=0.1)
        try:
            return await runner.run(spec, on_progress)
        finally:
            for burner in burners:
                burner.kill()
            await asyncio.to_thread(lambda: [b.wait(10) for b in burners])

    run = h.run(sweep(), timeout=SWEEP_S)
    quiet, contended = run.results
    server = set(h.supervisor.server_pids())
    mine = server | {os.getpid()} | {b.pid for b in burners}
    if background.kind is ContentionKind.NONE:
        # Alone, with the test runner's own process busy driving the load: measured, and nothing competed.
        assert quiet.status == PointStatus.OK and quiet.contention.kind is ContentionKind.NONE, (quiet.contention.text(), quiet.reason)
    else:
        # Other programs already took the CPU before the sweep (a shared machine): the point says so, and
        # what it names is theirs, never the test's own process, the server's or a burner (not started yet).
        assert quiet.status == PointStatus.UNSTABLE and quiet.contention.kind is ContentionKind.CPU, quiet.contention.text()
        assert quiet.contention.top_pid not in mine, quiet.contention.text()
    assert quiet.contention.cpu_server_pct is not None and quiet.contention.cpu_server_pct > 0
    # With the burners: every request still succeeded, but the point says what took the CPU and is not stable.
    assert contended.stats is not None and contended.stats.requests_ok == 6
    verdict = contended.contention
    assert contended.status == PointStatus.UNSTABLE and verdict.kind is ContentionKind.CPU, verdict.text()
    assert verdict.top_pid not in server | {os.getpid()}, verdict.text()
    if background.kind is ContentionKind.NONE:
        assert verdict.top_pid in {b.pid for b in burners}, verdict.text()
    assert contended.reason == verdict.short_text() and contended.stable_text().startswith("⚠ CPU contended")
    if background.kind is ContentionKind.NONE:
        # The recommendation is the point measured alone; the contended one is named as left out.
        assert run.recommendation is not None and run.recommendation.index == quiet.point.index
        assert run.recommendation.contended == (contended.point.index,)
        assert "Left out, measured while other programs competed for the device: 3 clients" in run.recommendation.text
    else:
        assert run.recommendation is not None and run.recommendation.index is None
        assert run.recommendation.contended == (quiet.point.index, contended.point.index)
    assert h.supervisor.status.state is ServerState.RUNNING_MANAGED
