"""Prompt texts of a requested length, cut from a corpus (see app/core/ports/prompt_text.py).

A CorpusPromptMaker takes a window of the corpus as long, in characters, as the tokens asked for times
its characters per token: uncalibrated, a fixed estimate; calibrated, the ratio measured on the model in
use (its server counted sample windows of the same corpus, see Calibration). The window starts at a
place the seed picks, so different seeds make different texts (a server's prompt cache cannot serve one
request from another's) and the same seed the same text. The corpus wraps around, so any length can be
made from a small one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from collections.abc import Sequence

from app.core.ports.prompt_text import PromptText

# Characters per token before calibration: what common tokenizers average on English prose. On the bundled
# corpus (Chinese prose with English terms) real tokenizers differ by a factor of several, which is what
# calibration on the model in use is for.
DEFAULT_CHARS_PER_TOKEN = 4.0
# Sample windows that calibration counts, and their length in estimated tokens: short enough that a probe
# which runs the prompt (one cut beyond the server's context) fits a small context whole.
CALIBRATION_SAMPLES = 4
CALIBRATION_SAMPLE_TOKENS = 64


class CorpusPromptMaker:
    """Makes prompts from `corpus` at `chars_per_token` characters per token (a PromptMaker)."""

    def __init__(self, corpus: str, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN, *,
                 calibrated: bool = False) -> None:
        text = " ".join(corpus.split())  # one line of prose: no blank lines or indents to count
        if not text:
            raise ValueError("the corpus is empty")
        if not chars_per_token > 0:
            raise ValueError(f"characters per token must be positive, got {chars_per_token}")
        self.corpus = text
        self.chars_per_token = chars_per_token
        self.calibrated = calibrated

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


@dataclass(frozen=True)
class CalibrationSample:
    """One corpus window and the tokens the server counted for it."""

    chars: int
    tokens: int


@dataclass(frozen=True)
class Calibration:
    """What the model in use makes of the corpus: characters per token, measured over samples, and the tokens
    its chat template adds around a user message (None: not measured)."""

    chars_per_token: float
    template_tokens: int | None
    samples: tuple[CalibrationSample, ...] = ()

    @classmethod
    def from_samples(cls, samples: Sequence[CalibrationSample], template_tokens: int | None) -> Calibration:
        """The ratio of all samples' characters to their tokens; ValueError when they counted no token."""
        chars = sum(s.chars for s in samples)
        tokens = sum(s.tokens for s in samples)
        if tokens <= 0 or chars <= 0:
            raise ValueError("the calibration samples counted no tokens")
        return cls(chars / tokens, template_tokens, tuple(samples))

    def maker(self, corpus: str) -> CorpusPromptMaker:
        """A maker for `corpus` (the one the samples came from) at the measured ratio."""
        return CorpusPromptMaker(corpus, self.chars_per_token, calibrated=True)


def calibration_windows(maker: CorpusPromptMaker, samples: int = CALIBRATION_SAMPLES,
                        tokens: int = CALIBRATION_SAMPLE_TOKENS) -> list[str]:
    """The corpus windows a calibration counts: `samples` of about `tokens` tokens by the maker's estimate."""
    return [maker.make(tokens, seed).text for seed in range(samples)]


__all__ = ["CALIBRATION_SAMPLES", "CALIBRATION_SAMPLE_TOKENS", "Calibration", "CalibrationSample",
           "CorpusPromptMaker", "DEFAULT_CHARS_PER_TOKEN", "calibration_windows"]
