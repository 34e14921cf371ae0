"""The app's Watchdog fed from a real llama-server (the bundled one, serving the bundled SmolLM2) the way the
app feeds it: the supervisor's log lines (on_log -> feed_log through the backend's log reader), its status
(on_status -> feed_status) and the backend's telemetry reader (/metrics and /slots -> feed_server).

What this llama-server gives: /metrics has no KV-cache ratio (a full cache shows in /slots and, with a
shared cache, in the log); a prompt longer than a slot's context is refused (HTTP 400), never cut."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import llama_server_settings
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.core.watch.events import EventKind, Source, WatchEvent
from app.core.watch.signals import Asked
from app.services.watchdog import Watchdog
from tests.fakes.ollama.server_fixtures import free_port, kill_tree, supervisor_loop  # noqa: F401 - the fixture

START_S = 60.0  # SmolLM2 loads in about a second; a busy 2-core machine may take far longer
EVENT_S = 60.0  # a condition the server reaches within seconds when idle
POLL_S = 0.2  # the telemetry reader's period here (the app reads once a second)
FOX = "The quick brown fox jumps over the lazy dog. "  # about ten SmolLM2 tokens


@dataclass
class Watched:
    """One managed llama-server, its watchdog fed as the app feeds it, and a telemetry poller."""

    supervisor: LlamaServerSupervisor
    loop: LoopThread
    dog: Watchdog
    log: list[str] = field(default_factory=list)
    statuses: list[ServerStatus] = field(default_factory=list)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _stop: threading.Event = field(default_factory=threading.Event)
    _poller: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.supervisor.settings.port

    def on_log(self, line: str) -> None:
        self.log.append(line)
        self.dog.feed_log(line)
        with self._changed:
            self._changed.notify_all()

    def wait_log(self, text: str, timeout: float = EVENT_S) -> str:
        def found() -> str | None:
            return next((line for line in list(self.log) if text in line), None)

        with self._changed:
            assert self._changed.wait_for(lambda: found() is not None, timeout), f"no log line with {text!r}"
        return found() or ""

    def on_status(self, status: ServerStatus) -> None:
        self.statuses.append(status)
        self.dog.feed_status(status)

    def notify(self, _event: WatchEvent) -> None:
        with self._changed:
            self._changed.notify_all()

    def start(self) -> ServerStatus:
        status: ServerStatus = self.loop.run(self.supervisor.start(), START_S)
        assert status.state is ServerState.RUNNING_MANAGED, status.message
        self._poller = threading.Thread(target=self._poll, name="telemetry", daemon=True)
        self._poller.start()
        return status

    def _poll(self) -> None:
        reader = LLAMA_SERVER.server_telemetry(f"http://127.0.0.1:{self.port}")  # type: ignore[misc]
        while not self._stop.wait(POLL_S):
            try:
                sample = self.loop.run(reader.sample(), 10.0)
            except Exception:  # noqa: BLE001 - a server gone or busy: the next period reads again
                continue
            self.dog.feed_server(sample)
        self.loop.run(reader.aclose(), 10.0)

    def wait_event(self, kind: EventKind, timeout: float = EVENT_S,
                   where: Callable[[WatchEvent], bool] = lambda e: True) -> WatchEvent:
        def found() -> WatchEvent | None:
            return next((e for e in self.dog.events() if e.kind is kind and where(e)), None)

        with self._changed:
            if not self._changed.wait_for(lambda: found() is not None, timeout):
                raise AssertionError(f"no {kind.value} within {timeout} s; events: "
                                     f"{[e.line() for e in self.dog.events()]}")
        event = found()
        assert event is not None
        print(event.line(), "|", event.evidence[0].source.value, "|", event.evidence[0].text)
        return event

    def close(self) -> None:
        self._stop.set()
        if self._poller is not None:
            self._poller.join(30)
        self.loop.run(self.supervisor.close(), START_S)


@pytest.fixture
def watched(supervisor_loop: LoopThread, tmp_path: Path, llama_server_binary: Path,  # noqa: F811
            bundled_model: Path) -> Iterator[Callable[..., Watched]]:
    made: list[Watched] = []

    def make(asked: Asked | None = None, **fields: Any) -> Watched:
        base = ServerSettings(backend="llama_server", port=free_port(), context_length=256)
        settings = llama_server_settings(base.replace(**fields), binary=str(llama_server_binary),
                                         model_path=str(bundled_model), threads=2)
        assert LLAMA_SERVER.log_signals is not None
        dog = Watchdog(subject=f"127.0.0.1:{settings.port}", log_reader=LLAMA_SERVER.log_signals())
        dog.expect(asked)
        holder: list[Watched] = []
        supervisor = LlamaServerSupervisor(settings, on_status=lambda s: holder[0].on_status(s),
                                           on_log=lambda line: holder[0].on_log(line), start_timeout_s=START_S,
                                           stop_grace_s=5.0, health_interval_s=0.2,
                                           runtime_dir=tmp_path / f"run{len(made)}")
        w = Watched(supervisor, supervisor_loop, dog)
        holder.append(w)
        dog.subscribe(w.notify)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def post(port: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=START_S * 2) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}  # the server went away mid-request


def send_all(port: int, bodies: list[dict[str, Any]]) -> Callable[[], list[tuple[int, dict[str, Any]]]]:
    """Send the requests at once, each on its own thread; returns the function that waits for the replies."""
    replies: list[tuple[int, dict[str, Any]]] = []
    threads = [threading.Thread(target=lambda b=b: replies.append(post(port, b)), daemon=True) for b in bodies]
    for t in threads:
        t.start()

    def join() -> list[tuple[int, dict[str, Any]]]:
        for t in threads:
            t.join(START_S * 2)
        return replies
    return join


@pytest.mark.engine
def test_requests_beyond_the_one_slot_are_deferred_then_a_kill_is_a_crash(watched) -> None:
    w = watched(asked=Asked.of(1, 256), num_parallel=1)
    running = w.start()
    send_all(w.port, [{"prompt": "Tell me a story.", "n_predict": 64, "ignore_eos": True}] * 3)

    deferred = w.wait_event(EventKind.REQUESTS_DEFERRED)

    assert deferred.evidence[0].source is Source.METRICS and deferred.evidence[0].figures["requests_deferred"] >= 1
    assert not [e for e in w.dog.events() if e.kind in (EventKind.FEWER_SLOTS, EventKind.SMALLER_CONTEXT)]

    assert running.pid is not None
    os.kill(running.pid, signal.SIGKILL)  # the test's own server (its supervisor's), mid-work: the requests fail
    crashed = w.wait_event(EventKind.SERVER_CRASHED)
    assert crashed.evidence[0].source is Source.STATUS and crashed.evidence[0].figures["exit_code"] == -signal.SIGKILL


@pytest.mark.engine
def test_a_full_slot_shifts_its_context_and_a_longer_prompt_is_refused(watched) -> None:
    w = watched(asked=Asked.of(1, 256), num_parallel=1, extra_settings="--context-shift")
    w.start()
    # About 251 tokens in a 256-token slot, then more generated than fits: the slot fills, then shifts.
    code, reply = send_all(w.port, [{"prompt": FOX * 25, "n_predict": 24, "ignore_eos": True}])()[0]

    assert code == 200 and reply["truncated"] is True  # the reply says so; the log says how
    shift = w.wait_event(EventKind.CONTEXT_SHIFT)
    assert shift.evidence[0].source is Source.LOG and "slot context shift" in shift.evidence[0].text
    assert shift.evidence[0].figures["dropped_tokens"] > 0
    full = w.wait_event(EventKind.KV_CACHE_FULL)
    assert full.evidence[0].source is Source.SLOTS and full.evidence[0].figures["kv_cache_fill"] >= 0.95
    assert "of 256 tokens" in full.evidence[0].text
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{w.port}/metrics", timeout=10).read().decode()
    assert "kv_cache_usage_ratio" not in metrics  # this version's fill is read from /slots

    code, refused = post(w.port, {"prompt": FOX * 60, "n_predict": 4})

    assert code == 400 and refused["error"]["type"] == "exceed_context_size_error"  # refused, visibly
    assert refused["error"]["n_ctx"] == 256 and refused["error"]["n_prompt_tokens"] > 256
    assert "send_error" in w.wait_log("exceeds the available context size (256 tokens)")  # logged as an error
    assert not [e for e in w.dog.events() if e.kind is EventKind.PROMPT_TRUNCATED]


@pytest.mark.engine
def test_a_shared_cache_without_room_is_read_from_the_log(watched) -> None:
    w = watched(num_parallel=4, context_length=128, extra_settings="--kv-unified")  # -c 512 shared by 4 slots
    w.start()
    join = send_all(w.port, [{"prompt": FOX * 25 + str(i), "n_predict": 8} for i in range(4)])

    full = w.wait_event(EventKind.KV_CACHE_FULL, where=lambda e: e.evidence[0].source is Source.LOG)

    assert "failed to find" in full.evidence[0].text
    join()


@pytest.mark.engine
def test_a_server_restarted_behind_the_apps_back_is_seen_by_its_counters(llama_server_binary: Path,
                                                                          bundled_model: Path,
                                                                          supervisor_loop: LoopThread) -> None:  # noqa: F811
    port = free_port()
    argv = [str(llama_server_binary), "-m", str(bundled_model), "--host", "127.0.0.1", "--port", str(port),
            "-c", "256", "-t", "2", "-np", "1", "--metrics", "--slots"]
    dog = Watchdog(subject=f"127.0.0.1:{port}")
    reader = LLAMA_SERVER.server_telemetry(f"http://127.0.0.1:{port}")  # type: ignore[misc]

    def started() -> subprocess.Popen[bytes]:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        code, _ = until_answered(port)
        assert code == 200
        return process

    first = started()
    try:
        assert post(port, {"prompt": "Hello", "n_predict": 8})[0] == 200
        dog.feed_server(supervisor_loop.run(reader.sample(), 10.0))
        kill_tree(first.pid)
        first.wait(30)
        second = started()
        try:
            dog.feed_server(supervisor_loop.run(reader.sample(), 10.0))
        finally:
            kill_tree(second.pid)
            second.wait(30)
    finally:
        kill_tree(first.pid)
        supervisor_loop.run(reader.aclose(), 10.0)
    [event] = dog.events()
    print(event.line(), "|", event.evidence[0].text)
    assert event.kind is EventKind.SERVER_RESTARTED and event.evidence[0].source is Source.METRICS
    assert event.evidence[0].figures["after"] < event.evidence[0].figures["before"]


def until_answered(port: int) -> tuple[int, Any]:
    """/health's answer once the server answers it with 200, within START_S (each try waits on the socket)."""
    deadline = threading.Event()
    timer = threading.Timer(START_S, deadline.set)
    timer.start()
    try:
        while not deadline.is_set():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
                    if reply.status == 200:
                        return 200, json.loads(reply.read())
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                deadline.wait(0.1)
        return 0, None
    finally:
        timer.cancel()


@pytest.mark.engine
def test_a_context_past_the_models_training_context_is_capped_and_said(watched) -> None:
    """SmolLM2 was trained on 8192 tokens: asked for 16384 per slot, llama-server gives each slot 8192."""
    w = watched(asked=Asked.of(1, 16384), num_parallel=1, context_length=16384)
    w.start()

    smaller = w.wait_event(EventKind.SMALLER_CONTEXT)

    assert smaller.evidence[0].source is Source.LOG and "n_ctx_slot = 8192" in smaller.evidence[0].text
    assert smaller.evidence[0].figures == {"context_per_slot": 8192, "context_per_slot_asked": 16384}
    assert [e.kind for e in w.dog.events()].count(EventKind.SMALLER_CONTEXT) == 1  # /slots agrees: one event
