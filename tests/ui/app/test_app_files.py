"""The window always comes up, whatever state its files are in: a garbage history, a settings folder
that cannot be created or written. One banner names each file and what the app does instead, and the
app keeps working (settings applied, runs listed) without what it could not use."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from app.adapters.storage.history import BenchHistory
from app.core.server.applied import SettingsKeeping
from app.ui.app.main import DeckApp
from tests.adapters.storage.test_history import make_run
from tests.ui.app.test_app import PROJECT_ROOT, _env_without_ollama

GARBAGE = b"these are my grocery notes, not a database " * 40
WAIT_MS = 15_000


def _args(config_dir: Path | None) -> argparse.Namespace:
    return argparse.Namespace(config_dir=str(config_dir) if config_dir else None, url="http://127.0.0.1:9",
                              page=None, screenshot=None)


@pytest.fixture
def open_deck(qtbot):
    made: list[DeckApp] = []

    def make(config_dir: Path | None) -> DeckApp:
        deck = DeckApp(_args(config_dir))
        qtbot.addWidget(deck.window)
        deck.window.show()
        deck.start()
        made.append(deck)
        return deck

    yield make
    for deck in made:
        deck.close()


def _moved(folder: Path, name: str) -> list[Path]:
    return [p for p in folder.iterdir() if p.name.startswith(f"{name}.corrupt-") and not p.name.endswith(("-wal", "-shm"))]


def _cannot_write_in(folder: Path) -> bool:
    """True when this process really cannot create a file in folder (tried, not guessed)."""
    try:
        (folder / ".probe").write_bytes(b"")
    except OSError:
        return True
    (folder / ".probe").unlink()
    return False


def test_garbage_histories_are_moved_aside_and_named_in_one_banner_and_the_history_tab(qtbot, tmp_path, open_deck):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "apply-checks.sqlite3").write_bytes(GARBAGE)
    (cfg / "benchmarks.sqlite3").write_bytes(GARBAGE[::-1])
    deck = open_deck(cfg)
    banner = deck.window.banner
    qtbot.waitUntil(lambda: "benchmark history" in banner.text, timeout=WAIT_MS)  # checked off the GUI thread
    [apply_kept] = _moved(cfg, "apply-checks.sqlite3")
    [bench_kept] = _moved(cfg, "benchmarks.sqlite3")
    assert apply_kept.read_bytes() == GARBAGE and bench_kept.read_bytes() == GARBAGE[::-1]
    assert banner.isVisible() and str(apply_kept) in banner.text and str(bench_kept) in banner.text
    assert banner.text.count("Files ollama-deck could not use") == 1  # one banner, both files in it
    notice = deck.bench_page.history_view.notice
    assert str(bench_kept) in notice.message and "a new one was started" in notice.message
    deck.history.add({"at": 1.0, "kept": True, "reason": "works", "tried": {"backend": "ollama"}})
    assert deck.history.saving and deck.history.recent()[0]["reason"] == "works"  # the new log is in use


def test_a_settings_folder_under_a_regular_file_still_opens_and_applies_settings(qtbot, tmp_path, open_deck):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cfg = blocker / "ollama-deck"
    deck = open_deck(cfg)
    text = deck.window.banner.text
    assert f"The settings folder {cfg} cannot be written ({blocker} is a file, not a folder)" in text
    assert "apply-check log" in text and str(cfg) in text
    qtbot.waitUntil(lambda: "benchmark history" in deck.window.banner.text, timeout=WAIT_MS)
    assert "Cannot create the folder" in deck.bench_page.history_view.notice.message
    applied = []
    deck.controller.settings_applied.connect(applied.append)
    deck.server_page.form.findChild(object, "num_parallel").setValue(6)
    qtbot.waitUntil(lambda: deck.server_page.apply_button.isEnabled(), timeout=WAIT_MS)
    deck.server_page.apply_button.click()
    qtbot.waitUntil(lambda: bool(applied), timeout=WAIT_MS)  # kept in memory, not refused
    assert applied[0].num_parallel == 6 and deck.controller.settings.num_parallel == 6
    assert blocker.read_text() == "not a folder"
    assert deck.controller.keeping is SettingsKeeping.UNWRITABLE_SESSION  # what an apply message then says


def test_unwritable_xdg_folders_still_open_the_window(qtbot, tmp_path, open_deck, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(blocker / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker / "data"))
    deck = open_deck(None)
    banner = deck.window.banner
    assert f"The settings folder {blocker / 'config' / 'ollama-deck'} cannot be written" in banner.text
    assert str(blocker / "data" / "ollama-deck") in banner.text  # the apply-check log's folder
    qtbot.waitUntil(lambda: "benchmark history" in banner.text, timeout=WAIT_MS)
    assert blocker.read_text() == "x"


def test_a_read_only_settings_folder_is_named_and_its_history_still_listed(qtbot, tmp_path, open_deck):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    run_id = BenchHistory(cfg / "benchmarks.sqlite3").save(make_run())
    if os.geteuid() == 0:
        # root writes through any chmod: the folder that cannot be written is one under a regular file.
        (tmp_path / "file").write_text("x")
        cfg = tmp_path / "file" / "cfg"
    else:
        for item in cfg.iterdir():
            item.chmod(0o444)
        cfg.chmod(0o555)
    try:
        assert _cannot_write_in(cfg) if cfg.exists() else cfg.parent.is_file()  # the condition under test
        deck = open_deck(cfg)
        banner = deck.window.banner
        assert f"The settings folder {cfg} cannot be written" in banner.text
        qtbot.waitUntil(lambda: "benchmark history" in banner.text, timeout=WAIT_MS)
        notice = deck.bench_page.history_view.notice.message
        if os.geteuid() == 0:
            assert "Cannot create the folder for the benchmark history" in notice
        else:
            assert f"The benchmark history {cfg / 'benchmarks.sqlite3'} is read-only; showing its runs" in notice
            view = deck.bench_page.history_view
            view.refresh()
            qtbot.waitUntil(lambda: [s.run_id for s in view.summaries] == [run_id], timeout=WAIT_MS)
            assert sorted(p.name for p in cfg.iterdir()) == ["benchmarks.sqlite3"]  # nothing moved, nothing added
    finally:
        if cfg.exists():
            cfg.chmod(0o755)


def test_the_real_entry_point_comes_up_with_a_settings_folder_that_cannot_be_created(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = tmp_path / "shot.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--config-dir", str(blocker / "cfg"),
         "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    assert result.returncode == 0, result.stderr
    assert (QImage(str(out)).width(), QImage(str(out)).height()) == (1440, 900)
    assert "Traceback" not in result.stderr
    assert f"The settings folder {blocker / 'cfg'} cannot be written" in result.stderr
    assert "apply-check log" in result.stderr


def test_the_real_entry_point_comes_up_with_a_garbage_apply_check_log(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "apply-checks.sqlite3").write_bytes(GARBAGE)
    out = tmp_path / "shot.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--config-dir", str(cfg), "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    assert result.returncode == 0, result.stderr
    [kept] = _moved(cfg, "apply-checks.sqlite3")
    assert kept.read_bytes() == GARBAGE and str(kept) in result.stderr and "Traceback" not in result.stderr
