"""Fixtures shared by the UI tests: the pages' context, made as the composition root makes it."""

from __future__ import annotations

from typing import Any

import pytest

from app.adapters.aio import LoopThread
from app.ui.pages.context import PageContext
from tests.ui.page_context import page_context_on


@pytest.fixture
def page_context():
    """Factory: page_context_on(loop, **parts); without a loop, on a loop thread of its own. A server
    view-model it made is shut down, and a loop it started stopped, after the test."""
    loops: list[LoopThread] = []
    made: list[PageContext] = []

    def make(*, loop: LoopThread | None = None, **parts: Any) -> PageContext:
        if loop is None:
            loop = LoopThread()
            loops.append(loop)
        context = page_context_on(loop, **parts)
        if "server" not in parts:
            made.append(context)
        return context

    yield make
    for context in made:
        context.server.shutdown()
    for loop in loops:
        loop.stop()
