"""The watchdog on the real Ollama 0.32.15 and SmolLM2, fed as the app feeds it: the log lines and statuses of
the app's own supervisor (managing `ollama serve`), /api/ps through the backend's catalog client, and each
reply's final figures with the prompt's length counted by the backend's prompt counter.

What Ollama really does here, and what the watchdog says of it:
- a prompt of ~5x the context: Ollama keeps 514 of its tokens (200 OK) and logs one WARN line with both
  counts; the reply's own count says the same (PROMPT_TRUNCATED from the log; from the reply where no log
  is read);
- a keep-alive running out or an explicit unload: nothing in the log; /api/ps empties (MODEL_UNLOADED), and
  the next request loads again ("started in" in the log, load_duration in the reply: COLD_LOAD);
- num_ctx above the model's training context (8192): Ollama warns and starts the child with -c 8192
  (SMALLER_CONTEXT); more slots than memory holds: Ollama does not lower -np, the load fails
  (SERVER_CRASHED from `llama-server terminated`, the request 500) and no FEWER_SLOTS is raised;
- a reply generated past a small context: the child shifts it (CONTEXT_SHIFT);
- its llama-server killed: /api/ps still lists the model; the next request logs the child gone
  (SERVER_CRASHED) and loads again (COLD_LOAD);
- `ollama serve` killed: the supervisor's status turns CRASHED (SERVER_CRASHED)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psutil
import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.spec import OLLAMA
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.errors import ServerError
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.watch.events import EventKind, Severity, Source, WatchEvent, event_lines
from app.core.watch.signals import Asked, ReplyFacts
from app.services.bench.prompt_lengths import template_tokens
from app.services.watchdog import Watchdog, WatchLimits
from tests.fakes.ollama.server_fixtures import LogRecorder, StatusRecorder, free_port
from tests.ollama_real_fixtures import MODEL_NAME, OllamaKit, llama_server_children

pytestmark = pytest.mark.ollama_real
START_TIMEOUT_S = 60.0
REQUEST_TIMEOUT_S = 120.0
# SmolLM2 loads in about a second (less on an idle machine, from the page cache): any load in the middle of work
# counts here, where a real model's takes many.
LIMITS = WatchLimits(cold_load_s=0.0)
GONE_WITHIN_S = 30.0  # a keep-alive of a few seconds: Ollama's scheduler unloads within this
def sentences(count: int) -> str:
    return " ".join(f"Sentence number {i} talks about the weather in a small town by the sea." for i in range(count))


PARAGRAPH = sentences(10)


def long_text(copies: int) -> str:
    """A prompt of `copies` times the same paragraph (~180 tokens each)."""
    return " ".join([PARAGRAPH] * copies)


@dataclass
class Watched:
    """One managed real Ollama with the app's supervisor on a loop thread, a Watchdog fed its log and status."""

    supervisor: ServerSupervisor
    loop: LoopThread
    dog: Watchdog
    logs: LogRecorder
    statuses: StatusRecorder
    replies: list[ReplyFacts] = field(default_factory=list)
    dogs: list[Watchdog] = field(default_factory=list)  # other watchdogs fed the same, for the test's report

    @property
    def url(self) -> str:
        return self.supervisor.settings.base_url

    def run(self, coro: Any, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        return self.loop.run(coro, timeout)

    def chat(self, text: str, *, prompt_sent: int | None = None, keep_alive: str | int | None = None,
             options: dict[str, Any] | None = None, dog: Watchdog | None = None) -> ReplyFacts:
        """One streamed chat as the Prompt page sends it; its figures fed to the watchdog."""
        async def go() -> ReplyFacts:
            first: float | None = None
            final = None
            async with OllamaClient(self.url) as client:
                async for chunk in client.chat(MODEL_NAME, [{"role": "user", "content": text}], keep_alive=keep_alive,
                                               options={"num_predict": 4, "seed": 1, **(options or {})}):
                    if first is None and chunk.content and chunk.request_sent_s is not None:
                        first = chunk.t_monotonic - chunk.request_sent_s
                    final = chunk.final or final
            return ReplyFacts.of(final, model=MODEL_NAME, at=time.time(), prompt_sent=prompt_sent,
                                 prompt_counted=prompt_sent is not None, ttft_s=first)

        facts = self.run(go())
        self.replies.append(facts)
        (dog or self.dog).feed_reply(facts)
        return facts

    def feed_loaded(self) -> list[str]:
        """/api/ps through the backend's catalog client, fed to the watchdog; the names loaded."""
        async def ps() -> list[Any]:
            async with OLLAMA.catalog(self.url) as client:
                return await client.ps()
        models = self.run(ps())
        self.dog.feed_loaded(models)
        return [m.name for m in models]

    def until_unloaded(self) -> None:
        """Poll /api/ps (each answer fed) until no model is loaded; fails after GONE_WITHIN_S."""
        async def poll() -> None:
            deadline = time.monotonic() + GONE_WITHIN_S
            async with OLLAMA.catalog(self.url) as client:
                while True:
                    models = await client.ps()
                    self.dog.feed_loaded(models)
                    if not models:
                        return
                    assert time.monotonic() < deadline, f"{[m.name for m in models]} still loaded"
                    await asyncio.sleep(0.2)
        self.run(poll(), timeout=GONE_WITHIN_S + 10)

    def count(self, copies: int) -> int:
        """long_text(copies)'s chat prompt tokens by the backend's prompt counter: Ollama counts by running a
        probe, which it would cut like the request, so the paragraph is counted alone and twice (what each
        further copy adds), each far shorter than the context, plus the chat template's tokens."""
        async def go() -> int:
            counter = OLLAMA.prompt_counter(self.url)
            try:
                one = await counter.count_text(MODEL_NAME, PARAGRAPH)
                two = await counter.count_text(MODEL_NAME, long_text(2))
                return one + (copies - 1) * (two - one) + await template_tokens(counter, MODEL_NAME)
            finally:
                await counter.aclose()
        return int(self.run(go()))

    def kinds(self) -> list[EventKind]:
        return [e.kind for e in self.dog.events()]

    def only(self, kind: EventKind) -> WatchEvent:
        found = [e for e in self.dog.events() if e.kind is kind]
        assert len(found) == 1, (kind, [e.line() for e in self.dog.events()])
        return found[0]


@pytest.fixture
def watched(real_ollama_on_path: OllamaKit, request: pytest.FixtureRequest) -> Iterator[Callable[..., Watched]]:
    """Factory: a Watched server started by the app's supervisor with these settings, held to them (and to
    `asked_context`, where the test asks the server for more than the settings say); each is closed after,
    and the events its watchdogs raised are kept in the test's report (`--junitxml` shows them)."""
    loop = LoopThread(name="e2e-watch-loop")
    made: list[Watched] = []

    def make(settings: ServerSettings, asked_context: int | None = None) -> Watched:
        statuses, logs = StatusRecorder(), LogRecorder()
        dog = Watchdog(subject=settings.base_url, log_reader=OLLAMA.log_signals(), limits=LIMITS)
        dog.expect(Asked.of(settings.num_parallel, asked_context or settings.context_length, model=MODEL_NAME))

        def on_status(status: ServerStatus) -> None:
            statuses(status)
            dog.feed_status(status)

        def on_log(line: str) -> None:
            logs(line)
            dog.feed_log(line)

        supervisor = ServerSupervisor(settings, on_status=on_status, on_log=on_log, start_timeout_s=START_TIMEOUT_S,
                                      stop_grace_s=10.0, health_interval_s=0.2)
        one = Watched(supervisor, loop, dog, logs, statuses)
        made.append(one)
        status = one.run(supervisor.start(), timeout=90)
        assert status.state is ServerState.RUNNING_MANAGED, status.message
        return one

    yield make
    for one in made:
        seen = [e for dog in (one.dog, *one.dogs) for e in dog.events()]
        request.node.user_properties.append(("events", "\n".join(event_lines(seen, advice=False))))
    try:
        for one in made:
            one.run(one.supervisor.close(), timeout=60)
    finally:
        loop.stop()


def test_a_prompt_five_times_the_context_is_cut_and_said_so(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=1024))
    sent = server.count(30)
    assert 4 * 1024 < sent < 6 * 1024  # ~5x the context, in the model's own tokens
    no_log = Watchdog(subject=server.url)  # the same reply, where the server's log is out of reach
    facts = server.chat(long_text(30), prompt_sent=sent)
    server.dogs.append(no_log)
    no_log.feed_reply(facts)

    assert facts.prompt_used == 514  # Ollama kept 514 tokens and answered 200
    cut = server.only(EventKind.PROMPT_TRUNCATED)  # once: the reply's own count matches the logged cut
    (evidence,) = cut.evidence
    assert cut.severity is Severity.SEVERE and cut.subject == MODEL_NAME and evidence.source is Source.LOG
    assert 'msg="truncating input prompt" limit=514' in evidence.text
    logged_sent = evidence.figures["prompt_tokens_sent"]
    assert evidence.figures["prompt_tokens_kept"] == 514 and abs(logged_sent - sent) <= 0.02 * sent
    assert f"(514 of {logged_sent:.0f} tokens kept)" in cut.summary

    (from_reply,) = no_log.events()
    assert from_reply.kind is EventKind.PROMPT_TRUNCATED and from_reply.evidence[0].source is Source.REPLY
    assert dict(from_reply.evidence[0].figures) == {"prompt_tokens_sent": sent, "prompt_tokens_used": 514}
    assert f"used 514 of the {sent} prompt tokens sent (counted in the server's tokens)" in from_reply.summary


