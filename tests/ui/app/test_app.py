"""The whole GUI through its real entry points: `python -m app --screenshot`, and the composition root."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox

from app.backends.ollama.client import OllamaClient
from app.core.server.applied import SettingsKeeping
from app.core.server.state import ServerState
from app.core.units import GIB
from tests.fakes.ollama.recorded import real_version

PROJECT_ROOT = Path(__file__).resolve().parents[3]


def _env_without_ollama(tmp_path: Path, screen: tuple[int, int] = (1920, 1080)) -> dict[str, str]:
    """The environment of an app run with no `ollama` to find, on an offscreen screen of `screen` pixels."""
    env = dict(os.environ, QT_QPA_PLATFORM=f"offscreen:configfile={_screen_file(tmp_path, *screen)}",
               PYTHONPATH=str(PROJECT_ROOT))
    # A PATH with this interpreter's folder only: no `ollama` can be found there.
    env["PATH"] = str(Path(sys.executable).parent)
    return env


def _screen_file(folder: Path, width: int, height: int) -> Path:
    """A Qt offscreen-platform configuration with one screen of width x height pixels."""
    path = folder / f"screen-{width}x{height}.json"
    path.write_text(json.dumps({"screens": [{"name": "screen", "x": 0, "y": 0, "width": width, "height": height,
                                              "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    return path


@pytest.mark.parametrize("page", ["dashboard", "server"])
def test_screenshot_command_writes_png_of_each_page(tmp_path, page):
    out = tmp_path / f"{page}.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--page", page,
         "--config-dir", str(tmp_path / "cfg"), "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    assert not image.isNull()
    assert (image.width(), image.height()) == (1440, 900)
    # Not a blank frame: the dark theme plus text gives many distinct colours.
    colours = {image.pixel(x, y) for x in range(0, 1440, 37) for y in range(0, 900, 29)}
    assert len(colours) > 10


def test_scale_enlarges_everything_for_a_projector(tmp_path):
    out = tmp_path / "scaled.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--scale", "1.5", "--page", "console",
         "--config-dir", str(tmp_path / "cfg"), "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    # The 1440 x 900 window at 1.5 x would be 2160 x 1350: it opens inside the 1920 x 1080 screen instead.
    assert 1800 < image.width() <= 1920 and 1000 < image.height() <= 1080


@pytest.mark.parametrize("screen", [(1280, 720), (1024, 600)])
def test_the_window_never_opens_larger_than_the_screen(tmp_path, screen):
    out = tmp_path / "small.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--page", "server",
         "--config-dir", str(tmp_path / "cfg"), "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path, screen), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    assert screen[0] - 40 < image.width() <= screen[0] and screen[1] - 40 < image.height() <= screen[1]


@pytest.mark.parametrize("value, why", [("huge", "is not a number"), ("9", "outside 0.5-3")])
def test_a_bad_scale_is_refused_with_the_reason(tmp_path, value, why):
    result = subprocess.run([sys.executable, "-m", "app", "--scale", value], env=_env_without_ollama(tmp_path),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and why in result.stderr


def test_bad_url_exits_with_message(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "app", "--url", "http://", "--config-dir", str(tmp_path)],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "not a server URL" in result.stderr


def _args(tmp_path: Path, **kw) -> argparse.Namespace:
    base = dict(config_dir=str(tmp_path / "cfg"), url=None, page="dashboard", screenshot=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_attaches_to_running_server_and_header_shows_loaded_model(qtbot, tmp_path, fake_ollama, deck_factory):
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    header = deck.window.header
    qtbot.waitUntil(lambda: header.state_pill.text() == ServerState.RUNNING_ATTACHED.value, timeout=10_000)
    qtbot.waitUntil(lambda: header.version_label.text() == f"Ollama {real_version()}", timeout=10_000)
    assert not deck.server_page.stop_button.isEnabled()

    async def load() -> None:
        async with OllamaClient(fake_ollama.url) as client:
            await client.load("qwen3:14b")

    deck.loop.run(load(), timeout=10)
    qtbot.waitUntil(lambda: "qwen3:14b" in header.models_label.full_text(), timeout=10_000)
    assert "100% GPU" in header.models_label.full_text()
    # Samples keep arriving on the sampler thread while all this happens.
    qtbot.waitUntil(lambda: len(deck.sampler.buffers) >= 2, timeout=10_000)


def test_corrupt_settings_file_is_reported_at_start(qtbot, tmp_path, deck_factory):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text("{ this is not json")
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    assert deck.window.banner.isVisible()
    assert "settings" in deck.window.banner.text.lower()
    kept = [p for p in cfg.iterdir() if p.name.startswith("settings.json.corrupt")]
    assert kept and kept[0].read_text() == "{ this is not json"


def test_settings_applied_in_the_app_are_there_after_a_restart(qtbot, tmp_path, deck_factory):
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    form = deck.server_page.form
    form.findChild(object, "num_parallel").setValue(6)
    qtbot.waitUntil(lambda: deck.server_page.apply_button.isEnabled(), timeout=10_000)
    deck.server_page.apply_button.click()
    path = tmp_path / "cfg" / "settings.json"
    qtbot.waitUntil(lambda: path.exists() and json.loads(path.read_text())["settings"]["num_parallel"] == 6,
                    timeout=10_000)
    deck.close()
    again = deck_factory(_args(tmp_path))
    assert again.server_page.form.settings().num_parallel == 6
    assert again.controller.keeping is SettingsKeeping.SAVED


def test_no_page_changes_a_number_or_a_choice_under_a_passing_wheel(qtbot, tmp_path, deck_factory):
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    fields = [f for name in deck.window.page_names for kind in (QAbstractSpinBox, QComboBox)
              for f in deck.window.page(name).findChildren(kind)]
    assert len(fields) > 20
    assert all(f.focusPolicy() == Qt.FocusPolicy.StrongFocus for f in fields)


def test_without_nvidia_gpu_the_ram_is_priced_and_models_on_a_card_chosen_for_the_fit_panel(
        qtbot, tmp_path, fake_ollama, deck_factory, monkeypatch):
    import app.ui.app.main as main_module
    from app.adapters.telemetry.nvml import NullGpuBackend

    monkeypatch.setattr(main_module, "make_gpu_backend", lambda: NullGpuBackend("No NVIDIA driver found"))
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    models, fit, page = deck.models_page, deck.server_page.fit_panel, deck.server_page
    # By default the server is priced as it would run here: on the CPU, against this computer's RAM.
    assert fit.gpu_memory() is None and models.gpu_total_bytes is None
    assert fit.title.text() == "RAM price of these settings"
    assert page.tabs.tabText(page.fit_tab_index) == "RAM price"
    qtbot.waitUntil(lambda: fit.estimate is not None, timeout=15_000)
    assert fit.estimate.cpu_only
    card = deck.server_page.fit_panel.card_combo
    card.setCurrentIndex(card.findData(16))
    assert models.gpu_total_bytes == 16 * GIB
    assert "16 GiB card" in models.context_label.text()
    assert fit.title.text() == "VRAM price of these settings" and page.tabs.tabText(page.fit_tab_index) == "VRAM price"


def test_the_fit_panel_estimate_is_the_dashboard_estimate_line(qtbot, tmp_path, fake_ollama, deck_factory, monkeypatch):
    import app.ui.app.main as main_module
    from tests.fakes.scripted_gpu import ScriptedGpuBackend

    monkeypatch.setattr(main_module, "make_gpu_backend", lambda: ScriptedGpuBackend())  # a 4090 with a VRAM plot
    deck = deck_factory(_args(tmp_path, url=fake_ollama.url))
    fit, dashboard = deck.server_page.fit_panel, deck.dashboard
    # Attached to the stand-in server: the fit panel lists its models, reads one and prices the form's settings.
    qtbot.waitUntil(lambda: fit.estimate is not None, timeout=15_000)
    first = fit.estimate
    assert dashboard.estimate_mib == pytest.approx(first.total_gpu_bytes / 2**20)
    line = dashboard._estimate_line
    assert line.isVisible() and line.value() == pytest.approx(first.total_gpu_bytes / 2**30)
    # Editing a setting re-prices it, and the line follows.
    deck.server_page.form.findChild(object, "num_parallel").setValue(4)
    qtbot.waitUntil(lambda: fit.estimate is not None and fit.estimate.total_gpu_bytes > first.total_gpu_bytes,
                    timeout=10_000)
    qtbot.waitUntil(lambda: dashboard.estimate_mib == pytest.approx(fit.estimate.total_gpu_bytes / 2**20),
                    timeout=5_000)
    assert line.value() == pytest.approx(fit.estimate.total_gpu_bytes / 2**30)


def test_window_fits_a_1280x720_projector_and_pages_scroll(qtbot, tmp_path, deck_factory):
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    hint = deck.window.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720
    deck.window.resize(1280, 720)
    from tests.adapters.storage.test_history import make_run

    deck.bench_page.run_view.set_run(make_run(points=5))  # a finished sweep: the widest Benchmark page
    for name in deck.window.page_names:
        if name == "bench":
            _check_page_width(qtbot, deck, name)
            history = deck.bench_page.history_view  # and two runs compared side by side
            history.compare_view.set_runs(make_run(points=5), make_run(points=4))
            history.stack.setCurrentIndex(2)
            deck.bench_page.tabs.setCurrentIndex(1)
        deck.window.show_page(name)
        assert deck.window.current_page() is deck.window.page(name)
        _check_page_width(qtbot, deck, name)
    assert deck.window.size().height() == 720


def _check_page_width(qtbot, deck, name: str) -> None:
    """Pages may scroll down, never sideways, and nothing is cut off at the right edge."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QScrollArea

    deck.window.show_page(name)
    holder = deck.window.stack.currentWidget()
    qtbot.waitUntil(lambda: holder.widget().isVisible(), timeout=5000)
    for area in [holder, *holder.widget().findChildren(QScrollArea)]:
        if not area.isVisible():
            continue
        if area.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff:
            content = area.widget().minimumSizeHint().width()
            assert content <= area.viewport().width(), (name, area.widget().objectName(), content)
        else:
            assert area.horizontalScrollBar().maximum() == 0, (name, area.widget().objectName())


