"""One cut prompt read in the log and in its reply is one event; a launch's events are named by the asked model
(a server's log may name only the file it loads)."""

from __future__ import annotations

from app.core.watch.events import EventKind, Source
from app.core.watch.signals import Asked, LaunchSeen, PromptCut, ReplyFacts
from app.services.watchdog import Watchdog, WatchLimits

CUT = ('time=2026-12-02T12:18:42.202Z level=WARN source=llama_server.go:317 msg="truncating input prompt" '
       "limit=514 prompt=6200 keep=4 new=514")


def test_a_cut_the_log_told_of_is_not_told_again_by_its_reply() -> None:
    now = [100.0]
    dog = Watchdog(subject="http://127.0.0.1:11434", clock=lambda: now[0])
    dog.expect(Asked(model="smollm2"))
    (logged,) = dog.feed_signal(PromptCut(CUT, sent=6200, kept=514))
    assert logged.subject == "smollm2" and logged.evidence[0].source is Source.LOG
    now[0] = 112.0
    assert dog.feed_reply(ReplyFacts(model="smollm2", at=112.0, prompt_sent=6190, prompt_counted=True,
                                     prompt_used=514)) == []
    # the next cut reply has no log line left to match: it is told from its own figures
    (told,) = dog.feed_reply(ReplyFacts(model="smollm2", at=113.0, prompt_sent=6190, prompt_used=514))
    assert told.kind is EventKind.PROMPT_TRUNCATED and told.evidence[0].source is Source.REPLY
    assert [e.kind for e in dog.events()] == [EventKind.PROMPT_TRUNCATED] * 2


def test_a_logged_cut_long_before_a_reply_is_not_that_replys() -> None:
    now = [0.0]
    dog = Watchdog(clock=lambda: now[0], limits=WatchLimits(work_window_s=60.0))
    dog.feed_signal(PromptCut(CUT, sent=6200, kept=514))
    (told,) = dog.feed_reply(ReplyFacts(model="m", at=500.0, prompt_sent=6190, prompt_used=514))
    assert told.evidence[0].source is Source.REPLY


def test_a_launch_names_the_asked_model_not_the_file_it_loads() -> None:
    dog = Watchdog(subject="http://127.0.0.1:11434")
    dog.expect(Asked(context_per_slot=16384, model="smollm2"))
    (smaller,) = dog.feed_signal(LaunchSeen("… -c 8192 -np 1 …", parallel=1, context_total=8192,
                                            model="/models/blobs/sha256-941f"))
    assert smaller.kind is EventKind.SMALLER_CONTEXT and smaller.subject == "smollm2"
    nobody = Watchdog(subject="http://127.0.0.1:11434")
    nobody.expect(Asked(context_per_slot=16384))
    (unnamed,) = nobody.feed_signal(LaunchSeen("… -c 8192 -np 1 …", parallel=1, context_total=8192,
                                               model="/models/blobs/sha256-941f"))
    assert unnamed.subject == "/models/blobs/sha256-941f"