def test_a_keep_alive_that_runs_out_unloads_and_the_next_request_loads_cold(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=1024))
    server.chat("Hello", keep_alive="2s")
    assert server.feed_loaded() == [f"{MODEL_NAME}:latest"]
    server.until_unloaded()
    unloaded = server.only(EventKind.MODEL_UNLOADED)
    assert unloaded.subject == f"{MODEL_NAME}:latest" and unloaded.evidence[0].source is Source.LOADED
    assert not [line for line in server.logs.lines if "unload" in line.lower() and "time=" in line]  # not logged

    reply = server.chat("Hello again")
    cold = server.only(EventKind.COLD_LOAD)  # the log's "started in" and the reply's load_duration: one event
    assert cold.subject == MODEL_NAME and cold.at > unloaded.at
    assert cold.evidence[0].source is Source.LOG and 'msg="llama-server started in' in cold.evidence[0].text
    assert reply.load_s is not None and reply.load_s > 0
    assert server.kinds() == [EventKind.MODEL_UNLOADED, EventKind.COLD_LOAD]


def test_an_explicit_unload_is_seen_in_the_loaded_models(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=1024))
    server.chat("Hello")
    server.feed_loaded()

    async def unload() -> None:
        async with OllamaClient(server.url) as client:
            await client.unload(MODEL_NAME)
    server.run(unload())
    server.until_unloaded()
    assert server.kinds() == [EventKind.MODEL_UNLOADED]
    assert "is no longer in the loaded models" in server.only(EventKind.MODEL_UNLOADED).evidence[0].text


