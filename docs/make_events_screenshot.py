"""Render the dashboard with the watchdog's events from a real server: the app runs its embedded engine (the
bundled llama-server serving SmolLM2), applies parallel 1, sends a burst of concurrent prompts (the server's
/metrics show requests waiting), then the llama-server process it started is killed with SIGKILL (the
server crashed) and started again with a second burst; last, a context of 256 tokens per slot that a long
answer outgrows (the server shifts it, its cache full). Everything on the picture was read from that server,
its process and this machine; nothing is scripted.

    python docs/make_events_screenshot.py docs/screenshot-dashboard-events.png --page-only --size 1600x1000
    python docs/make_events_screenshot.py OUT.png --events OUT-events.png --scale 1.5 --size 1280x720
    DISPLAY=:9 python docs/make_events_screenshot.py OUT.png --hold 15   # stays open for a screen grab

Without a DISPLAY (or with QT_QPA_PLATFORM=offscreen) it draws on an offscreen screen of --size. --events
also saves the Events tab with the crash selected. --hold N keeps the window open N seconds after each
picture (writing PICTURE.ready first), for a capture of the real screen with another tool.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the PNG of the plots with the events marked")
    p.add_argument("--events", default="", help="also the PNG of the Events tab, the crash selected")
    p.add_argument("--page-only", action="store_true", help="the dashboard page whole (as the README shows pages), "
                                                             "not the window")
    p.add_argument("--scale", type=float, default=None)
    p.add_argument("--size", default="1280x720", help="the screen, WIDTHxHEIGHT pixels")
    p.add_argument("--hold", type=float, default=0.0, help="seconds to stay open after the picture")
    return p.parse_args()


ARGS = parse()
WIDTH, HEIGHT = (int(v) for v in ARGS.size.lower().split("x"))
if not os.environ.get("DISPLAY") or os.environ.get("QT_QPA_PLATFORM") == "offscreen":
    os.environ["QT_QPA_PLATFORM"] = offscreen_platform(WIDTH, HEIGHT)
if ARGS.scale:
    os.environ["QT_SCALE_FACTOR"] = f"{ARGS.scale:g}"

import httpx  # noqa: E402
from PySide6.QtGui import QIcon  # noqa: E402
from PySide6.QtCore import QPoint, QPointF  # noqa: E402
from PySide6.QtWidgets import QApplication, QScrollArea, QWidget  # noqa: E402

from app.core.server.state import ServerState  # noqa: E402
from app.core.watch.events import EventKind  # noqa: E402
from app.ui.app.main import DeckApp  # noqa: E402
from app.ui.pages.dashboard.page import WINDOW_CHOICES_S, DashboardPage  # noqa: E402
from app.ui.widgets.theme import app_icon_path, apply_theme  # noqa: E402
from shot_support import pump  # noqa: E402

PROMPT = {"messages": [{"role": "user", "content": "Tell a long story about a lighthouse keeper and the sea."}],
          "max_tokens": 24, "temperature": 0}
BURST = 4  # concurrent prompts on one slot: three wait
SHORT_CONTEXT = 256  # a slot context a long answer outgrows: the server shifts it (and its cache is full)
LONG_ANSWER = {"messages": PROMPT["messages"], "max_tokens": 2 * SHORT_CONTEXT, "temperature": 0,
               "ignore_eos": True}


def burst(base_url: str) -> list[threading.Thread]:
    """BURST prompts at once, each on its own thread."""

    def one() -> None:
        try:
            httpx.post(f"{base_url}/v1/chat/completions", json=PROMPT, timeout=120, trust_env=False)
        except httpx.HTTPError:
            pass  # the server was killed under it: that is the point of the picture

    threads = [threading.Thread(target=one, daemon=True) for _ in range(BURST)]
    for t in threads:
        t.start()
    return threads


def scroll_to_plots(dash: DashboardPage) -> None:
    """On a screen too short for the whole page, scroll it so the plots' tabs are at the top."""
    parent = dash.parentWidget()
    while parent is not None and not isinstance(parent, QScrollArea):
        parent = parent.parentWidget()
    if isinstance(parent, QScrollArea) and parent.widget() is not None:
        top = dash.tabs.mapTo(parent.widget(), QPoint(0, 0)).y()
        parent.verticalScrollBar().setValue(top - 8)


def point_at_crash(dash: DashboardPage, path: str) -> None:
    """Write where on the screen (device pixels) the crash's marker is, on the first plot where it shows,
    for the mouse to hover it and bring up its tooltip."""
    window = dash.window()
    for marks in dash.marks:
        widget = marks.plot.widget
        for mark in marks.marks:
            if not any(e.kind is EventKind.SERVER_CRASHED for e in mark.events):
                continue
            view = marks.plot.item.getViewBox()
            y_lo, y_hi = view.viewRange()[1]
            scene = view.mapViewToScene(QPointF(mark.x, y_lo + 0.55 * (y_hi - y_lo)))
            local = widget.mapFromScene(scene)
            inside = widget.rect().contains(local) and window.rect().contains(widget.mapTo(window, local))
            if inside and widget.isVisible():
                spot = widget.mapToGlobal(local)
                ratio = widget.devicePixelRatioF()
                Path(path).write_text(f"{round(spot.x() * ratio)} {round(spot.y() * ratio)}\n")
                return


