"""Hostile /metrics text: reading it never raises, and one line the parser rejects costs only that line."""

from __future__ import annotations

import math

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.backends.openai.metrics import library_samples, parse_exposition, read_exposition
from tests.backends.openai.exposition_server import served

FILES = ("openai/vllm_idle.txt", "openai/vllm_busy.txt", "openai/sglang_busy.txt", "openai/tgi_busy.txt",
         "llama_server/metrics_busy.txt")
TEXTS = {name: served(name).decode() for name in FILES}
JUNK = st.one_of(st.text(max_size=40), st.sampled_from(['{', '}', '"', '\\', ' NaN', ' +Inf', '{a="', '{a="b"}',
                                                         ' 1 2 3', '\x00', '#', '# TYPE', '# TYPE x', '\ufeff', 'é']))


@st.composite
def mangled(draw: st.DrawFn) -> str:
    """A recorded exposition with lines cut, replaced or joined with junk."""
    lines = TEXTS[draw(st.sampled_from(FILES))].split("\n")
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(("cut", "insert", "replace")))
        if action == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif action == "insert":
            cut = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:cut] + draw(JUNK) + lines[i][cut:]
        else:
            lines[i] = draw(JUNK)
    return draw(st.sampled_from(("\n", "\r\n"))).join(lines)


def check(text: str) -> None:
    exposition = parse_exposition(text)
    assert exposition.skipped >= 0
    assert all(isinstance(v, float) for v in exposition.samples.values())
    reading = read_exposition(text, at=1.0).reading
    for figure in (reading.prompt_tokens_total, reading.predicted_tokens_total, reading.requests_finished_total,
                   reading.kv_cache_ratio):
        assert figure is None or math.isfinite(figure)
    assert reading.kv_cache_ratio is None or 0.0 <= reading.kv_cache_ratio <= 1.0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    check(text)


@settings(max_examples=300, deadline=None)
@given(mangled())
def test_mangled_recorded_expositions_never_raise(text: str) -> None:
    check(text)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FILES), st.data())
def test_valid_lines_survive_a_bad_neighbour(name: str, data: st.DataObject) -> None:
    bad = data.draw(JUNK.filter(lambda s: "\n" not in s), label="bad line")
    assume(library_samples(bad) is None)  # a line the library rejects on its own
    lines = TEXTS[name].split("\n")
    at = data.draw(st.integers(0, len(lines)), label="inserted at")
    clean = parse_exposition(TEXTS[name])
    dirty = parse_exposition("\n".join([*lines[:at], bad, *lines[at:]]))
    assert clean.skipped == 0 and dirty.skipped == 1
    for key, value in clean.samples.items():
        assert dirty.samples.get(key) == value, key
