"""Prompt texts cut from the bundled corpus: real package data, lengths by the estimate, seeded places."""

from __future__ import annotations

import pytest

from app.adapters.prompt_corpus import bundled_corpus
from app.core.bench.prompt_maker import CorpusPromptMaker


def test_the_bundled_corpus_is_the_articles_text():
    text = bundled_corpus()
    assert "请用中文写一篇关于人工智能发展趋势的300字短文" in text and len(text) > 5000


@pytest.mark.parametrize("tokens", [1, 7, 80, 10_200])
def test_a_text_has_the_estimated_length_and_the_same_seed_gives_the_same_text(tokens):
    maker = CorpusPromptMaker(bundled_corpus(), chars_per_token=0.7)
    made = maker.make(tokens, 3)
    assert abs(len(made.text) - max(1, round(tokens * 0.7))) <= 1  # a space at a cut is stripped
    assert made.expected_tokens == tokens and not maker.calibrated
    assert maker.make(tokens, 3) == made
    if tokens > 10:
        assert maker.make(tokens, 4).text != made.text


def test_a_text_longer_than_the_corpus_wraps_around_it():
    maker = CorpusPromptMaker("abc", chars_per_token=1.0)
    assert len(maker.make(10, 0).text) >= 9 and set(maker.make(10, 0).text) <= set("abc ")
    with pytest.raises(ValueError):
        CorpusPromptMaker("abc", chars_per_token=0)