def test_a_context_above_the_models_training_context_is_lowered_and_said_so(watched) -> None:
    """The settings ask 16384 per slot; SmolLM2 was trained on 8192: Ollama warns and starts -c 8192."""
    server = watched(ServerSettings(port=free_port(), context_length=16384))
    server.chat("Hello")
    smaller = server.only(EventKind.SMALLER_CONTEXT)
    (evidence,) = smaller.evidence
    assert smaller.subject == MODEL_NAME and evidence.source is Source.LOG
    assert 'msg="requested context size too large for model" num_ctx=16384 n_ctx_train=8192' in evidence.text
    assert dict(evidence.figures) == {"context_per_slot": 8192, "context_per_slot_asked": 16384}
    assert "-c 8192 -np 1" in server.logs.wait_for('msg="starting llama-server"')
    assert server.kinds() == [EventKind.SMALLER_CONTEXT]


def test_a_reply_longer_than_a_small_context_shifts_it(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=256))
    """A 124-token prompt (under the 130 Ollama keeps at 256) and 140 tokens generated: past 256, the child
    drops half of what follows the kept start and goes on."""
    reply = server.chat(sentences(6) + " Now write a very long story about that town, "
                        "with many chapters. Chapter 1:", options={"num_predict": 140, "temperature": 1.5})
    assert reply.prompt_used is not None and reply.prompt_used < 130  # the prompt was not cut, the reply overflowed
    shift = server.only(EventKind.CONTEXT_SHIFT)  # every shift of one reply: one episode
    assert shift.evidence[0].source is Source.LOG and "slot context shift" in shift.evidence[0].text
    assert shift.evidence[0].figures["dropped_tokens"] > 0


