"""The app restarting its own server (new settings applied) is no restart behind its back: the server's log
says it listens again and its counters start over, while the supervisor's status says the app is starting it."""

from __future__ import annotations

from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import ServerSample
from app.core.watch.events import EventKind
from app.core.watch.signals import ServerListening
from app.services.watchdog import Watchdog

LISTENING = "0.01.552.015 I srv  llama_server: listening on http://127.0.0.1:8188"


def counters(prompt: float) -> ServerSample:
    return ServerSample(at=0.0, slots_total=1, slots_busy=0, requests_processing=0, requests_deferred=0,
                        kv_cache_fill=0.0, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                        prompt_tokens_total=prompt, predicted_tokens_total=prompt)


def test_the_apps_own_restart_raises_nothing() -> None:
    dog = Watchdog(subject="s")
    dog.feed_status(ServerStatus(ServerState.STARTING))
    dog.feed_signal(ServerListening(LISTENING))
    dog.feed_status(ServerStatus(ServerState.RUNNING_MANAGED, pid=10))
    dog.feed_server(counters(500))
    dog.feed_status(ServerStatus(ServerState.STOPPING, pid=10))
    dog.feed_status(ServerStatus(ServerState.STOPPED))
    dog.feed_status(ServerStatus(ServerState.STARTING))
    dog.feed_signal(ServerListening(LISTENING))
    dog.feed_status(ServerStatus(ServerState.RUNNING_MANAGED, pid=11))
    dog.feed_server(counters(0))
    assert dog.events() == ()


def test_a_restart_the_app_did_not_make_is_still_seen() -> None:
    dog = Watchdog(subject="s")
    dog.feed_status(ServerStatus(ServerState.RUNNING_ATTACHED))
    dog.feed_signal(ServerListening(LISTENING))
    dog.feed_server(counters(500))
    dog.feed_signal(ServerListening(LISTENING))
    dog.feed_server(counters(0))
    assert [e.kind for e in dog.events()] == [EventKind.SERVER_RESTARTED, EventKind.SERVER_RESTARTED]