def test_app_icon_and_desktop_entry_are_shipped():
    from PySide6.QtGui import QIcon

    from app.ui.widgets.theme import app_icon_path

    assert not QIcon(str(app_icon_path())).isNull()
    desktop = (PROJECT_ROOT / "packaging" / "ollama-deck.desktop").read_text()
    assert "Exec=ollama-deck" in desktop and "Icon=ollama-deck" in desktop
    # the launcher's projector action runs a command line the app accepts
    action = desktop.split("[Desktop Action projector]", 1)[1]
    assert "Actions=projector;" in desktop and "Exec=ollama-deck --scale 1.5" in action
    from app.cli import _gui_parser

    assert _gui_parser().parse_args(["--scale", "1.5"]).scale == 1.5


def test_the_running_app_collects_garbage_on_its_gui_thread_only(qtbot, tmp_path, deck_factory):
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    assert deck.collection.active  # app/ui/app/gc_policy.py: the sampler and loop threads never collect
    deck.close()
    assert not deck.collection.active


def test_ctrl_and_a_number_switch_pages_and_f11_goes_full_screen(qtbot, tmp_path, deck_factory):
    from PySide6.QtCore import Qt

    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    window = deck.window
    qtbot.waitExposed(window)
    window.activateWindow()  # window shortcuts work in the active window
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    names = window.page_names
    for row in (2, 4, 0):
        qtbot.keyClick(window, getattr(Qt.Key, f"Key_{row + 1}"), Qt.KeyboardModifier.ControlModifier)
        assert window.current_page() is window.page(names[row])
    assert "Ctrl+3" in window.sidebar.item(2).toolTip()
    qtbot.keyClick(window, Qt.Key.Key_F11)
    qtbot.waitUntil(window.isFullScreen, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_F11)
    qtbot.waitUntil(lambda: not window.isFullScreen(), timeout=5000)