def test_more_slots_than_memory_holds_fail_the_load_instead_of_shrinking(make_real_ollama, request) -> None:
    """Ollama 0.32.15 passes -np as asked (here enough slots at 8192 that their KV cache, 22.5 KiB per token,
    needs twice this machine's memory): the child cannot allocate it and exits; there are never fewer slots."""
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() != "0":
        pytest.skip("memory is overcommitted here: an allocation beyond it may not fail at once")
    per_slot = 8192 * 30 * 3 * 64 * 2 * 2  # SmolLM2: 30 layers, 3 KV heads of 64, K and V in f16
    parallel = -(-2 * psutil.virtual_memory().total // per_slot)
    server = make_real_ollama(OLLAMA_NUM_PARALLEL=str(parallel), OLLAMA_CONTEXT_LENGTH="8192")
    dog = Watchdog(subject=server.base_url, log_reader=OLLAMA.log_signals())
    dog.expect(Asked(parallel=parallel, context_per_slot=8192, model=MODEL_NAME))

    async def load() -> str:
        async with OllamaClient(server.base_url) as client:
            try:
                await client.load(MODEL_NAME)
            except ServerError as exc:
                return exc.message
        return ""

    error = asyncio.run(asyncio.wait_for(load(), REQUEST_TIMEOUT_S))
    server.logs.wait_for('msg="llama-server terminated"')
    for line in list(server.logs.lines):  # the server's output as logged, in order
        dog.feed_log(line)
    assert "llama-server process has terminated: exit status 1" in error
    assert f"-np {parallel}" in server.logs.wait_for('msg="starting llama-server"')
    request.node.user_properties.append(("events", "\n".join(event_lines(dog.events(), advice=False))))
    (crashed,) = dog.events()
    assert crashed.kind is EventKind.SERVER_CRASHED and "(exit status 1)" in crashed.summary


def test_a_killed_llama_server_is_found_at_the_next_request_which_loads_cold(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=1024))
    server.chat("Hello")
    pid = server.supervisor.status.pid
    assert pid is not None
    (runner,) = llama_server_children(pid)  # the child of the Ollama this test started
    runner.kill()
    psutil.wait_procs([runner], timeout=15)
    assert server.feed_loaded() == [f"{MODEL_NAME}:latest"]  # /api/ps still lists it
    assert server.kinds() == []

    reply = server.chat("Hello again")
    crashed = server.only(EventKind.SERVER_CRASHED)
    assert 'msg="llama-server process no longer running"' in crashed.evidence[0].text
    assert "(signal: killed)" in crashed.summary
    cold = server.only(EventKind.COLD_LOAD)
    assert cold.at >= crashed.at and reply.load_s is not None and reply.load_s > 0
    assert server.kinds() == [EventKind.SERVER_CRASHED, EventKind.COLD_LOAD]


def test_the_killed_ollama_is_reported_crashed_by_the_supervisors_status(watched) -> None:
    server = watched(ServerSettings(port=free_port(), context_length=1024))
    server.chat("Hello")
    pid = server.supervisor.status.pid
    assert pid is not None
    before = len(server.statuses.statuses)
    os.kill(pid, signal.SIGKILL)  # the `ollama serve` this test's supervisor started
    server.statuses.wait_for(ServerState.CRASHED, timeout=10, after=before)
    crashed = server.only(EventKind.SERVER_CRASHED)
    assert crashed.evidence[0].source is Source.STATUS and crashed.severity is Severity.SEVERE
    assert crashed.evidence[0].figures == {"exit_code": -signal.SIGKILL}
    assert f"(exit code {-signal.SIGKILL})" in crashed.summary
