"""Presenter mode in the window: F5 and the header's menu, the presenter's keys, Esc, the reset, another script,
and `--demo --presenter --screenshot-each` end to end on the embedded engine."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from app.adapters.demo_script import load_script
from app.core.demo.script import StepState
from tests.ui.app.test_app import PROJECT_ROOT, _screen_file

WAIT_MS = 20_000


def _active(qtbot, window) -> None:
    """Window shortcuts work in the active window."""
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)


def _args(tmp_path: Path, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_f5_and_the_menu_toggle_presenter_mode_and_its_keys(qtbot, tmp_path, fake_ollama, deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    stage, window = deck.stage, deck.window
    _active(qtbot, window)
    assert stage.menu_button.parent() is not None and stage.menu_button.text().startswith("On stage")
    assert not window.presenting and all(not k.isEnabled() for k in stage._presenter_keys)
    qtbot.keyClick(window, Qt.Key.Key_F5)
    assert window.presenting and window.presenter is stage.view
    assert stage.presenter_action.isChecked() and all(k.isEnabled() for k in stage._presenter_keys)
    assert stage.view.isVisible() and not window.header.isVisible()  # one view, the panel hidden
    stage.presenter_action.trigger()  # the menu's entry takes it back
    assert not window.presenting and window.header.isVisible()
    assert all(not k.isEnabled() for k in stage._presenter_keys)


def test_esc_with_nothing_in_flight_leaves_presenter_mode(qtbot, tmp_path, fake_ollama, deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    _active(qtbot, deck.window)
    deck.stage.set_presenting(True, full_screen=False)
    assert deck.window.presenting
    qtbot.keyClick(deck.window, Qt.Key.Key_Escape)
    assert not deck.window.presenting


def test_reset_empties_the_dashboard_and_goes_back_to_the_first_step(qtbot, tmp_path, fake_ollama, deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    qtbot.waitUntil(lambda: len(deck.sampler.buffers) >= 2, timeout=WAIT_MS)
    director = deck.stage.director
    director.index = 2  # as if two steps had run
    _active(qtbot, deck.window)
    deck.stage.set_presenting(True, full_screen=False)
    qtbot.keyClick(deck.window, Qt.Key.Key_R)
    assert director.index == 0 and all(director.state(i) is StepState.WAITING for i in range(len(director.script)))
    assert len(deck.sampler.buffers) <= 1  # emptied (a sample may have arrived since)
    qtbot.waitUntil(lambda: len(deck.sampler.buffers) >= 2, timeout=WAIT_MS)  # and it fills again on its own


def test_another_script_is_used_from_its_first_step_and_a_bad_one_is_refused(qtbot, tmp_path, fake_ollama,
                                                                           deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    talk = tmp_path / "talk.toml"
    talk.write_text('title = "Mine"\n[[step]]\ntitle = "Hello"\nsays = "The room says hello"\n', encoding="utf-8")
    assert deck.stage.load(str(talk))
    assert deck.stage.director.script.title == "Mine" and len(deck.stage.director.script) == 1
    broken = tmp_path / "broken.toml"
    broken.write_text('[[step]]\ntitle = "x"\naction = "dance"\nsays = "y"\n', encoding="utf-8")
    assert not deck.stage.load(str(broken))
    assert deck.stage.director.script.title == "Mine"  # the script in use stays
    assert "'dance' is not one of" in deck.window.banner.text


def test_the_script_from_the_command_line_is_the_one_the_stage_runs(qtbot, tmp_path, fake_ollama, deck_factory):
    talk = tmp_path / "talk.toml"
    talk.write_text('title = "Mine"\n[[step]]\ntitle = "Hello"\nsays = "The room"\n', encoding="utf-8")
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url, script=load_script(str(talk))))
    assert deck.stage.director.script.title == "Mine"
    default = deck_factory(_args(tmp_path, url=fake_ollama.url))
    assert default.stage.director.script.source == "builtin"


@pytest.mark.engine
def test_screenshot_each_runs_the_script_on_the_embedded_engine_and_keeps_a_picture_per_step(
        tmp_path, llama_server_binary, bundled_model):
    talk = tmp_path / "talk.toml"
    talk.write_text('title = "Short"\n'
                    '[[step]]\ntitle = "One user"\nsays = "One reply"\naction = "prompt"\nprompt = "Hi"\n'
                    'max_tokens = 8\n'
                    '[[step]]\ntitle = "Thinking vs not"\nsays = "A/B"\naction = "ab"\nprompt = "Hi"\nmax_tokens = 8\n'
                    '[[step]]\ntitle = "Three users"\nsays = "A burst"\naction = "burst"\nusers = 3\n'
                    'prompt = "Count to twenty"\nmax_tokens = 48\n', encoding="utf-8")
    shots = tmp_path / "shots"
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={_screen_file(tmp_path, 1280, 720)}",
               PYTHONPATH=str(PROJECT_ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "app", "--demo", "--presenter", "--script", str(talk), "--screenshot-each", str(shots),
         "--config-dir", str(tmp_path / "cfg")], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 3, result.stdout
    assert lines[0].startswith("step 1/3 One user: done — ")
    assert lines[1].startswith("step 2/3 Thinking vs not: failed — ") and "cannot think" in lines[1]  # and it goes on
    assert lines[2].startswith("step 3/3 Three users: done — 3 users")
    names = {p.name for p in shots.glob("*.png")}
    assert {"00-ready.png", "01-one-user.png", "02-thinking-vs-not.png", "03-three-users.png", "99-end.png"} <= names
    image = QImage(str(shots / "03-three-users.png"))
    assert (image.width(), image.height()) == (1280, 720)  # the presenter's view, full screen


def test_the_stage_flags_are_checked_when_the_command_line_is_read(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), QT_QPA_PLATFORM="offscreen")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[step]]\n", encoding="utf-8")
    for argv, said in ((["--script", str(bad)], "every step needs a title and says"),
                       (["--script", str(tmp_path / "none.toml")], "does not exist"),
                       (["--screenshot", "a.png", "--screenshot-each", "d"], "choose one")):
        result = subprocess.run([sys.executable, "-m", "app", *argv], env=env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2 and said in result.stderr, result.stderr

