"""The create-variant form's checks, its /api/create body, and the FP8 explanation."""

from __future__ import annotations

from app.backends.ollama.variant import check_variant, fp8_explanation, mentions_fp8, quantization_costs
from app.core.units import MIB

LOCAL = {"qwen3:14b", "qwen3:14b-fp16", "llama3.2:3b"}
QWEN_PARAMS = 14_768_307_200
RTX_4090 = 24564 * MIB


def test_the_articles_modelfile_step_as_a_request() -> None:
    check = check_variant("qwen3:14b", "qwen3-14b-16k", 16384, 512, local_names=LOCAL, training_context=40960)
    assert check.ok and check.warnings == {}
    assert check.body == {"model": "qwen3-14b-16k", "from": "qwen3:14b",
                          "parameters": {"num_ctx": 16384, "num_batch": 512}}


def test_nothing_changed_sends_no_parameters() -> None:
    assert check_variant("qwen3:14b", "copy", None, None, local_names=LOCAL).body == {"model": "copy",
                                                                                     "from": "qwen3:14b"}


def test_the_articles_values_get_warnings_with_the_real_meaning() -> None:
    check = check_variant("qwen3:14b", "my-qwen3", 131072, 8, local_names=LOCAL, training_context=40960)
    assert check.ok
    assert "clamps num_ctx 131072 to 40960" in check.warnings["num_ctx"]
    assert "not concurrency" in check.warnings["num_batch"] and "OLLAMA_NUM_PARALLEL" in check.warnings["num_batch"]


def test_fp8_is_explained_with_the_real_choices_and_their_cost() -> None:
    check = check_variant("qwen3:14b-fp8", "x", None, None, local_names=LOCAL, parameter_count=QWEN_PARAMS,
                          gpu_total_bytes=RTX_4090)
    text = check.errors["base"]
    assert "Ollama has no FP8" in text and "vLLM" in text
    assert "q4_K_M ≈ 9.2 GB" in text and "q8_0 ≈ 15.7 GB" in text and "fp16 ≈ 29.5 GB" in text
    assert "does not fit this GPU" in text and "1.7× slower" in text
    quant = check_variant("qwen3:14b-fp16", "x", None, None, "fp8", local_names=LOCAL, base_quantization="F16")
    assert "Ollama has no FP8" in quant.errors["quantize"]
    assert "FP8" in check_variant("qwen3:14b", "qwen3-fp8", None, None, local_names=LOCAL).warnings["name"]
    assert all(mentions_fp8(t) for t in ("qwen3:14b-fp8", "FP8", "float8_e4m3"))
    assert not mentions_fp8("qwen3:14b-q8_0")


def test_quantizing_needs_a_float_base_and_a_known_type() -> None:
    refused = check_variant("qwen3:14b", "q", None, None, "q8_0", local_names=LOCAL, base_quantization="Q4_K_M")
    assert "only from an F16 or F32 model" in refused.errors["quantize"]
    fine = check_variant("qwen3:14b-fp16", "q", None, None, "q8_0", local_names=LOCAL, base_quantization="F16")
    assert fine.ok and fine.body["quantize"] == "q8_0"
    assert "is not one of them" in check_variant("qwen3:14b-fp16", "q", None, None, "q3_K", local_names=LOCAL,
                                                 base_quantization="F16").errors["quantize"]


def test_names_are_checked() -> None:
    assert "Give the new model a name" in check_variant("qwen3:14b", " ", None, None).errors["name"]
    assert "letters, digits" in check_variant("qwen3:14b", "bad name!", None, None).errors["name"]
    assert "base model's own name" in check_variant("qwen3:14b", "qwen3:14b", None, None).errors["name"]
    assert "replaces it" in check_variant("qwen3:14b", "llama3.2:3b", None, None, local_names=LOCAL).warnings["name"]
    assert "pulls it from the registry" in check_variant("qwen3:32b", "x", None, None,
                                                         local_names=LOCAL).warnings["base"]
    assert check_variant("qwen3:14b", "me/qwen3:16k", None, None, local_names=LOCAL).ok
    assert "no room" in check_variant("qwen3:14b", "x", 100, None).errors["num_ctx"]


def test_costs_without_a_parameter_count_fall_back_to_bits_per_weight() -> None:
    assert quantization_costs(None)[0].startswith("q4_K_M 5 bits/weight")
    assert "Real choices" in fp8_explanation()
