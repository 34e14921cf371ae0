"""What only Qt knows, measured in fresh processes: whether the fonts fontconfig shows draw the built-in script's
Chinese (FAIL with the install command without a CJK font, PASS naming the fallback with a real one), and the
primary screen's size with the scale applied."""

from __future__ import annotations

import json
from pathlib import Path

from tests.ui.presenter.preflight_fonts import cjk_font, font_folder, latin_font, run_python

FONTS = """
from PySide6.QtGui import QGuiApplication
app = QGuiApplication([])
from app.adapters.demo_script import load_script
from app.core.demo.preflight import fonts_check, script_text
from app.ui.presenter.preflight import font_coverage
print(fonts_check(font_coverage(script_text(load_script("builtin")))).line())
"""


def test_without_a_cjk_font_the_fonts_check_fails_naming_chinese_and_the_install(tmp_path: Path) -> None:
    env = {"QT_QPA_PLATFORM": "offscreen", **font_folder(tmp_path, [latin_font()])}
    done = run_python(FONTS, env)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("FAIL  fonts  no font here draws "), line
    assert "(Chinese (Han): 请用中文写一篇关…)" in line and "sudo apt install fonts-noto-cjk" in line


def test_with_a_real_cjk_font_the_fonts_check_passes_naming_it_as_the_fallback(tmp_path: Path) -> None:
    cjk = cjk_font()
    env = {"QT_QPA_PLATFORM": "offscreen", **font_folder(tmp_path, [latin_font(), cjk])}
    done = run_python(FONTS, env)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith("PASS  fonts  all "), line
    assert "for what it lacks" in line  # the Latin font draws the words, the CJK one the Chinese


SCREEN = """
import dataclasses, json
from PySide6.QtGui import QGuiApplication
app = QGuiApplication([])
from app.core.demo.preflight import screen_check
from app.ui.presenter.preflight import screen_facts
facts = screen_facts()
real = dataclasses.replace(facts, platform="xcb")
print(json.dumps([facts.width, facts.height, facts.scale, facts.platform, screen_check(facts).line(),
                  screen_check(real).verdict.value]))
"""


def _screen(tmp_path: Path, scale: str) -> list:
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "proj", "x": 0, "y": 0, "width": 1280, "height": 720,
                                               "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    done = run_python(SCREEN, {"QT_QPA_PLATFORM": f"offscreen:configfile={config}", "QT_SCALE_FACTOR": scale})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_1280x720_screen_at_scale_1_and_1_5_is_measured_in_logical_pixels_and_passes(tmp_path: Path) -> None:
    width, height, scale, platform, line, real = _screen(tmp_path, "1")
    assert (width, height, scale, platform) == (1280, 720, 1.0, "offscreen")
    assert line.startswith("WARN  screen  no real screen: Qt's offscreen platform (1280x720 logical pixels)")
    assert real == "PASS"
    width, height, scale, _platform, line, real = _screen(tmp_path, "1.5")
    assert (width, height, scale) == (853, 480, 1.5)
    assert "(1280x720 at scale 1.5)" in line and real == "PASS"
