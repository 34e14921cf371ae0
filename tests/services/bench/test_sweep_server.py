"""The server's own readings over a point's window: what server_figures makes of a run's samples, and
what the window says when there is no telemetry or the server does not answer (on a real port)."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace

from app.backends.llama_server.metrics import server_telemetry
from app.backends.openai.metrics import OpenAiTelemetry
from app.core.bench.run import server_cells
from app.core.server_telemetry import ServerSample, SlotState
from app.services.bench.sweep_server import ServerWindow, server_figures
from tests.backends.openai.exposition_server import exposer, served


def sample(at: float, busy: int, total: int = 4, deferred: int | None = 0, predicted: float | None = 100.0,
           decoded: int = 0, kv: float | None = 0.1) -> ServerSample:
    slots = tuple(SlotState(i, i < busy, 4096, 10, 10, 0, decoded if i < busy else 0) for i in range(total))
    return ServerSample(at=at, slots_total=total, slots_busy=busy, requests_processing=busy, requests_deferred=deferred,
                        kv_cache_fill=kv, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                        prompt_tokens_total=50.0 + at, predicted_tokens_total=predicted, slots=slots)


def test_the_window_counts_what_the_server_generated_and_the_most_it_had_busy_and_waiting():
    samples = [sample(0.0, 0), sample(1.0, 4, deferred=3, decoded=5, kv=0.4), sample(2.0, 2, deferred=0, decoded=9,
                                                                                           predicted=140.0),
               sample(3.0, 0, predicted=180.0)]
    f = server_figures(samples)
    assert (f.samples, f.slots_total, f.slots_busy_max, f.requests_deferred_max) == (4, 4, 4, 3)
    assert f.slots_busy_mean == 1.5 and f.kv_fill_max_pct == 40.0
    assert f.generated_tokens == 80.0 and f.window_s == 3.0  # the counter's growth, first to last reading
    assert f.prompt_tokens == 3.0
    assert abs(f.generation_tokens_per_s - 80.0 / 3.0) < 1e-9


def test_the_windows_requests_count_whole_even_when_the_baseline_sees_their_first_tokens():
    # The window's requests start as it opens: the baseline may already see 2 slots with 5 tokens each in
    # flight. Those requests finish into the counter (+30 in all), and all 30 tokens are the window's.
    f = server_figures([sample(0.0, 2, decoded=5, predicted=100.0), sample(1.0, 0, predicted=130.0)])
    assert f.generated_tokens == 30.0
    # Still decoding at the last reading: what the slots hold so far is added.
    f = server_figures([sample(0.0, 0, predicted=100.0), sample(1.0, 1, decoded=7, predicted=120.0)])
    assert f.generated_tokens == 27.0


def test_a_server_without_counters_still_gives_its_slots():
    f = server_figures([sample(0.0, 1, deferred=None, predicted=None), sample(1.0, 3, deferred=None, predicted=None)])
    assert f.slots_busy_max == 3 and f.requests_deferred_max is None and f.generated_tokens is None
    assert f.generation_tokens_per_s is None


def test_no_telemetry_and_no_answer_each_say_why():
    async def run(window: ServerWindow):
        window.start()
        await asyncio.sleep(0)  # let the first poll run
        return await window.stop()

    quiet = asyncio.run(run(ServerWindow(None, "http://127.0.0.1:9")))
    assert quiet.samples == 0 and "does not report" in quiet.reason
    with socket.socket() as s:  # a port nothing listens on: the readings fail, the window says so
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = asyncio.run(run(ServerWindow(server_telemetry, f"http://127.0.0.1:{port}")))
    assert dead.samples == 0 and f"127.0.0.1:{port}" in dead.reason and "did not answer" in dead.reason


def test_a_server_without_slots_fills_running_waiting_and_kv_from_its_metrics():
    # vLLM has no /slots: its running gauge stands for busy slots, its waiting gauge for the deferred
    # requests. The window reads it over a real socket through the openai backend's reader.
    idle, busy = served("openai/vllm_idle.txt").decode(), served("openai/vllm_busy.txt").decode()
    gauges = ("vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
              "vllm:gpu_cache_usage_perc{")
    after = "\n".join(line.rsplit(" ", 1)[0] + " 0.0" if line.startswith(gauges) else line for line in busy.split("\n"))
    script = [busy, after]  # what the server says after each reading kept (the first reading sees idle)

    async def go():
        async with exposer() as server:
            server.answer(idle)
            enough = asyncio.Event()

            def kept(_sample: ServerSample) -> None:
                if script:
                    server.answer(script.pop(0))
                else:
                    enough.set()

            window = ServerWindow(lambda url: OpenAiTelemetry(url + "/v1"), server.url, interval_s=0.01, on_sample=kept)
            window.start()
            await asyncio.wait_for(enough.wait(), 30)
            return window.samples[:], await window.stop()

    samples, f = asyncio.run(go())
    assert [s.requests_processing for s in samples[:3]] == [0, 23, 0] and all(s.slots_total is None for s in samples)
    assert (f.slots_total, f.slots_busy_max, f.requests_running_max, f.requests_deferred_max) == (None, None, 23, 5)
    assert f.kv_fill_max_pct == 50.0 and f.generated_tokens == (102400 + 98304) - 40960
    assert f.prompt_tokens == (51200 + 49152) - 18432 and f.reason == ""
    assert server_cells(SimpleNamespace(server=f))[:2] == ["23", "5"]


def test_the_window_waits_for_running_requests_where_there_are_no_slots():
    def slotless(at: float, running: int, predicted: float) -> ServerSample:
        return ServerSample(at=at, slots_total=None, slots_busy=None, requests_processing=running, requests_deferred=0,
                            kv_cache_fill=None, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                            prompt_tokens_total=None, predicted_tokens_total=predicted)

    window = ServerWindow(None, "http://127.0.0.1:9")
    window.samples = [slotless(0.0, 2, 100.0), slotless(1.0, 1, 100.0)]
    assert not window._settled()  # one request still running, though the counter held still
    window.samples.append(slotless(2.0, 0, 130.0))
    assert not window._settled()  # the counter just moved
    window.samples.append(slotless(3.0, 0, 130.0))
    assert window._settled()
    assert server_figures(window.samples).requests_running_max == 2
