"""Reading a model's memory shape from /api/show replies (tests/data/show_*.json).

The qwen3:14b reply carries the tensor list with llama.cpp's Q4_K_M type mix (Q6_K for
output.weight and for attn_v/ffn_down in the layers llama.cpp's `use_more_bits` picks); its
GPU part must equal the 8161.75 MiB model buffer llama-server logged for that mix.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.core.errors import DeckError, EstimateError
from app.core.model_shape import tensor_bytes
from app.backends.ollama.show import shape_from_show
from app.core.units import GIB, MIB

DATA = Path(__file__).resolve().parents[1] / "data"
QWEN3_14B_Q4_K_M_BYTES = 9_000_210_784
LLAMA31_8B_BYTES = 4_920_753_328
GEMMA3_12B_BYTES = 8_149_190_253
QWEN3_30B_A3B_BYTES = 18_553_835_456  # benchmarks/vram/make_gguf.py --shape qwen3-30b-a3b


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def test_tensor_bytes_follow_ggml_block_sizes() -> None:
    assert tensor_bytes("Q4_K", [256]) == 144
    assert tensor_bytes("Q5_K", [512]) == 352
    assert tensor_bytes("Q6_K", [256, 2]) == 420
    assert tensor_bytes("Q8_0", [32]) == 34
    assert tensor_bytes("Q4_0", [64]) == 36
    assert tensor_bytes("F16", [10, 10]) == 200
    assert tensor_bytes("BF16", [3]) == 6
    assert tensor_bytes("F32", [5120]) == 20480
    assert tensor_bytes("q4_k", [256]) == 144  # Ollama prints types in upper case, accept both


def test_unknown_tensor_type_is_named() -> None:
    with pytest.raises(EstimateError, match="Q9_X"):
        tensor_bytes("Q9_X", [256])


def test_qwen3_14b_from_tensor_list_matches_llama_server_buffers() -> None:
    shape = shape_from_show(load("show_qwen3_14b.json"), QWEN3_14B_Q4_K_M_BYTES)
    w = shape.weights
    assert w.from_tensors and not shape.tied_embeddings
    assert (shape.architecture, shape.n_layer, shape.n_embd, shape.n_ff) == ("qwen3", 40, 5120, 17408)
    assert (shape.n_head, shape.n_head_kv[0], shape.key_length, shape.value_length) == (40, 8, 128, 128)
    assert shape.n_vocab == 151936 and shape.context_length == 40960
    assert (sum(w.layer_bytes) + w.output_bytes) / MIB == pytest.approx(8161.75, abs=0.01)
    assert w.token_embd_bytes / MIB == pytest.approx(417.30, abs=0.01)
    # layers 0-4 and 35-39 and every third in between keep Q6_K attn_v/ffn_down
    assert w.layer_bytes[0] > w.layer_bytes[5] and w.layer_bytes[7] == w.layer_bytes[0]
    assert shape.sliding_window == 0 and not any(shape.swa_layers)


def test_llama_without_key_length_uses_embedding_over_heads() -> None:
    shape = shape_from_show(load("show_llama3_1_8b.json"), LLAMA31_8B_BYTES)
    assert shape.key_length == shape.value_length == 4096 // 32
    assert shape.n_vocab == 128256  # llama.vocab_size
    assert not shape.weights.from_tensors
    # split from the file size: everything but the metadata is weights
    assert shape.weights.total_file_weights == pytest.approx(LLAMA31_8B_BYTES, rel=0.01)


def test_gemma3_keeps_every_sixth_layer_global_and_ties_embeddings() -> None:
    shape = shape_from_show(load("show_gemma3_12b.json"), GEMMA3_12B_BYTES)
    assert shape.sliding_window == 1024
    globals_ = [i for i, swa in enumerate(shape.swa_layers) if not swa]
    assert globals_ == [5, 11, 17, 23, 29, 35, 41, 47]
    assert shape.tied_embeddings
    assert shape.weights.output_bytes >= shape.weights.token_embd_bytes  # the head repeats the table on the GPU
    assert shape.n_vocab == 262144


def test_gemma2_defaults_to_a_4096_window_on_even_layers() -> None:
    show = load("show_gemma3_12b.json")
    info = {k.replace("gemma3.", "gemma2."): v for k, v in show["model_info"].items()}
    info["general.architecture"] = "gemma2"
    del info["gemma2.attention.sliding_window"]
    shape = shape_from_show({**show, "model_info": info}, GEMMA3_12B_BYTES)
    assert shape.sliding_window == 4096
    assert shape.swa_layers[:4] == (True, False, True, False)


def test_per_layer_kv_heads_are_kept() -> None:
    show = load("show_llama3_1_8b.json")
    show["model_info"]["llama.attention.head_count_kv"] = [8] * 16 + [4] * 16
    shape = shape_from_show(show, LLAMA31_8B_BYTES)
    assert shape.n_head_kv[0] == 8 and shape.n_head_kv[-1] == 4


def test_qwen3_moe_counts_every_expert_in_the_weights_and_the_routed_ones_in_the_ffn_width() -> None:
    shape = shape_from_show(load("show_qwen3_30b_a3b.json"), QWEN3_30B_A3B_BYTES)
    assert (shape.architecture, shape.n_layer, shape.n_embd, shape.n_expert, shape.n_expert_used) == (
        "qwen3moe", 48, 2048, 128, 8)
    assert shape.n_ff == 8 * 768  # a token's activations run through 8 experts of 768
    assert (shape.n_head, shape.n_head_kv[0], shape.key_length) == (32, 4, 128)  # q width 4096 > n_embd
    # all 128 experts of every layer are weights on the GPU: ~17 GiB for 48 layers
    assert sum(shape.weights.layer_bytes) / GIB == pytest.approx(16.876, abs=0.001)
    without = {k: v for k, v in load("show_qwen3_30b_a3b.json").items() if k != "tensors"}
    split = shape_from_show(without, QWEN3_30B_A3B_BYTES)  # from the file size: same total within 1 %
    assert sum(split.weights.layer_bytes) == pytest.approx(sum(shape.weights.layer_bytes), rel=0.01)


@pytest.mark.parametrize("key", ["qwen3moe.expert_count", "qwen3moe.expert_used_count",
                                 "qwen3moe.expert_feed_forward_length"])
def test_a_moe_model_without_its_expert_keys_is_named(key: str) -> None:
    show = copy.deepcopy(load("show_qwen3_30b_a3b.json"))
    del show["model_info"][key]
    with pytest.raises(EstimateError, match=key):
        shape_from_show(show, QWEN3_30B_A3B_BYTES)


def test_unknown_architecture_is_named() -> None:
    show = load("show_llama3_1_8b.json")
    show["model_info"]["general.architecture"] = "mamba"
    with pytest.raises(EstimateError, match="'mamba'") as err:
        shape_from_show(show, LLAMA31_8B_BYTES)
    assert "qwen3" in err.value.user_text()  # the hint lists what is supported
    assert isinstance(err.value, DeckError)


@pytest.mark.parametrize("key", ["qwen3.block_count", "qwen3.embedding_length", "qwen3.attention.head_count",
                                 "qwen3.context_length", "qwen3.feed_forward_length"])
def test_missing_key_is_named(key: str) -> None:
    show = copy.deepcopy(load("show_qwen3_14b.json"))
    del show["model_info"][key]
    with pytest.raises(EstimateError, match=key):
        shape_from_show(show, QWEN3_14B_Q4_K_M_BYTES)


def test_negative_numbers_are_refused() -> None:
    show = load("show_qwen3_14b.json")
    show["model_info"]["qwen3.block_count"] = -40
    with pytest.raises(EstimateError, match="block_count"):
        shape_from_show(show, QWEN3_14B_Q4_K_M_BYTES)
    with pytest.raises(EstimateError, match="model size"):
        shape_from_show(load("show_qwen3_14b.json"), -1)


def test_file_too_small_for_the_shape_is_refused() -> None:
    with pytest.raises(EstimateError, match="too small"):
        shape_from_show(load("show_llama3_1_8b.json"), 1_000_000)


def test_not_a_show_reply() -> None:
    with pytest.raises(EstimateError, match="model_info"):
        shape_from_show({"models": []}, 1000)
