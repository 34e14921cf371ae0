"""Ollama's slot reader: what it says before a child is known, and against a real llama-server (the
bundled engine) announced by a `starting llama-server` line as Ollama logs it: busy and idle slots,
then the child's exit said once, and no more requests to its port until the log names a new one."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
import pytest

from app.backends.ollama.child import ChildWatches
from app.backends.ollama.child_telemetry import NO_METRICS, OllamaChildTelemetry, no_log_reason
from app.core.server_telemetry import ServerSample
from tests.backends.llama_server.engine_server import llama_server, post_json
from tests.backends.llama_server.engine_server import sample_until as shared_sample_until
from tests.fakes.raw_http import closed_port

OLLAMA_URL = "http://127.0.0.1:11434"
DATA = Path(__file__).resolve().parents[2] / "data" / "ollama"
WAIT_S = 240.0
POLL_S = 0.2


def starting_line(program: str, model: str, port: int, extra: str = "-c 2048 -np 2") -> str:
    """A `starting llama-server` line in the form the real Ollama 0.32.15 writes it."""
    cmd = f"{program} --model {model} --port {port} --host 127.0.0.1 --no-webui {extra} --flash-attn auto"
    return f'time=2026-12-01T13:35:53.403Z level=INFO source=llama_server.go:433 msg="starting llama-server" cmd="{cmd}"'


STARTED = 'time=2026-12-01T13:35:55.186Z level=INFO source=llama_server.go:1362 msg="llama-server started in 1.78 seconds"'


class CountingTransport(httpx.AsyncHTTPTransport):
    """The real transport, counting the requests it sends (to see that a gone child is not asked)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return await super().handle_async_request(request)


def sample_now(telemetry: OllamaChildTelemetry) -> ServerSample:
    async def once() -> ServerSample:
        try:
            return await telemetry.sample()
        finally:
            await telemetry.aclose()
    return asyncio.run(once())


def test_without_any_of_its_log_the_reader_says_whose_log_it_needs() -> None:
    sample = sample_now(OllamaChildTelemetry(OLLAMA_URL, children=ChildWatches()))
    assert not sample.reports_slots and sample.slots_reason == no_log_reason(OLLAMA_URL)
    assert "only for an Ollama whose log ollama-deck reads" in sample.slots_reason
    assert sample.metrics_reason == NO_METRICS and "without --metrics" in NO_METRICS
    assert sample.source == f"Ollama at {OLLAMA_URL}: no llama-server child known" and sample.server_command == ""


def test_a_log_without_a_child_says_when_slots_will_show() -> None:
    children = ChildWatches()
    for line in (DATA / "log_starting_llama_server.txt").read_text().splitlines()[:12]:  # up to before the load
        children.watch(OLLAMA_URL).feed(line)
    sample = sample_now(OllamaChildTelemetry(OLLAMA_URL, children=children))
    assert "has not started a llama-server in the 12 log lines read so far" in sample.slots_reason
    assert "send a prompt" in sample.slots_reason


def test_an_ollama_before_0_30_is_said_to_have_no_slots() -> None:
    children = ChildWatches()
    children.watch(OLLAMA_URL).feed('time=2025-10-01T10:00:00.000Z level=INFO source=routes.go:1 '
                                    'msg="Listening on 127.0.0.1:11434 (version 0.12.6)"')
    sample = sample_now(OllamaChildTelemetry(OLLAMA_URL, children=children))
    assert sample.slots_reason.startswith("Ollama 0.12.6 at http://127.0.0.1:11434 runs models in its own runner")


