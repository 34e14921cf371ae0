"""Watch events as the history keeps them: they round-trip, a damaged entry is skipped, strict JSON holds."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from app.core.watch.events import (
    EVIDENCE_CHARS, EventKind, Evidence, Severity, Source, WatchEvent, between, event_lines, events_from_json,
    events_markdown, spoiling, worst,
)

texts = st.text(max_size=2000)
figures = st.dictionaries(st.text(min_size=1, max_size=20), st.floats(allow_nan=True, allow_infinity=True), max_size=4)
evidence = st.builds(Evidence, st.sampled_from(list(Source)), texts, figures)
events = st.builds(WatchEvent, st.sampled_from(list(EventKind)), st.sampled_from(list(Severity)),
                   st.floats(min_value=0, max_value=4e9), texts, texts, st.lists(evidence, max_size=3).map(tuple),
                   st.text(max_size=50))


@given(st.lists(events, max_size=5))
def test_events_round_trip_through_strict_json(items: list[WatchEvent]) -> None:
    text = json.dumps([e.to_json() for e in items], allow_nan=False)
    back = events_from_json(json.loads(text))
    assert [(e.kind, e.severity, e.at, e.summary, e.subject) for e in back] == [
        (e.kind, e.severity, e.at, e.summary, e.subject) for e in items]
    for old, new in zip(items, back):
        for a, b in zip(old.evidence, new.evidence):
            assert b.text == a.text and len(b.text) <= EVIDENCE_CHARS
            assert b.figures == {k: v for k, v in a.figures.items() if math.isfinite(v)}


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=20))
def test_any_stored_document_reads_back_as_events_or_nothing(doc: object) -> None:
    assert all(isinstance(e, WatchEvent) for e in events_from_json(doc))


def test_a_newer_kind_is_skipped_not_fatal() -> None:
    good = WatchEvent(EventKind.COLD_LOAD, Severity.WARNING, 10.0, "loaded again", "keep it loaded",
                      (Evidence(Source.REPLY, "load 2.1 s", {"load_s": 2.1}),), "m")
    newer = dict(good.to_json(), kind="something_new")
    assert events_from_json([newer, good.to_json(), "junk"]) == (good,)


def test_the_helpers_read_a_list_of_events() -> None:
    cut = WatchEvent(EventKind.PROMPT_TRUNCATED, Severity.SEVERE, 20.0, "cut | short", "raise the context",
                     (Evidence(Source.REPLY, "sent 5000, used 514"),), "m")
    queue = WatchEvent(EventKind.REQUESTS_DEFERRED, Severity.INFO, 30.0, "2 wait", "more slots")
    assert between([queue, cut], 0, 25) == (cut,) and spoiling([queue, cut]) == (cut,)
    assert worst([queue, cut]) is Severity.SEVERE and worst([]) is None
    lines = event_lines([cut])
    assert "SEVERE prompt cut short: cut | short" in lines[0] and lines[1].strip() == "reply: sent 5000, used 514"
    table = events_markdown([cut])
    assert len(table) == 3 and "cut \\| short" in table[2]
