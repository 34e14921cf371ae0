"""The watchdog's events on the dashboard (offscreen, real widgets): listed newest first with a severity
filter and their evidence, marked on the plots' time axis with a tooltip, and cleared from the view only."""

from __future__ import annotations

import threading
import time

import pytest

from app.core.telemetry_buffers import TelemetryBuffers
from app.core.watch.events import EventKind, Severity
from app.core.watch.signals import CacheExhausted, EngineExited, LayersPlaced
from app.services.watchdog import Watchdog
from app.ui.pages.dashboard.event_marks import SEVERITY_COLOURS
from app.ui.pages.dashboard.page import DashboardPage
from tests.fakes.scripted_gpu import RTX_4090, gpu_with

CRASH = 'time=2026-12-02T12:00:00 level=ERROR msg="llama runner terminated" error="exit status 2"'
FULL = "srv  update_slots: failed to find free space in the KV cache, retrying with smaller batch size"
SPILL = "load_tensors: offloaded 20/29 layers to GPU"


def buffers_with_rows(n: int = 20) -> TelemetryBuffers:
    """Rows up to now on the monotonic clock the events are stamped with."""
    buffers = TelemetryBuffers(interval_s=1.0)
    now = time.monotonic()
    for i in range(n):
        buffers.append_row(now - (n - 1 - i), [float("nan")] * buffers.view()[1].shape[1])
    return buffers


@pytest.fixture
def page(qtbot, page_context):
    watchdog = Watchdog()
    watchdog.gpu_present(True)
    p = DashboardPage(page_context(samples=buffers_with_rows(), gpu=gpu_with(RTX_4090), watchdog=watchdog))
    qtbot.addWidget(p)
    p.resize(1280, 720)
    p.show()
    qtbot.waitExposed(p)
    yield p, watchdog
    p.shutdown()


def feed_from_a_thread(*calls) -> None:
    worker = threading.Thread(target=lambda: [fn(arg) for fn, arg in calls])
    worker.start()
    worker.join(10)


def test_events_fed_to_the_watchdog_are_listed_newest_first_and_counted(qtbot, page):
    p, watchdog = page
    feed_from_a_thread((watchdog.feed_signal, LayersPlaced(SPILL, 20, 29)), (watchdog.feed_signal, EngineExited(CRASH)))
    qtbot.waitUntil(lambda: len(p.events.events) == 2, timeout=5000)
    assert p.tabs.tabText(p.tabs.indexOf(p.events)) == "Events (2)"
    top = p.events.tree.topLevelItem(0)
    assert top.text(1) == "severe" and top.text(2) == "server crashed"
    assert p.events.tree.topLevelItem(1).text(2) == "layers on the CPU"
    assert top.foreground(1).color().name() == SEVERITY_COLOURS[Severity.SEVERE]


