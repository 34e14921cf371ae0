"""The llama-server model list: names, the models folder, and events fuzzed through the SSE parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.backends.llama_server.catalog import gguf_files, listed, model_file, quantization_from_name, served_model
from app.backends.llama_server.wire import SseChatParser
from app.core.errors import ServerError


@pytest.mark.parametrize(("name", "quant"), [
    ("Qwen3-14B-Q4_K_M.gguf", "Q4_K_M"), ("qwen2.5-7b-instruct-q8_0.gguf", "Q8_0"),
    ("SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1"), ("gemma-3-12b-it-IQ4_XS.gguf", "IQ4_XS"),
    ("llama-3.1-8b-f16.gguf", "F16"), ("Mistral-7B-Instruct-v0.3.BF16.gguf", "BF16"), ("model.gguf", ""),
    ("Q4_K_M-notes.gguf", "Q4_K_M"),
])
def test_the_quantization_a_file_name_states(name: str, quant: str) -> None:
    assert quantization_from_name(name) == quant


def test_the_folder_lists_gguf_files_one_level_deep_without_projectors(tmp_path: Path) -> None:
    for rel in ("a.gguf", "sub/b-Q8_0.gguf", "sub/mmproj-b.gguf", "sub/deeper/c.gguf", "readme.md"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF")
    found = gguf_files(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a.gguf", "sub/b-Q8_0.gguf"]
    assert gguf_files(None) == [] and gguf_files(tmp_path / "absent") == []


def test_the_served_file_is_listed_once_and_found_by_name_or_path(tmp_path: Path) -> None:
    served_path = tmp_path / "served-Q4_0.gguf"
    served_path.write_bytes(b"GGUF" * 4)
    (tmp_path / "other.gguf").write_bytes(b"GGUF")
    served = [served_model({"id": "my-alias", "meta": {"n_params": 7_000_000_000, "ftype": "Q4_0"}}, str(served_path))]
    models = listed(served, gguf_files(tmp_path))
    assert [m.name for m in models] == ["my-alias", "other.gguf"]
    assert models[0].size_bytes == 16 and models[0].parameter_size == "7.0B"
    folder = gguf_files(tmp_path)
    assert model_file("my-alias", served, folder) == served_path
    assert model_file("served-Q4_0.gguf", served, folder) == served_path  # the file name names it too
    assert model_file("other.gguf", served, folder) == tmp_path / "other.gguf"
    assert model_file(str(served_path), [], []) == served_path
    assert model_file("nothing.gguf", served, folder) is None


def sse_line_is_parsed_or_refused(line: bytes) -> None:
    """Property: any line becomes a chunk, nothing, or one of the app's typed errors."""
    parser = SseChatParser("http://127.0.0.1:8080")
    try:
        parser.feed(line, 1.0)
        parser.feed(b"data: [DONE]", 2.0)
    except ServerError as exc:
        assert exc.message


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                           st.sampled_from(["choices", "delta", "content", "reasoning_content", "timings", "usage",
                                            "finish_reason", "error", "predicted_n", "prompt_n", "predicted_ms",
                                            "predicted_per_token_ms", "message"]), inner, max_size=4),
                       max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(payload=st.one_of(st.binary(max_size=64), JSONISH.map(lambda v: json.dumps(v).encode())))
def test_any_event_is_parsed_or_refused_with_a_typed_error(payload: bytes) -> None:
    sse_line_is_parsed_or_refused(b"data: " + payload)


def test_a_gguf_files_details_carry_its_facts_with_the_templates_capabilities(tmp_path: Path) -> None:
    from app.backends.llama_server.catalog import details_from_file, details_from_server, read_cached
    from app.core.errors import EstimateError
    from app.core.model_facts import ModelCapability
    from tests.fakes.llama_server.tiny_gguf import N_CTX, N_LAYER, write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "thinker-F32.gguf")
    info = read_cached(path)
    verbose = details_from_file(info, None, verbose=True).facts
    assert verbose.capabilities == {ModelCapability.COMPLETION, ModelCapability.THINKING}
    assert verbose.source == str(path) and verbose.size_bytes == path.stat().st_size
    assert verbose.quantization == "F32" and verbose.training_context == N_CTX
    assert verbose.tensors == info.tensors and verbose.shape().weights.from_tensors
    assert verbose.shape().n_layer == N_LAYER
    plain = details_from_file(info, "no thinking here", verbose=False)
    assert plain.facts.capabilities == {ModelCapability.COMPLETION} and plain.facts.tensors is None
    assert plain.details["family"] == "llama" and plain.details["quantization_level"] == "F32"
    # A served model whose file is elsewhere: the server's meta only, which the estimator cannot price.
    remote = details_from_server({"id": "far.gguf", "meta": {"n_params": 1000, "ftype": "Q8_0", "size": 2048}},
                                 "plain").facts
    assert (remote.quantization, remote.size_bytes, remote.source, remote.parameter_count) == ("Q8_0", 2048,
                                                                                              "far.gguf", 1000)
    with pytest.raises(EstimateError, match="unsupported architecture"):
        remote.shape()
