"""A point whose prompts the server cut: how many requests, and the fix in numbers.

A request is cut when the server used clearly fewer prompt tokens than were sent (outcome.is_truncated)
or refused the prompt as longer than a slot's context (its own sign). Such a point fails: its answers are
not to the prompts asked, however fast they came. The fix is a context per slot that holds the longest
prompt and its output; what that costs in VRAM is the estimator's to say (see the sweep runner).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.bench.outcome import ERROR_WORDS, PROMPT_CUT_ERRORS, PROMPTS_CUT, FailureKind
from app.core.bench.stats import Distribution, PointStats, RequestRecord

CONTEXT_STEP = 256  # a suggested context is rounded up to a multiple of this
PROMPT_CUT_FAILURES = (FailureKind.TRUNCATED, FailureKind.PROMPT_TOO_LONG)  # a point's failures of this kind


def cut_records(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The counted requests whose prompt was truncated or refused as too long."""
    return [r for r in records if not r.warmup and r.error_kind in PROMPT_CUT_ERRORS]


def context_needed(records: Sequence[RequestRecord], output_tokens: int | None) -> int | None:
    """The context per slot the workload's prompts need: the longest expected prompt of the counted requests
    plus the output cap (or the longest output seen, where uncapped), rounded up to CONTEXT_STEP; None when
    no prompt length is known."""
    prompts = [r.expected_prompt_tokens for r in records if not r.warmup and r.expected_prompt_tokens]
    if not prompts:
        return None
    output = output_tokens if output_tokens is not None else max((r.output_tokens for r in records), default=0)
    need = max(prompts) + max(0, output)
    return -(-need // CONTEXT_STEP) * CONTEXT_STEP


def cut_reason(records: Sequence[RequestRecord]) -> str:
    """A failed point's reason: "prompts cut by the server (6 of 8 requests: prompt truncated by the server)"."""
    cut = cut_records(records)
    counted = [r for r in records if not r.warmup]
    kinds = sorted({r.error_kind for r in cut})
    words = ", ".join(ERROR_WORDS.get(k, k) for k in kinds)
    return f"{PROMPTS_CUT} ({len(cut)} of {len(counted)} requests: {words})"


def fix_words(needed: int | None, context_now: int | None, output_tokens: int | None, price_words: str = "") -> str:
    """The fix, in a sentence or two: the context per slot needed, against the one in force, and its price."""
    if needed is None:
        return ("The prompts do not fit: raise the context per slot to hold the longest prompt and its output, "
                "or send shorter prompts.")
    output = f" (the longest prompt and {output_tokens} output tokens)" if output_tokens is not None else ""
    now = f", not {context_now}" if context_now else ""
    text = (f"The prompts do not fit: they need a context of at least {needed} tokens per slot{output}{now}. "
            "Raise the context per slot, or send shorter prompts.")
    return f"{text} {price_words}" if price_words else text


def _span(d: Distribution) -> str:
    if not d.n:
        return "not counted"
    low, high = round(d.min), round(d.max)
    return f"{d.mean:.0f}" + (f" ({low}–{high})" if low != high else "")


def length_words(stats: PointStats) -> str:
    """A point's prompt lengths for people, "requested 609, delivered 130" (mean, and the range where they vary);
    empty when no request's length was asked or counted."""
    if not stats.prompt_tokens_requested.n:
        return ""
    return (f"prompt tokens requested {_span(stats.prompt_tokens_requested)}, "
            f"delivered {_span(stats.prompt_tokens_delivered)}")


__all__ = ["CONTEXT_STEP", "PROMPT_CUT_FAILURES", "context_needed", "cut_reason", "cut_records", "fix_words", "length_words"]
