"""Watchdog.follow: another server (or the app's own restart) starts over what was read, keeps the events."""

from __future__ import annotations

from app.core.watch.events import EventKind
from app.core.watch.signals import ServerListening
from app.services.watchdog import Watchdog

LISTENING = "main: server is listening on http://127.0.0.1:8080 - starting the main loop"


def test_a_server_followed_anew_starts_over_and_the_history_stays() -> None:
    dog = Watchdog(subject="http://127.0.0.1:8080")
    seen = []
    dog.subscribe(seen.append)
    dog.feed_signal(ServerListening(LISTENING))
    dog.feed_signal(ServerListening(LISTENING))  # a second start it did not make: a restart
    assert [e.kind for e in seen] == [EventKind.SERVER_RESTARTED]
    dog.follow("http://127.0.0.1:8081", None)
    dog.feed_signal(ServerListening(LISTENING))  # the new server's first start is no restart
    assert dog.subject == "http://127.0.0.1:8081"
    assert [e.kind for e in dog.events()] == [EventKind.SERVER_RESTARTED] and len(seen) == 1
    dog.feed_signal(ServerListening(LISTENING))
    assert [e.subject for e in seen] == ["http://127.0.0.1:8080", "http://127.0.0.1:8081"]
