"""What the docs/make_*_screenshot.py scripts share: running Qt's event loop until a condition holds."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtWidgets import QApplication


def pump(app: QApplication, until: Callable[[], bool], timeout_s: float) -> bool:
    """Process events until `until()` is true (True) or timeout_s seconds passed (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        app.processEvents()
        if until():
            return True
        time.sleep(0.01)
    return False
