"""Fixtures for tests of the GUI's composition root."""

from __future__ import annotations

import argparse

import pytest

from app.ui.app.main import DeckApp


@pytest.fixture
def deck_factory(qtbot):
    """Factory: a started DeckApp for the given arguments, shown offscreen and closed after the test
    with any DeckApp that took its window over (DeckApp.close runs once, so a test may close one itself)."""
    made: list[DeckApp] = []

    def make(args: argparse.Namespace) -> DeckApp:
        deck = DeckApp(args)
        qtbot.addWidget(deck.window)
        deck.window.show()
        deck.start()
        made.append(deck)
        return deck

    yield make
    for deck in made:
        deck.close()
        deck.current.close()
