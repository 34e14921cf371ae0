"""The window on a 1280x720 projector at --scale 1.5: 853x480 pixels to the widgets (Qt scales every
widget and font by the factor, so the layout is the one of a 853x480 screen at scale 1). Nothing may
hold the window wider or taller than that: the header gives way (title first, then the server's name
cut), the sidebar narrows, tiles re-flow, side-by-side panes stack and the page scrolls down."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from PySide6.QtWidgets import QScrollArea

from app.ui.widgets.adaptive_splitter import AdaptiveSplitter
from tests.ui.app.test_app import _check_page_width

# 1280x720 at --scale 1.5, in the widgets' pixels.
PROJECTOR_AT_1_5 = (1280 * 2 // 3, 720 * 2 // 3)
# What a window manager's frame takes around the window (openbox: a title bar and 1-2 px borders).
FRAME_ALLOWANCE = (4, 20)


def _args(tmp_path: Path) -> argparse.Namespace:
    return argparse.Namespace(config_dir=str(tmp_path / "cfg"), url="http://127.0.0.1:9", page="dashboard",
                              screenshot=None)


@pytest.fixture(params=["no GPU", "a GPU"])
def deck(request, tmp_path, deck_factory, monkeypatch):
    """The whole window, every page, on a machine without and with a GPU (more tiles, another plot grid)."""
    if request.param == "a GPU":
        import app.ui.app.main as main_module
        from tests.fakes.scripted_gpu import ScriptedGpuBackend

        monkeypatch.setattr(main_module, "make_gpu_backend", lambda: ScriptedGpuBackend())
    return deck_factory(_args(tmp_path))


def _fit(qtbot, deck, width: int, height: int) -> None:
    window = deck.window
    window.resize(width, height)
    qtbot.waitUntil(lambda: window.width() == width and window.height() == height, timeout=5000)


def test_the_window_and_every_page_fit_1280x720_at_scale_1_5(qtbot, deck):
    window = deck.window
    most_w, most_h = PROJECTOR_AT_1_5[0] - FRAME_ALLOWANCE[0], PROJECTOR_AT_1_5[1] - FRAME_ALLOWANCE[1]
    _fit(qtbot, deck, most_w, most_h)
    # Once narrow, nothing asks for more room than the screen has, on any page.
    for name in window.page_names:
        window.show_page(name)
        holder = window.stack.currentWidget()
        assert isinstance(holder, QScrollArea)
        qtbot.waitUntil(holder.widget().isVisible, timeout=5000)
        hint = window.minimumSizeHint()
        assert hint.width() <= most_w and hint.height() <= most_h, (name, hint)
        assert holder.minimumSizeHint().width() <= holder.width(), name
        _check_page_width(qtbot, deck, name)  # the page scrolls down, never sideways
    assert window.size().width() == most_w and window.size().height() == most_h


def test_a_narrow_window_keeps_the_state_and_the_main_actions(qtbot, deck):
    window = deck.window
    _fit(qtbot, deck, 1280, 720)
    header = window.header
    assert header.title.isVisible() and window.sidebar.width() == 170
    panes = {name: window.page(name).findChild(AdaptiveSplitter) for name in ("server", "console")}
    for name, split in panes.items():
        window.show_page(name)
        qtbot.waitUntil(split.isVisible, timeout=5000)
        assert not split.stacked, name  # side by side where they fit, as before

    header.set_server_name("llama-server · embedded (SmolLM2-135M-Instruct) · local build b6000")  # a long one
    _fit(qtbot, deck, PROJECTOR_AT_1_5[0] - FRAME_ALLOWANCE[0], PROJECTOR_AT_1_5[1] - FRAME_ALLOWANCE[1])
    # the title gives way; the state stays whole, and the server's name is cut in the middle, whole in its tooltip
    qtbot.waitUntil(lambda: not header.title.isVisible(), timeout=5000)
    assert header.state_pill.isVisible() and header.state_pill.width() >= header.state_pill.sizeHint().width()
    version = header.version_label
    assert version.is_elided() and version.full_text() in version.toolTip() and "…" in version.text()
    assert window.sidebar.width() < 170
    titles = [window.sidebar.item(row).text() for row in range(window.sidebar.count())]
    metrics = window.sidebar.fontMetrics()
    assert all(metrics.horizontalAdvance(t) + 2 * 18 <= window.sidebar.width() for t in titles)  # whole titles
    # The panes stack, the one with the page's main actions on top, wholly visible to the right.
    sends = {"server": window.page("server").start_button, "console": window.page("console").send_button}
    for name, split in panes.items():
        window.show_page(name)
        qtbot.waitUntil(lambda split=split: split.isVisible() and split.stacked, timeout=5000)
        assert split.widget(0) is split._panes[1], name
        holder = window.stack.currentWidget()
        button = sends[name]
        right = button.mapTo(holder.viewport(), button.rect().topRight()).x()
        assert right <= holder.viewport().width(), (name, right)
        holder.ensureWidgetVisible(button)
        qtbot.waitUntil(lambda button=button: not button.visibleRegion().isEmpty(), timeout=5000)
    # the dashboard's tiles take two rows or more rather than one too wide
    grid = window.page("dashboard").tile_grid
    window.show_page("dashboard")
    qtbot.waitUntil(grid.isVisible, timeout=5000)
    assert grid.columns < len(grid.tiles)

    _fit(qtbot, deck, 1280, 720)  # and back, as it was
    qtbot.waitUntil(header.title.isVisible, timeout=5000)
    assert window.sidebar.width() == 170
    window.show_page("server")
    qtbot.waitUntil(lambda: not panes["server"].stacked, timeout=5000)
    assert panes["server"].widget(0) is panes["server"]._panes[0]