def test_each_event_is_a_marker_on_every_plot_at_its_time_with_a_tooltip(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(CacheExhausted(FULL))
    qtbot.waitUntil(lambda: bool(p.events.events), timeout=5000)
    p.redraw_now()
    event = p.events.events[0]
    assert event.mono is not None
    for marks in p.marks:
        assert len(marks.marks) == 1
        line = marks.lines[0]
        assert line.isVisible()
        assert line.value() == pytest.approx(min(event.mono - time.monotonic(), 0.0), abs=2.0)
        assert "KV cache full" in line.toolTip() and "no room for a batch" in line.toolTip()
        assert line.pen.color().name() == SEVERITY_COLOURS[Severity.WARNING]


def test_events_close_together_share_one_marker_coloured_by_the_worst(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(CacheExhausted(FULL))
    watchdog.feed_signal(EngineExited(CRASH))
    qtbot.waitUntil(lambda: len(p.events.events) == 2, timeout=5000)
    p.redraw_now()
    vram = next(m for m in p.marks if m.plot.key == "vram")
    assert len(vram.marks) == 1 and len(vram.marks[0].events) == 2
    assert vram.lines[0].pen.color().name() == SEVERITY_COLOURS[Severity.SEVERE]
    tip = vram.lines[0].toolTip()
    assert tip.index("server crashed") < tip.index("KV cache full")  # newest first


def test_selecting_an_event_shows_its_evidence_and_what_to_do(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(LayersPlaced(SPILL, 20, 29))
    qtbot.waitUntil(lambda: bool(p.events.events), timeout=5000)
    p.show_event(p.events.events[0])
    assert p.tabs.currentWidget() is p.events
    text = p.events.detail.toPlainText()
    assert SPILL in text and "What to do:" in text and "9 of 29 layers run on the CPU" in text
    assert p.events.selected() is p.events.events[0]


def test_the_filter_hides_milder_events_in_the_list_and_on_the_plots(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(CacheExhausted(FULL))
    qtbot.waitUntil(lambda: bool(p.events.events), timeout=5000)
    p.events.set_min_severity(Severity.SEVERE)
    p.redraw_now()
    assert p.events.tree.topLevelItem(0).isHidden() and p.events.shown == ()
    assert all(not m.marks for m in p.marks)
    watchdog.feed_signal(EngineExited(CRASH))
    qtbot.waitUntil(lambda: len(p.events.shown) == 1, timeout=5000)
    p.redraw_now()
    assert all(len(m.marks) == 1 and m.marks[0].severity is Severity.SEVERE for m in p.marks)


def test_clear_empties_the_view_only(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(EngineExited(CRASH))
    qtbot.waitUntil(lambda: bool(p.events.events), timeout=5000)
    p.redraw_now()
    p.events.clear_button.click()
    p.redraw_now()
    assert p.events.events == () and p.events.tree.topLevelItemCount() == 0
    assert all(not m.marks for m in p.marks)
    assert p.tabs.tabText(p.tabs.indexOf(p.events)) == "Events (0)"
    assert [e.kind for e in watchdog.events()] == [EventKind.SERVER_CRASHED]


def test_events_seen_before_the_page_was_made_are_listed(qtbot, page_context):
    watchdog = Watchdog()
    watchdog.feed_signal(EngineExited(CRASH))
    p = DashboardPage(page_context(samples=buffers_with_rows(), gpu=gpu_with(RTX_4090), watchdog=watchdog))
    qtbot.addWidget(p)
    assert [e.kind for e in p.events.events] == [EventKind.SERVER_CRASHED]
    p.shutdown()
    watchdog.feed_signal(CacheExhausted(FULL))  # a page shut down takes no more
    assert len(p.events.events) == 1


def test_the_events_tab_fits_a_small_screen(qtbot, page):
    p, watchdog = page
    watchdog.feed_signal(LayersPlaced(SPILL, 20, 29))
    qtbot.waitUntil(lambda: bool(p.events.events), timeout=5000)
    p.show_event(p.events.events[0])
    qtbot.waitUntil(lambda: p.events.tree.isVisible(), timeout=5000)
    assert p.events.tree.height() >= 120 and p.events.detail.width() >= 250
    header = p.events.tree.header()
    assert sum(header.sectionSize(i) for i in range(3)) < p.events.tree.width() * 0.6  # the summary has room
    assert p.events.clear_button.isVisible() and p.events.clear_button.rect().width() >= \
        p.events.clear_button.sizeHint().width()


def test_a_long_history_keeps_the_newest_rows_and_a_burst_is_one_marker(qtbot, page):
    from app.ui.pages.dashboard.events_panel import MAX_ROWS

    p, _watchdog = page
    dog = Watchdog()
    dog.feed_signal(EngineExited(CRASH))
    crash = dog.events()[0]
    p.events.add([type(crash)(crash.kind, crash.severity, crash.at + i, crash.summary, crash.advice,
                                           crash.evidence, crash.subject, crash.mono) for i in range(MAX_ROWS + 5)])
    assert len(p.events.events) == MAX_ROWS and p.events.tree.topLevelItemCount() == MAX_ROWS
    assert p.events.events[0].at == crash.at + 5
    p.redraw_now()
    assert all(len(m.marks) == 1 and len(m.marks[0].events) == MAX_ROWS for m in p.marks if m.plot.widget.isVisible())
