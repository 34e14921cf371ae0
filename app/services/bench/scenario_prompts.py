"""The maker of a scenario's prompt texts, for every front end (the CLI and the Benchmark page)."""

from __future__ import annotations

import functools
import threading

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.core.bench.sweep import SweepSpec
from app.core.ports.prompt_text import PromptMaker, PromptText


@functools.cache
def corpus_prompt_maker() -> CorpusPromptMaker:
    """Prompts cut from the bundled corpus (read once)."""
    return CorpusPromptMaker(bundled_corpus())


class BundledPromptMaker:
    """A PromptMaker over the bundled corpus that reads it on its first prompt: where the workload runs (the
    loop thread), not where the sweep is set up (a GUI thread must not wait on the disk)."""

    calibrated = False

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def make(self, tokens: int, seed: int) -> PromptText:
        """A text of about `tokens` tokens from the corpus (see CorpusPromptMaker.make)."""
        with self._lock:
            maker = corpus_prompt_maker()
        return maker.make(tokens, seed)


def prompt_maker_for(spec: SweepSpec) -> PromptMaker | None:
    """The maker of a sweep's prompt texts: the corpus for a scenario, None for a sweep of fixed prompts."""
    return BundledPromptMaker() if spec.workload.scenario is not None else None


__all__ = ["BundledPromptMaker", "corpus_prompt_maker", "prompt_maker_for"]
