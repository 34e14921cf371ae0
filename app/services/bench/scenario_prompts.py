"""The maker of a scenario's prompt texts, for every front end (the CLI and the Benchmark page)."""

from __future__ import annotations

import functools

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.core.bench.sweep import SweepSpec
from app.core.ports.prompt_text import PromptMaker


@functools.cache
def corpus_prompt_maker() -> PromptMaker:
    """Prompts cut from the bundled corpus (read once)."""
    return CorpusPromptMaker(bundled_corpus())


def prompt_maker_for(spec: SweepSpec) -> PromptMaker | None:
    """The maker of a sweep's prompt texts: the corpus for a scenario, None for a sweep of fixed prompts."""
    return corpus_prompt_maker() if spec.workload.scenario is not None else None


__all__ = ["corpus_prompt_maker", "prompt_maker_for"]
