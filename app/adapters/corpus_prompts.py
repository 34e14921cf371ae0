"""Prompt texts cut from the bundled corpus by a characters-per-token estimate (no server needed).

The corpus is the text under app/resources/corpus/ (the articles this app grew from). A text of N tokens
is N × chars_per_token characters taken from a seed-dependent place in the corpus, wrapping around, so
any length can be made and the same seed gives the same text. The estimate is not the server's count:
a maker calibrated on the model in use replaces this one where the server can count tokens.
"""

from __future__ import annotations

import random
from importlib import resources

from app.core.ports.prompt_text import PromptText

CORPUS_PACKAGE = "app.resources"
CORPUS_FOLDER = "corpus"
# Characters per token of the bundled (Chinese) corpus on small multilingual tokenizers such as SmolLM2's,
# which split most CJK characters into one or two tokens.
DEFAULT_CHARS_PER_TOKEN = 0.7


def corpus_text() -> str:
    """The bundled corpus: every text file under app/resources/corpus/, in name order, blank lines dropped."""
    folder = resources.files(CORPUS_PACKAGE).joinpath(CORPUS_FOLDER)
    parts = [entry.read_text(encoding="utf-8") for entry in sorted(folder.iterdir(), key=lambda e: e.name)
             if entry.name.endswith(".txt")]
    text = "\n".join(line.strip() for part in parts for line in part.splitlines() if line.strip())
    if not text:
        raise FileNotFoundError(f"the prompt corpus under {CORPUS_PACKAGE}/{CORPUS_FOLDER} is empty")
    return text


class CorpusPromptMaker:
    """A PromptMaker over a corpus with a fixed characters-per-token estimate."""

    def __init__(self, corpus: str | None = None, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, not {chars_per_token}")
        self._corpus = corpus if corpus is not None else corpus_text()
        if not self._corpus:
            raise ValueError("the corpus is empty")
        self.chars_per_token = chars_per_token

    def make(self, tokens: int, seed: int) -> PromptText:
        """About `tokens` tokens of corpus text starting at a place chosen by `seed`."""
        tokens = max(1, tokens)
        chars = max(1, round(tokens * self.chars_per_token))
        size = len(self._corpus)
        start = random.Random(seed).randrange(size)
        doubled = self._corpus[start:] + "\n" + self._corpus[:start]
        text = (doubled * (chars // len(doubled) + 1))[:chars]
        return PromptText(text, max(1, round(len(text) / self.chars_per_token)))


__all__ = ["CorpusPromptMaker", "DEFAULT_CHARS_PER_TOKEN", "corpus_text"]