def test_esc_leaves_full_screen_and_ctrl_q_closes_the_window(qtbot, tmp_path, deck_factory):
    from PySide6.QtCore import Qt

    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    window = deck.window
    qtbot.waitExposed(window)
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_Escape)  # not full screen: Esc changes nothing
    assert not window.isFullScreen() and window.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_F11)
    qtbot.waitUntil(window.isFullScreen, timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not window.isFullScreen(), timeout=5000)
    assert window.isVisible()
    qtbot.keyClick(window, Qt.Key.Key_Q, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=5000)


def test_the_window_opens_where_it_was_left(qtbot, tmp_path, deck_factory):
    first = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page=None))
    assert first.first_page == "dashboard"  # nothing saved yet
    first.window.show_page("models")
    first.window.resize(760, 560)  # the offscreen screen is 800 x 600
    first.console_page.markdown_check.setChecked(False)
    first.close()
    saved = json.loads((tmp_path / "cfg" / "window.json").read_text())
    assert saved["page"] == "models" and saved["markdown"] is False and saved["geometry"]

    again = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page=None))
    assert again.first_page == "models"
    assert (again.window.width(), again.window.height()) == (760, 560)
    assert not again.console_page.markdown_check.isChecked()
    again.window.resize(1440, 900)  # larger than the screen: it comes back inside it (a smaller projector)
    again.close()
    fitted = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page=None))
    screen = fitted.window.screen().availableGeometry()
    assert fitted.window.width() <= screen.width() and fitted.window.height() <= screen.height()
    asked = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page="server"))
    assert asked.first_page == "server"  # --page wins over where it was left


