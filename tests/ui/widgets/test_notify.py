"""Severe events as desktop notifications (a fake tray records them) or a toast in the window; one per kind
a minute (an injected clock), none for milder events or while turned off."""

from __future__ import annotations

import threading
import time

from PySide6.QtWidgets import QSystemTrayIcon, QWidget

from app.core.watch.signals import CacheExhausted, EngineExited, PromptCut
from app.services.watchdog import Watchdog
from app.ui.widgets.notify import PER_KIND_S, SevereNotifier, Toast
from app.ui.widgets.watch_bridge import WatchBridge

CRASH = 'level=ERROR msg="llama runner terminated" error="exit status 2"'


class FakeTray:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str, QSystemTrayIcon.MessageIcon, int]] = []

    def showMessage(self, title, msg, icon, msecs=10_000):  # noqa: N802 - Qt's name
        self.messages.append((title, msg, icon, msecs))


def wired(qtbot, tray=None, toast=None):
    clock = {"now": 1000.0}
    watchdog = Watchdog(subject="http://127.0.0.1:11434")
    notifier = SevereNotifier(tray=tray, toast=toast, clock=lambda: clock["now"])
    bridge = WatchBridge(watchdog, notifier)
    bridge.event_seen.connect(notifier.on_event)
    return watchdog, notifier, clock, bridge


def test_a_severe_event_from_another_thread_is_a_desktop_notification(qtbot):
    tray = FakeTray()
    watchdog, notifier, _clock, _bridge = wired(qtbot, tray)
    with qtbot.waitSignal(notifier.notified, timeout=5000):
        worker = threading.Thread(target=watchdog.feed_signal, args=(EngineExited(CRASH, "exit status 2"),))
        worker.start()
    worker.join(5)
    title, body, icon, _ms = tray.messages[0]
    assert title == "ollama-deck: server crashed" and "exit status 2" in body and "127.0.0.1:11434" in body
    assert icon == QSystemTrayIcon.MessageIcon.Critical


def test_one_per_kind_a_minute_and_none_for_milder_events(qtbot):
    tray = FakeTray()
    watchdog, notifier, clock, _bridge = wired(qtbot, tray)
    said = []
    notifier.notified.connect(said.append)
    watchdog.feed_signal(EngineExited(CRASH))
    watchdog.feed_signal(CacheExhausted("failed to find free space in the KV cache"))  # a warning
    watchdog.feed_signal(EngineExited(CRASH))  # the same kind again at once
    watchdog.feed_signal(PromptCut("prompt truncated", 5000, 514))  # another severe kind
    qtbot.waitUntil(lambda: len(said) == 2, timeout=5000)
    clock["now"] += PER_KIND_S
    watchdog.feed_signal(EngineExited(CRASH))
    qtbot.waitUntil(lambda: len(said) == 3, timeout=5000)
    assert [m[0] for m in tray.messages] == ["ollama-deck: server crashed", "ollama-deck: prompt cut short",
                                             "ollama-deck: server crashed"]


def test_an_event_from_a_logs_backlog_is_listed_but_not_notified(qtbot):
    tray = FakeTray()
    watchdog, notifier, _clock, _bridge = wired(qtbot, tray)
    seen = []
    _bridge.event_seen.connect(seen.append)
    an_hour_ago = time.time() - 3600
    watchdog.feed_signal(EngineExited(CRASH, "exit status 2", logged_at=an_hour_ago))  # a followed log's last lines
    watchdog.feed_signal(PromptCut("prompt truncated", 5000, 514))  # now
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=5000)
    assert [m[0] for m in tray.messages] == ["ollama-deck: prompt cut short"]


def test_turned_off_it_says_nothing(qtbot):
    tray = FakeTray()
    watchdog, notifier, _clock, bridge = wired(qtbot, tray)
    notifier.set_enabled(False)
    seen = []
    bridge.event_seen.connect(seen.append)
    watchdog.feed_signal(EngineExited(CRASH))
    qtbot.waitUntil(lambda: len(seen) == 1, timeout=5000)
    assert tray.messages == []


def test_without_a_tray_a_toast_shows_in_the_window(qtbot):
    window = QWidget()
    qtbot.addWidget(window)
    window.resize(1280, 720)
    window.show()
    toast = Toast(window)
    watchdog, notifier, _clock, _bridge = wired(qtbot, toast=toast)
    watchdog.feed_signal(EngineExited(CRASH, "exit status 2"))
    qtbot.waitUntil(toast.isVisible, timeout=5000)
    assert toast.title.text() == "ollama-deck: server crashed"
    geometry = toast.geometry()
    assert window.rect().contains(geometry) and geometry.right() > 1280 - 40 and geometry.bottom() > 720 - 40
    toast.mousePressEvent(None)
    assert not toast.isVisible()


def test_a_long_summary_is_cut_at_a_word_and_the_toast_holds_all_its_text(qtbot):
    from app.core.watch.events import EventKind, Evidence, Severity, Source, WatchEvent
    from app.ui.widgets.notify import BODY_CHARS, notification_text

    long = WatchEvent(EventKind.SERVER_CRASHED, Severity.SEVERE, 0.0, "The server ended. " + "word " * 200, "",
                      (Evidence(Source.STATUS, "x"),))
    _title, body = notification_text(long)
    assert len(body) <= BODY_CHARS + 2 and body.endswith(" …")
    window = QWidget()
    qtbot.addWidget(window)
    window.resize(1280, 720)
    window.show()
    toast = Toast(window)
    toast.show_message(*notification_text(long))
    assert toast.body.geometry().bottom() <= toast.height() and toast.height() < 720
    assert toast.body.height() >= toast.body.heightForWidth(toast.body.width())
