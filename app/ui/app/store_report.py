"""One banner for every file the app could not use as usual: which file, what is wrong, and what
the app does instead. Problems found later (the benchmark history is checked off the GUI thread)
are added to the same banner, never shown in a second one."""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.ui.widgets.banner import Banner

log = logging.getLogger(__name__)

SETTINGS_HEADING = "About your settings file:"
FILES_HEADING = "Files ollama-deck could not use as usual (it keeps working without them):"


class StoreReport:
    """Collects problems under headings and shows them all in the window's banner."""

    def __init__(self, banner: Banner) -> None:
        self._banner = banner
        self._sections: dict[str, list[str]] = {}
        # One offer beside the problems (e.g. the embedded engine when no server is installed): its
        # words end the banner and its button stays while problems are added.
        self._offer = ""
        self._action: tuple[str, Callable[[], None]] | None = None

    def offer(self, text: str, action: tuple[str, Callable[[], None]]) -> None:
        """Show text with an action button under the problems (replacing an earlier offer)."""
        self._offer, self._action = text, action
        self._show()

    def _show(self) -> None:
        level = "warning" if self.problems else "info"
        self._banner.show_message("\n\n".join(t for t in (self.text, self._offer) if t), level, action=self._action)

    def add(self, heading: str, problems: list[str]) -> None:
        """Add problems (each naming its file) under heading and show the banner again; none: no change."""
        lines = self._sections.setdefault(heading, [])
        new = [p for p in problems if p not in lines]
        if not new:
            return
        lines += new
        for problem in new:  # also on stderr: a window started from a terminal, or a screenshot run, shows them
            log.warning("%s", problem)
        self._show()

    @property
    def problems(self) -> list[str]:
        """Every problem reported so far, in order."""
        return [p for lines in self._sections.values() for p in lines]

    @property
    def text(self) -> str:
        """The banner's text: each heading with its problems as bullets."""
        return "\n".join(f"{heading}\n" + "\n".join(f"• {p}" for p in lines)
                         for heading, lines in self._sections.items() if lines)


__all__ = ["FILES_HEADING", "SETTINGS_HEADING", "StoreReport"]