def test_an_unreadable_window_file_is_moved_aside_and_the_app_starts(qtbot, tmp_path, deck_factory):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "window.json").write_text("{ not json")
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", page=None))
    screen = deck.window.screen().availableGeometry()  # the default 1440 x 900, inside the screen
    assert deck.first_page == "dashboard"
    assert (deck.window.width(), deck.window.height()) == (min(1440, screen.width()), min(900, screen.height()))
    assert [p.name.startswith("window.json.unreadable-") for p in (tmp_path / "cfg").iterdir()].count(True) == 1
    deck.close()
    assert json.loads((tmp_path / "cfg" / "window.json").read_text())["page"] == "dashboard"


def test_a_screenshot_neither_reads_nor_writes_where_the_window_was_left(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "window.json").write_text(json.dumps({"version": 1, "page": "models", "geometry": None, "markdown": True}))
    out = tmp_path / "shot.png"
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--config-dir", str(cfg), "--url", "http://127.0.0.1:9"],
        env=_env_without_ollama(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (QImage(str(out)).width(), QImage(str(out)).height()) == (1440, 900)
    assert json.loads((cfg / "window.json").read_text())["page"] == "models"  # untouched


def test_a_served_model_file_is_offered_again_under_recent_after_a_restart(qtbot, tmp_path, deck_factory):
    from app.ui.widgets.forms import PathEdit

    gguf = tmp_path / "qwen3-14b-Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    gone = tmp_path / "deleted-Q8_0.gguf"
    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", backend="llama_server"))
    field = deck.server_page.form.findChild(PathEdit, "model_path")
    assert field is not None and not field.recent_button.isVisibleTo(field)  # nothing served yet
    for path in (gone, gguf):
        deck.controller.settings_applied.emit(deck.controller.settings.with_options(model_path=str(path)))
    assert field.recent() == [str(gguf), str(gone)] and field.recent_button.isVisibleTo(field)
    deck.close()
    again = deck_factory(_args(tmp_path, url="http://127.0.0.1:9", backend="llama_server"))
    field = again.server_page.form.findChild(PathEdit, "model_path")
    assert field.recent() == [str(gguf), str(gone)]
    first, second = field.recent_menu.actions()
    assert first.isEnabled() and not second.isEnabled() and "no longer there" in second.toolTip()
    first.trigger()
    assert field.text() == str(gguf)


def test_sweeps_from_the_window_price_points_against_this_machines_ram(qtbot, tmp_path, deck_factory):
    import psutil

    deck = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    seen = deck.bench_page.sweeps._host_memory()  # what the sweep runner is given to price each point with
    total = psutil.virtual_memory().total
    assert seen is not None and abs(seen.total_bytes - total) <= total * 0.01
    assert 0 < seen.available_bytes <= seen.total_bytes


def test_a_second_window_on_one_folder_does_not_overwrite_the_first_ones_apply_unseen(qtbot, tmp_path, deck_factory):
    path = tmp_path / "cfg" / "settings.json"
    first = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    second = deck_factory(_args(tmp_path, url="http://127.0.0.1:9"))
    first.server_page.form.findChild(object, "num_parallel").setValue(6)
    qtbot.waitUntil(lambda: first.server_page.apply_button.isEnabled(), timeout=10_000)
    first.server_page.apply_button.click()
    qtbot.waitUntil(lambda: path.exists() and json.loads(path.read_text())["settings"]["num_parallel"] == 6,
                    timeout=10_000)

    second.server_page.form.findChild(object, "num_parallel").setValue(3)
    qtbot.waitUntil(lambda: second.server_page.apply_button.isEnabled(), timeout=10_000)
    second.server_page.apply_button.click()
    banner = second.server_page.banner
    qtbot.waitUntil(lambda: "Not applied" in banner.text, timeout=10_000)
    assert "was changed since this window read it" in banner.text and "Apply again" in banner.text
    assert json.loads(path.read_text())["settings"]["num_parallel"] == 6  # the first window's Apply stands


def test_a_headless_screenshot_without_a_configured_screen_has_the_default_window_size(tmp_path):
    out = tmp_path / "plain.png"
    env = dict(_env_without_ollama(tmp_path), QT_QPA_PLATFORM="offscreen")  # Qt's own screen: 800 x 800
    result = subprocess.run(
        [sys.executable, "-m", "app", "--screenshot", str(out), "--page", "server",
         "--config-dir", str(tmp_path / "cfg"), "--url", "http://127.0.0.1:9"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    image = QImage(str(out))
    assert (image.width(), image.height()) == (1440, 900)