def test_a_child_still_loading_is_not_taken_for_gone() -> None:
    children = ChildWatches()
    port = closed_port()
    children.watch(OLLAMA_URL).feed(starting_line("/x/llama-server", "/m.gguf", port))
    telemetry = OllamaChildTelemetry(OLLAMA_URL, children=children)
    sample = sample_now(telemetry)
    assert sample.slots_reason == f"llama-server on port {port} does not answer yet: Ollama is loading the model"
    assert children.watch(OLLAMA_URL).state.gone == ""
    assert sample.source.startswith(f"Ollama's llama-server at 127.0.0.1:{port} · -np 2 · -c 2048 (1024 per slot)")
    assert sample.source.endswith(" · loading")
    assert sample.server_command.startswith("/x/llama-server --model /m.gguf --port")


@pytest.mark.engine
def test_the_childs_slots_are_read_live_and_its_exit_stops_the_polling(llama_server_binary: Path,
                                                                       bundled_model: Path, tmp_path: Path) -> None:
    children = ChildWatches()
    watch = children.watch(OLLAMA_URL)
    transport = CountingTransport()
    telemetry = OllamaChildTelemetry(OLLAMA_URL, children=children, transport=transport)
    flags = ("-np", "2", "-c", "2048", "-t", "2")
    replies: list[dict] = []

    async def sample_until(done, what: str) -> list[ServerSample]:
        return await shared_sample_until(telemetry, done, what, WAIT_S, POLL_S)

    with llama_server(llama_server_binary, bundled_model, tmp_path, flags) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        watch.feed(starting_line(str(llama_server_binary), str(bundled_model), port))
        watch.feed(STARTED)

        async def while_it_runs() -> tuple[ServerSample, list[ServerSample], ServerSample]:
            idle = await telemetry.sample()
            body = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper."}],
                    "max_tokens": 48, "temperature": 0}
            thread = threading.Thread(target=lambda: replies.append(
                post_json(f"{server.base_url}/v1/chat/completions", body)))
            thread.start()
            busy = await sample_until(lambda s: s.slots_busy == 1 and (s.slots[0].decoded or s.slots[1].decoded),
                                      "a busy slot decoding")
            after = await sample_until(lambda s: bool(replies) and s.slots_busy == 0, "the reply and no busy slot")
            thread.join()
            await telemetry.aclose()  # its connections belong to this loop
            return idle, busy, after[-1]

        idle, busy, after = asyncio.run(while_it_runs())

    async def after_exit() -> tuple[ServerSample, ServerSample, int, int]:
        try:
            gone = await telemetry.sample()
            sent = transport.sent
            again = await telemetry.sample()
            return gone, again, sent, transport.sent
        finally:
            await telemetry.aclose()

    gone, again, sent_by_gone, sent_after = asyncio.run(after_exit())

    assert (idle.slots_total, idle.slots_busy) == (2, 0) and all(s.n_ctx == 1024 for s in idle.slots)
    assert idle.source == f"Ollama's llama-server at 127.0.0.1:{port} · -np 2 · -c 2048 (1024 per slot) · " \
                          "flash-attn auto · KV f16 · loaded in 1.78 s"
    assert idle.server_command.startswith(f"{llama_server_binary} --model {bundled_model} --port {port}")
    assert idle.metrics_reason == NO_METRICS and idle.slots_reason == ""
    slot = next(s for s in busy[-1].slots if s.busy)
    assert slot.prompt_tokens and slot.prompt_processed is not None and slot.decoded >= 1
    assert after.slots_busy == 0 and replies[0]["usage"]["completion_tokens"] >= 1
    assert not gone.reports_slots and gone.slots_reason.startswith(f"llama-server on port {port} no longer answers")
    assert "Ollama unloaded the model" in gone.slots_reason and watch.state.gone == gone.slots_reason
    assert gone.source.startswith(f"Ollama's last llama-server (127.0.0.1:{port}) has exited")
    assert again.slots_reason == gone.slots_reason and sent_after == sent_by_gone  # the gone child is not asked
    watch.feed(starting_line(str(llama_server_binary), str(bundled_model), closed_port(), "-c 3072 -np 3"))
    following = sample_now(telemetry)
    assert "does not answer yet" in following.slots_reason and "-np 3" in following.source
    assert transport.sent == sent_after + 1  # the new child is asked
