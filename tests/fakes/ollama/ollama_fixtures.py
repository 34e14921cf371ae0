"""Pytest fixtures (registered in tests/conftest.py): stand-in Ollama servers on 127.0.0.1."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Iterator

import pytest

from tests.fakes.ollama.fake_ollama import FakeOllama


@pytest.fixture
def make_fake_ollama() -> Iterator[Callable[..., FakeOllama]]:
    """Factory: `make_fake_ollama(**kw)` returns a started FakeOllama; all are stopped afterwards."""
    started: list[FakeOllama] = []

    def make(**kwargs: Any) -> FakeOllama:
        fake = FakeOllama(**kwargs).start()
        started.append(fake)
        return fake

    yield make
    for fake in started:
        fake.stop()


@pytest.fixture
def fake_ollama(make_fake_ollama: Callable[..., FakeOllama]) -> FakeOllama:
    """A started FakeOllama with the default models, stopped after the test."""
    return make_fake_ollama()
