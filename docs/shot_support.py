"""What the docs/make_*_screenshot.py scripts share: an offscreen screen of a real size, and running Qt's event
loop until a condition holds, and waiting for a server to answer."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QApplication


def offscreen_screen(folder: Path, width: int, height: int) -> Path:
    """A Qt offscreen-platform configuration with one screen of width x height pixels (its default is 800x800,
    and the window never opens larger than its screen)."""
    path = folder / f"screen-{width}x{height}.json"
    path.write_text(json.dumps({"screens": [{"name": "screen", "x": 0, "y": 0, "width": width, "height": height,
                                              "logicalDpi": 96, "logicalBaseDpi": 96, "dpr": 1}]}))
    return path


def offscreen_platform(width: int = 1920, height: int = 1080) -> str:
    """QT_QPA_PLATFORM for an offscreen screen of width x height, so the window keeps its 1440x900 default
    size (its configuration lives in a folder removed when the script ends)."""
    folder = Path(tempfile.mkdtemp(prefix="deck-screen-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return f"offscreen:configfile={offscreen_screen(folder, width, height)}"


def pump(app: QApplication, until: Callable[[], bool], timeout_s: float) -> bool:
    """Process events until `until()` is true (True) or timeout_s seconds passed (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.processEvents()
        if until():
            return True
        time.sleep(0.01)
    return False


def wait_for(url: str, timeout_s: float = 20.0) -> None:
    """Wait until `url` answers 200 (raises the last OSError after timeout_s seconds)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
