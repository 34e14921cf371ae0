"""Where benchmark prompts of a given length come from.

A workload asks for a prompt of so many tokens *of the server's own tokenizer*; a maker turns that into
text (from a corpus, calibrated on the model in use where the server can count tokens) and says how
many tokens it expects the text to be, so what the server counted can be held against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PromptText:
    """A prompt and the number of tokens its maker expects the server to count for the text alone."""

    text: str
    expected_tokens: int


class PromptMaker(Protocol):
    """Makes prompt texts of a requested length in tokens; the same seed gives the same text."""

    # True when a text's expected_tokens are the server's own counts (a maker calibrated on the model in use);
    # False when they are an estimate, which can be off by more than a cut prompt would be.
    calibrated: bool

    def make(self, tokens: int, seed: int) -> PromptText:
        """A text of about `tokens` tokens (at least one), different for different seeds."""
        ...


__all__ = ["PromptMaker", "PromptText"]
