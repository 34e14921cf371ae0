"""Model metadata that no real model has is refused where it is parsed, with an EstimateError naming the key.

The GUI's fit panel, the sweep's pricing and `ollama-deck estimate` all read shapes through
shape_from_show, so each guard here protects all three from a damaged or hostile show reply.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import EstimateError
from app.core.model_shape import tensor_bytes
from app.backends.ollama.show import shape_from_show

DATA = Path(__file__).resolve().parents[1] / "data"
QWEN = json.loads((DATA / "show_qwen3_14b.json").read_text())
LLAMA_TENSORS = json.loads((DATA / "show_llama3_1_8b_tensors.json").read_text())
QWEN_BYTES = 9_000_210_784


def with_info(**changes: Any) -> dict[str, Any]:
    show = copy.deepcopy(QWEN)
    show["model_info"].update({k.replace("__", "."): v for k, v in changes.items()})
    return show


@pytest.mark.parametrize(("key", "value", "message"), [
    ("qwen3.block_count", 10**12, "'qwen3.block_count' is 1000000000000, above the 4096"),
    ("qwen3.block_count", 1e999, "lacks a positive 'qwen3.block_count'"),  # JSON 1e999 reads as inf
    ("qwen3.block_count", float("nan"), "lacks a positive 'qwen3.block_count'"),
    ("qwen3.block_count", "40", "lacks a positive 'qwen3.block_count'"),
    ("qwen3.block_count", True, "lacks a positive 'qwen3.block_count'"),
    ("qwen3.embedding_length", 2**40, "'qwen3.embedding_length' is 1099511627776, above the 1048576"),
    ("qwen3.attention.head_count", 10**9, "above the 16384"),
    ("qwen3.attention.head_count_kv", [8] * 39 + ["x"], "lacks a positive 'qwen3.attention.head_count_kv'"),
    ("qwen3.attention.key_length", "abc", "lacks a positive 'qwen3.attention.key_length'"),
    ("qwen3.context_length", 2**40, "above the 1073741824"),
    ("qwen3.feed_forward_length", [17408] * 5000, "lists 5000 values"),
])
def test_absurd_or_non_numeric_metadata_is_named(key: str, value: Any, message: str) -> None:
    show = copy.deepcopy(QWEN)
    show["model_info"][key] = value
    with pytest.raises(EstimateError) as refused:
        shape_from_show(show, QWEN_BYTES)
    assert message in refused.value.message


def test_more_heads_than_embedding_width_is_named() -> None:
    show = copy.deepcopy(LLAMA_TENSORS)  # no key_length: llama.cpp derives it from the width
    show["model_info"]["llama.attention.head_count"] = 8192
    with pytest.raises(EstimateError, match="8192 attention heads for an embedding of 4096"):
        shape_from_show(show, 4_920_753_328)


@pytest.mark.parametrize(("shape", "message"), [
    (["abc", 4096], "holds 'abc', not a dimension"),
    ([4096, None], "holds None, not a dimension"),
    ([-1, 4096], "holds -1, not a dimension"),
    ([2**30, 2**30], "more than 2^48 elements"),
])
def test_damaged_tensor_shapes_are_named(shape: list[Any], message: str) -> None:
    show = copy.deepcopy(LLAMA_TENSORS)
    show["tensors"][3]["shape"] = shape
    with pytest.raises(EstimateError, match=message.replace("^", r"\^")):
        shape_from_show(show, 4_920_753_328)


def test_tensor_entries_that_are_not_objects_and_odd_details_are_handled() -> None:
    show = copy.deepcopy(LLAMA_TENSORS)
    show["tensors"][0] = "token_embd.weight"
    with pytest.raises(EstimateError, match="not an object with a shape list"):
        shape_from_show(show, 4_920_753_328)
    show = copy.deepcopy(QWEN)
    show["details"] = "Q4_K_M"  # not an object: the quantization falls back instead of failing
    assert shape_from_show(show, QWEN_BYTES).n_layer == 40


def test_whole_floats_still_read_and_sizes_are_bounded() -> None:
    assert shape_from_show(with_info(qwen3__block_count=40.0), QWEN_BYTES).n_layer == 40
    with pytest.raises(EstimateError, match="above 1 PiB"):
        shape_from_show(QWEN, 2**60)
    assert tensor_bytes("F16", [4096.0, 2]) == 16384


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                   max_size=4), max_leaves=12)
KEYS = ["block_count", "embedding_length", "feed_forward_length", "attention.head_count",
        "attention.head_count_kv", "attention.key_length", "attention.value_length", "context_length",
        "vocab_size", "attention.sliding_window", "attention.sliding_window_pattern"]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["qwen3", "gemma3", "qwen3moe"]), st.dictionaries(st.sampled_from(KEYS), JSONISH, max_size=4),
       st.integers(min_value=-5, max_value=2**62))
def test_any_metadata_gives_a_shape_or_an_estimate_error(arch: str, changes: dict[str, Any], size: int) -> None:
    show = copy.deepcopy(QWEN)
    info = {k.replace("qwen3.", f"{arch}."): v for k, v in show["model_info"].items()}
    info.update({"general.architecture": arch, f"{arch}.expert_count": 8, f"{arch}.expert_used_count": 2,
                 f"{arch}.expert_feed_forward_length": 768})
    info.update({f"{arch}.{k}": v for k, v in changes.items()})
    show["model_info"] = info
    try:
        shape = shape_from_show(show, size)
    except EstimateError:
        return
    assert 1 <= shape.n_layer <= 4096 and len(shape.n_head_kv) == shape.n_layer
