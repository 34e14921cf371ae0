"""The launcher names the system libraries Qt's xcb plugin lacks, with the apt-get line, before Qt aborts
blaming libxcb-cursor0: only when Qt will use xcb, with a finder a test can replace, and a real finder
(ldd) that agrees with Qt itself about whether the plugin loads."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.ui.app import qt_platform
from app.ui.app.qt_platform import EXIT_MISSING_LIBRARIES, debian_package, platform_will_be_xcb, xcb_problem
from tests.cli.cli_property import invoke


@pytest.mark.parametrize(("env", "xcb"), [
    ({"DISPLAY": ":0"}, True),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "xcb"}, True),
    ({"QT_QPA_PLATFORM": "xcb:nograb;offscreen"}, True),  # asked for by name, display or not
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, False),
    ({"DISPLAY": ":0", "QT_QPA_PLATFORM": "wayland;xcb"}, False),
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, False),  # a Wayland session with XWayland
    ({"DISPLAY": ":0", "XDG_SESSION_TYPE": "wayland"}, False),
    ({}, False),  # no display at all: Qt says so itself
])
def test_the_check_runs_only_where_qt_will_load_xcb(env, xcb):
    assert platform_will_be_xcb(env) is xcb
    asked: list[bool] = []
    problem = xcb_problem(env, find_missing=lambda: asked.append(True) or ["libxcb-icccm.so.4"])
    assert asked == ([True] if xcb else []) and (problem is not None) is xcb


def test_missing_libraries_are_named_with_one_apt_get_line():
    problem = xcb_problem({"DISPLAY": ":0"}, find_missing=lambda: ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    assert problem is not None
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in problem
    assert problem.splitlines()[-1].strip() == "sudo apt-get install libxcb-icccm4 libxcb-keysyms1"
    assert xcb_problem({"DISPLAY": ":0"}, find_missing=lambda: []) is None


@pytest.mark.parametrize(("soname", "package"), [
    ("libxcb-icccm.so.4", "libxcb-icccm4"), ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxcb-cursor.so.0", "libxcb-cursor0"), ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libX11-xcb.so.1", "libx11-xcb1"), ("libxcb-render-util.so.0", "libxcb-render-util0"),
    ("libGL.so.1", "libgl1"), ("libglib-2.0.so.0", "libglib2.0-0"),
])
def test_debian_package_names(soname, package):
    assert debian_package(soname) == package


def test_the_launcher_stops_before_qt_with_the_message_and_its_own_status(monkeypatch):
    monkeypatch.setenv("DISPLAY", ":0")
    for name in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY", "XDG_SESSION_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(qt_platform, "missing_xcb_libraries", lambda: ["libxcb-keysyms.so.1"])
    for argv in ([], ["--page", "prompt"], ["--install-engine"]):
        code, out, err = invoke(argv)
        assert (code, out) == (EXIT_MISSING_LIBRARIES, "")
        assert err.startswith("ollama-deck: Qt's X11 platform plugin (xcb) cannot load: the system lacks "
                              "libxcb-keysyms.so.1.")
        assert err.rstrip().endswith("sudo apt-get install libxcb-keysyms1")


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd here: the check then leaves it to Qt")
def test_ldd_names_what_does_not_resolve(tmp_path):
    # The plugin copied away from Qt's folder: its RPATH no longer reaches Qt's own libraries.
    plugin = qt_platform.xcb_plugin_files()[0]
    copy = tmp_path / plugin.name
    shutil.copy(plugin, copy)
    assert "libQt6XcbQpa.so.6" in qt_platform.unresolved_libraries([copy])
    assert "libQt6XcbQpa.so.6" not in qt_platform.unresolved_libraries([plugin])


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd here: the check then leaves it to Qt")
def test_the_real_check_agrees_with_qt_about_loading_the_plugin(tmp_path):
    # Qt on xcb with a display nobody serves: a plugin that loads gets as far as connecting and says so;
    # one whose libraries are missing never gets there.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "QT_QPA_PLATFORM": "xcb", "DISPLAY": ":4711"}
    done = subprocess.run([sys.executable, "-c", "from PySide6.QtGui import QGuiApplication; QGuiApplication([])"],
                          env=env, capture_output=True, text=True, timeout=120)
    connected = "could not connect to display" in done.stderr
    missing = qt_platform.missing_xcb_libraries()
    assert connected is (missing == []), (missing, done.stderr[-2000:])
    assert (xcb_problem(env) is None) is connected


def test_a_screenshot_gets_a_full_hd_offscreen_screen_only_when_none_is_configured(tmp_path):
    platform = qt_platform.screenshot_platform({"QT_QPA_PLATFORM": "offscreen"}, tmp_path)
    assert platform is not None and platform.startswith("offscreen:configfile=")
    [screen] = json.loads(Path(platform.split("=", 1)[1]).read_text())["screens"]
    assert (screen["width"], screen["height"]) == (1920, 1080)
    for configured in ({"QT_QPA_PLATFORM": "offscreen:configfile=mine.json"}, {"QT_QPA_PLATFORM": "xcb"}, {}):
        assert qt_platform.screenshot_platform(configured, tmp_path) is None
