"""Prompt texts of a requested length, cut from a corpus (see app/core/ports/prompt_text.py).

Uncalibrated, a CorpusPromptMaker takes a window of the corpus as long, in characters, as the tokens
asked for times an estimate of characters per token. Calibrated, the server in use has counted every piece
of the corpus in its own tokens (Calibration, made by app/services/bench/prompt_lengths.py), and a
CalibratedPromptMaker strings counted pieces together up to the tokens asked for, so it knows what the text
counts to within a token or two per piece. Texts start at a place the seed picks, so different seeds make
different texts (a server's prompt cache cannot serve one request from another's) and the same seed the
same text. The corpus wraps around, so any length can be made from a small one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.core.ports.prompt_text import PromptText

# Characters per token before calibration, for the bundled corpus (Chinese prose with English terms and
# numbers): SmolLM2's tokenizer counts 0.97 there. Tokenizers differ by a factor of several on such text (one
# with Chinese words in its vocabulary packs more characters a token), which is what calibration is for.
DEFAULT_CHARS_PER_TOKEN = 1.0
# The corpus pieces calibration counts, in characters: short enough that a probe which runs the prompt (a
# server that cuts one beyond its context) fits even a small context whole, long enough to be few.
CHUNK_CHARS = 48
CUT_AFTER = "。，；：！？、"  # a piece may end after these (Chinese has no spaces to end it before)


class CorpusPromptMaker:
    """Makes prompts from `corpus` at `chars_per_token` characters per token (a PromptMaker)."""

    calibrated = False

    def __init__(self, corpus: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN) -> None:
        text = " ".join(corpus.split())  # one line of prose: no blank lines or indents to count
        if not text:
            raise ValueError("the corpus is empty")
        if not chars_per_token > 0:
            raise ValueError(f"characters per token must be positive, got {chars_per_token}")
        self.corpus = text
        self.chars_per_token = chars_per_token

    def window(self, chars: int, seed: int) -> str:
        """`chars` characters of the corpus from the place `seed` picks, wrapping around its end."""
        start = random.Random(seed).randrange(len(self.corpus))
        need = max(1, chars)
        text = self.corpus[start:start + need]
        while len(text) < need:
            text += " " + self.corpus[:need - len(text) - 1]
        return text.strip() or self.corpus[:need]

    def make(self, tokens: int, seed: int) -> PromptText:
        """A text of about `tokens` tokens; it is expected to count as `tokens` (at least one)."""
        tokens = max(1, tokens)
        return PromptText(self.window(round(tokens * self.chars_per_token), seed), tokens)


def corpus_chunks(corpus: str, chars: int = CHUNK_CHARS) -> list[str]:
    """The corpus (its words joined by single spaces) in consecutive pieces of about `chars` characters, each
    cut before a space or after a Chinese full stop or comma where one is near, so that a piece counts alone about as it
    counts inside the text. Joined, they give the corpus back."""
    text = " ".join(corpus.split())
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + chars)
        if end < len(text):
            for place in range(end, start + chars // 2, -1):
                if text[place] == " " or text[place - 1] in CUT_AFTER:
                    end = place
                    break
        out.append(text[start:end])
        start = end
    return out


@dataclass(frozen=True)
class CalibrationSample:
    """One corpus piece and the tokens the server counted for it alone."""

    chars: int
    tokens: int


@dataclass(frozen=True)
class Calibration:
    """What the model in use makes of the corpus: the tokens of each of its pieces (corpus_chunks), counted by
    the server, and the tokens its chat template adds around a user message (None: not measured)."""

    chunks: tuple[str, ...]
    tokens: tuple[int, ...]
    template_tokens: int | None

    def __post_init__(self) -> None:
        if len(self.chunks) != len(self.tokens) or not self.chunks:
            raise ValueError("a calibration needs a token count for each of at least one corpus piece")
        if sum(self.tokens) <= 0:
            raise ValueError("the calibration counted no tokens")

    @property
    def chars_per_token(self) -> float:
        """Characters per token over the whole corpus."""
        return sum(len(c) for c in self.chunks) / sum(self.tokens)

    @property
    def samples(self) -> tuple[CalibrationSample, ...]:
        """Each piece's length and count."""
        return tuple(CalibrationSample(len(c), n) for c, n in zip(self.chunks, self.tokens))

    def maker(self) -> CalibratedPromptMaker:
        """A maker that builds prompts from the counted pieces."""
        return CalibratedPromptMaker(self)


class CalibratedPromptMaker:
    """Makes prompts from the counted pieces of a calibration (a PromptMaker): whole pieces from the place the
    seed picks, wrapping around, then as much of the next as the tokens still asked for take (its characters
    in proportion); the text is expected to count as the pieces' counts say."""

    calibrated = True

    def __init__(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def make(self, tokens: int, seed: int) -> PromptText:
        """A text of about `tokens` tokens (at least one) and the tokens the server counted for its pieces."""
        chunks, counts = self.calibration.chunks, self.calibration.tokens
        want = max(1, tokens)
        index = random.Random(seed).randrange(len(chunks))
        parts: list[str] = []
        got = 0
        while got < want:
            chunk, count = chunks[index], counts[index]
            if index == 0 and parts:
                parts.append(" ")  # the corpus wraps: its end and its start are two sentences
            if got + count <= want or count == 0:
                parts.append(chunk)
                got += count
            else:
                share = (want - got) / count
                part = chunk[:max(1, round(len(chunk) * share))]
                parts.append(part)
                got += max(1, round(count * len(part) / len(chunk)))
                break
            index = (index + 1) % len(chunks)
        text = "".join(parts).strip()
        return PromptText(text or chunks[0], got)


__all__ = ["CHUNK_CHARS", "CUT_AFTER", "Calibration", "CalibratedPromptMaker", "CalibrationSample",
           "CorpusPromptMaker", "DEFAULT_CHARS_PER_TOKEN", "corpus_chunks"]
