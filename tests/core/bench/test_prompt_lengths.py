"""Prompt makers, the truncation rule and the fix a cut point names, on numbers recorded from the real servers.

Recorded with SmolLM2-135M-Instruct (Q4_1): llama-server's POST /tokenize of the bundled corpus's first twelve
pieces (corpus_chunks) gave 66, 66, 51, 69, 61, 60, 58, 50, 49, 80, 40, 28 tokens, and the real Ollama 0.32.15's
probes (prompt_eval_count less that of an empty message) gave the same; its chat template added 30 tokens on
llama-server (its default system prompt) and 9 on Ollama. With OLLAMA_CONTEXT_LENGTH=256 a 609-token message
came back with prompt_eval_count 130; with 1024, a ~5,000-token one with 514.
"""

from __future__ import annotations

import random

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.outcome import (ERROR_WORDS, FAILURE_WORDS, FailureKind, PointStatus, failure_of_saved,
                                    is_truncated, too_long_words, truncated_words)
from app.core.bench.prompt_maker import (CHUNK_CHARS, Calibration, CalibratedPromptMaker, CorpusPromptMaker,
                                         corpus_chunks)
from app.core.bench.recommend import recommend
from app.core.bench.stats import LatencyTargets, RequestRecord, summarize
from app.core.bench.sweep import PointResult, SweepPoint
from app.core.server.settings import ServerSettings
from app.core.bench.truncation import context_needed, cut_reason, fix_words

RECORDED_COUNTS = (66, 66, 51, 69, 61, 60, 58, 50, 49, 80, 40, 28)


def recorded_calibration(template: int | None = 30) -> Calibration:
    chunks = corpus_chunks(bundled_corpus())[:len(RECORDED_COUNTS)]
    return Calibration(tuple(chunks), RECORDED_COUNTS, template)


def test_the_bundled_corpus_ships_and_its_pieces_give_it_back() -> None:
    corpus = bundled_corpus()
    assert 5_000 < len(corpus) and len(corpus.encode()) < 200_000
    chunks = corpus_chunks(corpus)
    assert "".join(chunks) == " ".join(corpus.split())
    assert all(0 < len(c) <= CHUNK_CHARS for c in chunks)
    # most pieces end where the text has a break, not mid-word
    breaks = sum(1 for c, after in zip(chunks, chunks[1:]) if after.startswith(" ") or c[-1] in "。，；：！？、")
    assert breaks > len(chunks) * 0.8


def test_an_uncalibrated_maker_cuts_its_estimate_of_characters_and_expects_the_tokens_asked() -> None:
    maker = CorpusPromptMaker("one two three four five six seven eight nine ten", chars_per_token=4.0)
    made = maker.make(5, seed=3)
    assert made.expected_tokens == 5 and 17 <= len(made.text) <= 20
    assert maker.make(5, seed=3) == made  # the same seed, the same text
    assert len({maker.make(5, seed=s).text for s in range(6)}) > 1
    long = maker.make(100, seed=1)  # longer than the corpus: it wraps
    assert len(long.text) >= 395 and long.expected_tokens == 100
    assert maker.make(0, 1).expected_tokens == 1


def test_a_calibrated_maker_expects_what_the_server_counted_for_its_pieces() -> None:
    calibration = recorded_calibration()
    assert calibration.chars_per_token == pytest.approx(sum(map(len, calibration.chunks)) / sum(RECORDED_COUNTS))
    maker = calibration.maker()
    assert isinstance(maker, CalibratedPromptMaker)
    # seed 0's start piece is fixed by random.Random(0); whole pieces are taken while they fit
    for tokens in (16, 64, 200, 600):
        for seed in range(4):
            made = maker.make(tokens, seed)
            assert abs(made.expected_tokens - tokens) <= 2, (tokens, seed, made.expected_tokens)
    start = random.Random(5).randrange(len(RECORDED_COUNTS))  # where seed 5 starts
    two = RECORDED_COUNTS[start] + RECORDED_COUNTS[(start + 1) % len(RECORDED_COUNTS)]
    whole = maker.make(two, seed=5)  # two whole pieces, nothing cut
    chunks = calibration.chunks
    assert whole.text == (chunks[start] + chunks[(start + 1) % len(chunks)]).strip() and whole.expected_tokens == two
    with pytest.raises(ValueError):
        Calibration(("a",), (1, 2), None)


@pytest.mark.parametrize(("expected", "delivered", "cut"), [
    (609 + 9, 130, True),  # real Ollama, OLLAMA_CONTEXT_LENGTH=256
    (5_000, 514, True),  # real Ollama, OLLAMA_CONTEXT_LENGTH=1024
    (64 + 9, 56 + 9, False),  # a calibrated 64-token prompt the server counted 8 shorter: the maker's error
    (1024, 1021, False),
    (1024, 1024 - 103, True),  # beyond 10 %
    (40, 24, False), (40, 23, True),  # at least 16 tokens of leeway for short prompts
    (None, 130, False), (600, None, False), (0, 0, False),  # unknown on either side: no claim
])
def test_a_request_is_truncated_only_when_the_server_used_clearly_fewer_tokens(expected, delivered, cut) -> None:
    assert is_truncated(expected, delivered) is cut


