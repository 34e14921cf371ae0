"""Each backend's share over a point's window: a backend with a request counter (vLLM's request_success_total,
as ServerSample.requests_finished_total) is judged on requests, one without telemetry or one that does not answer
(on a real closed port) is unavailable with the reason, and a managed sweep at a balancer is refused."""

from __future__ import annotations

import asyncio
import socket
from dataclasses import replace

import pytest

from app.backends.llama_server.metrics import server_telemetry
from app.core.bench.balance import BalanceVerdict, FigureSource, Measure, judge
from app.core.errors import DeckError
from app.services.bench.sweep_balance import NO_TELEMETRY, BalanceWindow, Behind, backend_share
from app.services.bench.sweep_runner import BALANCER_NOT_MANAGED, SweepRunner
from app.services.bench.sweep_server import ServerWindow, server_figures
from app.backends.ollama.client import OllamaClient, load_client
from tests.services.bench.test_sweep_runner import spec
from tests.services.bench.test_sweep_server import sample
from app.core.server.settings import ServerSettings


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def counted_window(first: float, last: float, predicted: tuple[float, float]) -> ServerWindow:
    window = ServerWindow(server_telemetry, "http://unused")
    window.samples = [replace(sample(0.0, 0, predicted=predicted[0]), requests_finished_total=first),
                      replace(sample(1.0, 0, predicted=predicted[1]), requests_finished_total=last)]
    window.answered = True
    return window


def test_a_request_counter_is_used_and_judged_on() -> None:
    shares = []
    for name, requests, tokens in (("a", (10, 16), (100, 160)), ("b", (4, 6), (40, 60))):
        window = counted_window(*requests, predicted=tokens)
        shares.append(backend_share(Behind(name, f"http://{name}", server_telemetry), window,
                                    server_figures(window.samples)))
    assert shares[0].requests.value == 6 and shares[0].requests.source is FigureSource.SERVER_COUNTER
    balance = judge(shares)
    assert balance.measure is Measure.REQUESTS and balance.cell() == "a 75% / b 25% (UNEVEN)"


def test_no_telemetry_and_no_answer_make_every_figure_unavailable_with_the_reason() -> None:
    port = closed_port()

    async def run() -> object:
        window = BalanceWindow([Behind("a", "http://127.0.0.1:9", None),
                                Behind("b", f"http://127.0.0.1:{port}", server_telemetry)], interval_s=0.05)
        window.start()
        await asyncio.sleep(0)  # let the first poll run
        return await window.stop()

    balance = asyncio.run(run())
    a, b = balance.backends
    assert a.generated_tokens.why == NO_TELEMETRY and a.requests.source is FigureSource.UNAVAILABLE
    assert b.generated_tokens.source is FigureSource.UNAVAILABLE
    assert "did not answer before the point" in b.generated_tokens.why and f"127.0.0.1:{port}" in b.generated_tokens.why
    assert balance.verdict is BalanceVerdict.UNKNOWN
    assert asyncio.run(BalanceWindow([]).stop()) is None  # one server, no balancer


def test_a_managed_sweep_at_a_balancer_is_refused_before_anything_changes() -> None:
    runner = SweepRunner(None, OllamaClient, load_client, base_url="http://127.0.0.1:9",
                         behind=[Behind("a", "http://127.0.0.1:8", None)])
    with pytest.raises(DeckError) as caught:
        asyncio.run(runner.run(spec(ServerSettings(port=9), (1,))))
    assert caught.value.message == BALANCER_NOT_MANAGED
