"""The backends ollama-deck knows, by name. Only the composition roots (the GUI's main and the CLI)
look a backend up here; everything below them receives the BackendSpec and asks its capabilities."""

from __future__ import annotations

from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.ollama.spec import OLLAMA
from app.backends.openai.spec import OPENAI
from app.core.ports.backend import BackendSpec, Capabilities

DEFAULT_BACKEND = "ollama"

_SPECS: dict[str, BackendSpec] = {spec.name: spec for spec in (OLLAMA, LLAMA_SERVER, OPENAI)}


def names() -> list[str]:
    """Registered backend names, in registration order."""
    return list(_SPECS)


def display_names() -> dict[str, str]:
    """What people call each registered server kind ("llama_server" -> "llama-server"), for what names the
    server a run or setting was for."""
    return {name: spec.display_name for name, spec in _SPECS.items()}


def get(name: str = DEFAULT_BACKEND) -> BackendSpec:
    """The spec registered under `name`; KeyError naming the known ones otherwise."""
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; known: {', '.join(_SPECS)}") from None


__all__ = ["BackendSpec", "Capabilities", "DEFAULT_BACKEND", "display_names", "get", "names"]