def record(index: int, kind: str = "", expected: int | None = 618, prompt: int | None = 130, cached: int | None = None,
           output: int = 16) -> RequestRecord:
    error = truncated_words(prompt or 0, expected or 0) if kind == "truncated" else "x" if kind else ""
    return RequestRecord(index, 0.0, 0.0, 1.0, first_token_s=0.2, output_tokens=output, prompt_tokens=prompt,
                         error=error, error_kind=kind, expected_prompt_tokens=expected, cached_prompt_tokens=cached)


def test_requested_and_delivered_prompt_lengths_are_summarised_over_every_counted_request() -> None:
    records = [record(0, "truncated"), record(1, "truncated"), record(2, "", 618, 600, cached=18)]
    stats = summarize(records)
    assert stats.requests_failed == 2 and stats.errors == {"truncated": 2}
    assert stats.first_error == "truncated by the server: 130 of 618 prompt tokens used"
    assert (stats.prompt_tokens_requested.mean, stats.prompt_tokens_requested.min) == (618, 618)
    assert stats.prompt_tokens_delivered.min == 130 and stats.prompt_tokens_delivered.max == 618  # 600 + 18 cached
    flat = stats.flat()
    assert flat["prompt_tokens_requested_mean"] == 618 and flat["prompt_tokens_delivered_min"] == 130
    assert "prompt_tokens_delivered_p95" not in flat
    # a record's JSON holds the new fields only when known, and reads back
    assert "expected_prompt_tokens" not in record(0, expected=None).to_json()
    assert "cached_prompt_tokens" not in record(0).to_json()
    assert RequestRecord.from_json(records[2].to_json()) == records[2]


def test_a_cut_point_names_its_failure_and_the_context_it_needs() -> None:
    records = [record(0, "truncated"), record(1, "truncated"), record(2, "", 618, 620)]
    assert cut_reason(records) == "prompts cut by the server (2 of 3 requests: prompt truncated by the server)"
    assert context_needed(records, 256) == 1024  # 618 + 256 = 874, rounded up to 256s
    assert context_needed([record(0, expected=None)], 256) is None
    assert context_needed(records, None) == 768  # uncapped output: the longest seen (16)
    words = fix_words(1024, 256, 256, "By the estimate that costs 0.2 GiB of VRAM.")
    assert "at least 1024 tokens per slot" in words and "not 256" in words and words.endswith("0.2 GiB of VRAM.")
    assert FAILURE_WORDS[FailureKind.TRUNCATED].cell == "truncated"
    assert ERROR_WORDS["too_long"] == "prompt longer than the context per slot"
    assert too_long_words(631, 256) == "refused by the server: the prompt is 631 tokens, the context per slot 256"
    # a saved point reads its kind back from its reason and its requests' classes
    reason = cut_reason(records)
    assert failure_of_saved(PointStatus.FAILED, reason, {"truncated": 2}, "") is FailureKind.TRUNCATED
    assert failure_of_saved(PointStatus.FAILED, "prompts cut by the server (1 of 1 requests: x)", {"too_long": 1},
                            "") is FailureKind.PROMPT_TOO_LONG


def test_a_point_whose_prompts_were_cut_is_never_recommended_and_the_recommendation_names_the_fix() -> None:
    settings = ServerSettings()
    fast_but_cut = [record(i, "truncated", output=64) for i in range(3)] + [record(3, "", 129, 131, output=64)]
    slow_whole = [record(i, "", 129, 129, output=8) for i in range(4)]
    detail = ("truncated by the server: 130 of 618 prompt tokens used. "
              + fix_words(1024, 256, 16))
    results = [PointResult(SweepPoint(0, settings, 1), PointStatus.OK, stats=summarize(slow_whole),
                           records=tuple(slow_whole)),
               PointResult(SweepPoint(1, settings, 2), PointStatus.FAILED, cut_reason(fast_but_cut), detail=detail,
                           stats=summarize(fast_but_cut), records=tuple(fast_but_cut), failure=FailureKind.TRUNCATED)]
    targets = LatencyTargets(None, None, min_success=0.0)  # even with no targets at all
    chosen = recommend(results, targets, ("concurrency",))
    assert chosen.index == 0
    assert "At 2 clients: truncated by the server: 130 of 618 prompt tokens used." in chosen.text
    assert "at least 1024 tokens per slot" in chosen.text
    only_cut = recommend(results[1:], targets, ("concurrency",))
    assert only_cut.index is None and "at least 1024 tokens per slot" in only_cut.text
