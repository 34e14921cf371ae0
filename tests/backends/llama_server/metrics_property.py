"""The property the /metrics and /slots fuzz tests check, and their generators, as plain functions a
longer run can reuse: recorded real answers of llama-server, mutated line by line and byte by byte.

Property: parse_metrics and parse_slots never raise, whatever the text or JSON; every line that is
not a comment, blank or a readable sample is counted as skipped; every value read is a float."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from app.backends.llama_server.metrics import parse_metrics, parse_slots

DATA = Path(__file__).resolve().parents[2] / "data" / "llama_server"
METRIC_FILES = ("metrics_idle.txt", "metrics_busy.txt", "metrics_after.txt")
SLOT_FILES = ("slots_idle.json", "slots_busy.json", "slots_after.json")


def recorded(name: str) -> str:
    """One recorded answer as text."""
    return (DATA / name).read_text(encoding="utf-8")


def _mutate_line(line: str, cut: int, junk: str) -> str:
    cut = cut % (len(line) + 1)
    return line[:cut] + junk + line[cut:]


@st.composite
def metrics_texts(draw: st.DrawFn) -> str:
    """A recorded /metrics answer with some lines cut, joined with junk, duplicated or replaced."""
    lines = recorded(draw(st.sampled_from(METRIC_FILES))).splitlines()
    junk = st.one_of(st.text(max_size=12), st.sampled_from(['{', '}', '"', '\\', ' NaN', ' +Inf', ' -Inf', '{a="',
                                                           '{a="b"}', ' 1 2 3', '\x00', '#', '\ufeff', 'é']))
    for _ in range(draw(st.integers(0, 6))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(("cut", "insert", "drop", "dup", "replace")))
        if action == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif action == "insert":
            lines[i] = _mutate_line(lines[i], draw(st.integers(0, 200)), draw(junk))
        elif action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = draw(st.text(max_size=40))
    return draw(st.sampled_from(("\n", "\r\n"))).join(lines)


def json_values() -> st.SearchStrategy[Any]:
    """Any JSON value, nested a little."""
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64), st.floats(allow_nan=True),
                        st.text(max_size=8))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                        max_leaves=12)


@st.composite
def slots_documents(draw: st.DrawFn) -> Any:
    """A recorded /slots answer with fields replaced by any JSON value, removed, or the whole thing swapped."""
    document = json.loads(recorded(draw(st.sampled_from(SLOT_FILES))))
    if draw(st.booleans()) and draw(st.booleans()):
        return draw(json_values())
    keys = ("id", "is_processing", "state", "n_ctx", "n_prompt_tokens", "n_prompt_tokens_processed",
            "n_prompt_tokens_cache", "next_token", "n_decoded")
    for _ in range(draw(st.integers(0, 5))):
        if not document:
            break
        slot = document[draw(st.integers(0, len(document) - 1))]
        key = draw(st.sampled_from(keys))
        if draw(st.booleans()):
            slot.pop(key, None)
        else:
            slot[key] = draw(json_values())
    return document


def check_metrics_text(text: str) -> None:
    """parse_metrics never raises; what it reads is floats and what it skips is counted."""
    parsed = parse_metrics(text)
    assert parsed.skipped >= 0
    assert all(isinstance(v, float) for v in parsed.values.values())
    readable = sum(1 for raw in text.splitlines() if raw.strip() and not raw.strip().startswith("#"))
    assert len(parsed.values) + parsed.skipped <= readable


def check_slots_document(document: Any) -> None:
    """parse_slots never raises; each entry is either a slot or counted as skipped."""
    slots, skipped = parse_slots(document)
    if isinstance(document, list):
        assert len(slots) + skipped == len(document)
    for slot in slots:
        assert isinstance(slot.id, int) and isinstance(slot.busy, bool)
