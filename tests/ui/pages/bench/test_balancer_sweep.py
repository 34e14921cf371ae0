"""A sweep from the Benchmark page's controller at a balancer: Debian's real nginx round-robin over two real
llama-servers, run on the app's asyncio loop thread, each backend's share read from its own counters, and the
results table showing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.bench.balance import BalanceVerdict
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.server.settings import ServerSettings
from app.services.bench.sweep_balance import Behind
from app.ui.pages.bench.results import BALANCE_COLUMN, RunView
from app.ui.pages.bench.worker import SweepController
from tests.backends.llama_server.engine_server import RunningServer
from tests.fleet_fixtures import Method
from tests.ui.page_context import run_documents
from tests.ui.pages.bench.test_results_events import _column

pytestmark = pytest.mark.engine


@pytest.fixture
def loop():
    with LoopThread() as running:
        yield running


def test_the_pages_sweep_at_a_balancer_shows_each_backends_share(
        qtbot, loop, backend_pair: tuple[RunningServer, RunningServer], balancer_over, bundled_model: Path) -> None:
    a, b = backend_pair
    balancer = balancer_over([a.base_url, b.base_url], Method.ROUND_ROBIN)
    sweeps = SweepController(loop, None, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client,
                             server_telemetry=LLAMA_SERVER.server_telemetry)
    sweeps.behind = (Behind("a", a.base_url, LLAMA_SERVER.server_telemetry),
                     Behind("b", b.base_url, LLAMA_SERVER.server_telemetry))
    plan = LoadPlan(model=str(bundled_model), prompts=(BenchPrompt("p", "Name three rivers."),), requests=6,
                    num_predict=16, think=False, warmup_requests=0)
    spec = SweepSpec(ServerSettings(backend="llama_server"), SweepAxes(parallel=None, concurrency=(2,)), plan,
                     LatencyTargets(60_000, 10_000), managed=False)
    failed: list[str] = []
    finished: list[object] = []
    sweeps.failed.connect(failed.append)
    sweeps.finished.connect(finished.append)
    sweeps.start(spec, balancer.base_url)
    qtbot.waitUntil(lambda: bool(failed or finished), timeout=240_000)
    assert not failed, failed
    [run] = finished
    [point] = run.results
    assert point.balance is not None and point.balance.verdict is BalanceVerdict.EVEN, point.balance
    assert point.server.samples == 0  # the balancer's URL is not read as a server's
    assert sum(x.generated_tokens.value or 0 for x in point.balance.backends) == point.stats.output_tokens
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.set_run(run)
    col = _column(view, BALANCE_COLUMN)
    assert col is not None and view.table.item(0, col).text() == "a 50% / b 50%"
    assert "generated tokens 48 = 50% (from its counter)" in view.table.item(0, col).toolTip()