def picture(app: QApplication, window: QWidget, path: str) -> bool:
    """Save the window as `path`; with --hold, then stay open for a capture of the screen."""
    if not window.grab().save(path):
        print(f"could not write {path}", file=sys.stderr)
        return False
    if ARGS.hold > 0:
        Path(path + ".ready").write_text("ready\n")
        pump(app, lambda: False, ARGS.hold)
    return True


def main() -> int:
    app = QApplication(sys.argv[:1])
    app.setApplicationName("ollama-deck")
    app.setWindowIcon(QIcon(str(app_icon_path())))
    apply_theme(app)
    config = tempfile.mkdtemp(prefix="deck-events-shot-")
    deck = DeckApp(argparse.Namespace(screenshot=None, page="dashboard", url=None, config_dir=config,
                                      backend=None, demo=True, scale=ARGS.scale, install_engine=False))
    window = deck.window
    window.show_page("dashboard")
    window.show()
    screen = window.screen().availableGeometry()
    window.setGeometry(screen)
    deck.start()
    c = deck.controller

    def running() -> bool:
        return c.status.state is ServerState.RUNNING_MANAGED and c._busy == 0

    def kinds() -> list[EventKind]:
        return [e.kind for e in deck.watchdog.events()]

    try:
        if not pump(app, running, 180):
            print("the embedded engine did not start:", c.status.message, file=sys.stderr)
            return 1
        c.apply(c.settings.replace(num_parallel=1))  # one slot: a burst queues
        pump(app, lambda: c.status.state is not ServerState.RUNNING_MANAGED, 20)
        if not pump(app, running, 180):
            print("the server did not come back with parallel 1:", c.status.message, file=sys.stderr)
            return 1
        pump(app, lambda: False, 6)
        threads = burst(c.settings.base_url)
        pump(app, lambda: EventKind.REQUESTS_DEFERRED in kinds(), 60)
        pump(app, lambda: not any(t.is_alive() for t in threads), 120)
        pump(app, lambda: False, 3)
        pid = c.status.pid
        assert pid is not None and pid in c.server_pids(), "the app's own llama-server"
        threads = burst(c.settings.base_url)
        pump(app, lambda: False, 1.5)
        os.kill(pid, signal.SIGKILL)  # the process this app started, killed behind its back
        if not pump(app, lambda: EventKind.SERVER_CRASHED in kinds(), 30):
            print("no crash event", file=sys.stderr)
            return 1
        if ARGS.hold > 0:  # the severe event's notification (a toast without a system tray) is on screen now
            Path(ARGS.out + ".toast.ready").write_text("ready\n")
        pump(app, lambda: False, 4)
        c.start()
        pump(app, running, 180)
        pump(app, lambda: False, 4)
        threads = burst(c.settings.base_url)
        pump(app, lambda: kinds().count(EventKind.REQUESTS_DEFERRED) >= 2, 60)
        pump(app, lambda: not any(t.is_alive() for t in threads), 120)
        pump(app, lambda: False, 4)
        # A context of 256 tokens per slot, shifted when full: a long answer fills the cache and is shifted.
        c.apply(c.settings.replace(context_length=SHORT_CONTEXT, extra_settings="--context-shift"))
        pump(app, lambda: c.status.state is not ServerState.RUNNING_MANAGED, 20)
        if not pump(app, running, 180):
            print("the server did not come back with a short context:", c.status.message, file=sys.stderr)
            return 1
        pump(app, lambda: False, 3)
        long_answer = threading.Thread(target=lambda: httpx.post(
            f"{c.settings.base_url}/v1/chat/completions", json=LONG_ANSWER, timeout=300, trust_env=False),
            daemon=True)
        long_answer.start()
        pump(app, lambda: EventKind.CONTEXT_SHIFT in kinds(), 120)
        pump(app, lambda: not long_answer.is_alive(), 180)
        pump(app, lambda: False, 3)
        dash = deck.dashboard
        window.banner.clear()  # the embedded engine's note: the events are the picture
        first = min(e.mono for e in deck.watchdog.events() if e.mono is not None)
        span = time.monotonic() - first + 10  # the first event and a little before it
        dash.set_window_s(next((w for w in WINDOW_CHOICES_S if w >= span), WINDOW_CHOICES_S[-1]))
        if not ARGS.page_only:
            scroll_to_plots(dash)
        dash.redraw_now()
        pump(app, lambda: False, 0.5)
        if ARGS.hold > 0:
            point_at_crash(dash, ARGS.out + ".mark")
        for e in deck.watchdog.events():
            print(e.line())
        shown: QWidget = dash if ARGS.page_only else window
        if not picture(app, shown, ARGS.out):
            return 1
        if ARGS.events:
            crash = next(e for e in dash.events.events if e.kind is EventKind.SERVER_CRASHED)
            dash.show_event(crash)
            pump(app, lambda: False, 0.5)
            if not picture(app, shown, ARGS.events):
                return 1
        return 0
    finally:
        deck.close()


if __name__ == "__main__":
    sys.exit(main())
