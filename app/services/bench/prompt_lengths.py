"""Prompt lengths in the server's own tokens: calibrating a corpus maker on the model in use, and what each
prompt of a workload is expected to count, so the load generator can tell a prompt the server cut.

Everything goes through the backend's PromptTokenCounter (BackendSpec.prompt_counter); a server without one
gets the maker's estimate and no template overhead, and only its own sign can say a prompt was cut.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.bench.prompt_maker import Calibration, corpus_chunks
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.errors import ServerError
from app.core.ports.inference import PromptTokenCounter

async def template_tokens(counter: PromptTokenCounter, model: str, system: str = "") -> int:
    """The tokens a chat request has besides its user text: the chat template's, and the system prompt's."""
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": ""}]
    return await counter.count_chat(model, messages)


async def calibrate(counter: PromptTokenCounter, model: str, corpus: str, system: str = "",
                    max_chunks: int | None = None) -> Calibration:
    """The tokens `model` makes of each piece of `corpus` (corpus_chunks: each short enough for any context), and
    its chat template's tokens around a user message (and `system`, where one is given). `max_chunks`: count
    only the corpus's first pieces, which the maker then draws from alone (a server that counts by running
    each piece takes a request per piece)."""
    chunks = corpus_chunks(corpus)[:max_chunks]
    counts = [await counter.count_text(model, chunk) for chunk in chunks]
    return Calibration(tuple(chunks), tuple(counts), await template_tokens(counter, model, system))


async def expected_prompt_tokens(counter: PromptTokenCounter | None, plan: LoadPlan) -> tuple[int | None, ...]:
    """Per prompt of `plan`, the prompt tokens the server should count for its request: counted whole where the
    server's counter counts any length; else the maker's expectation plus the template's tokens (measured
    where the server can count, else left out); None for a prompt made to no length that cannot be counted
    whole (then only the server's own sign can say it was cut). A counter that fails leaves the counts unknown."""
    try:
        return await _expected(counter, plan.model, plan.prompts)
    except ServerError:
        return tuple(p.expected_tokens for p in plan.prompts)


async def _expected(counter: PromptTokenCounter | None, model: str,
                    prompts: Sequence[BenchPrompt]) -> tuple[int | None, ...]:
    whole: dict[tuple[str, str], int] = {}
    overheads: dict[str, int] = {}
    out: list[int | None] = []
    for prompt in prompts:
        if counter is not None and counter.counts_whole_prompts:
            key = (prompt.system, prompt.text)
            if key not in whole:
                whole[key] = await counter.count_chat(model, prompt.messages())
            out.append(whole[key])
        elif prompt.expected_tokens is None:
            out.append(None)
        elif counter is None:
            out.append(prompt.expected_tokens)
        else:
            if prompt.system not in overheads:
                overheads[prompt.system] = await template_tokens(counter, model, prompt.system)
            out.append(prompt.expected_tokens + overheads[prompt.system])
    return tuple(out)


__all__ = ["calibrate", "expected_prompt_tokens", "template_tokens"]
