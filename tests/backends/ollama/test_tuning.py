"""Ollama's mapping: the environment `ollama serve` gets, its options and its refusals."""

from __future__ import annotations

import pytest

from app.backends.ollama.tuning import (
    FIELD_ENV_VARIABLES,
    INVENTED_VARIABLES,
    OLLAMA_TUNING,
    environment,
    mapping_text,
    ollama_settings,
)
from app.core.server.settings import ServerSettings
from app.core.units import MIB

validate = OLLAMA_TUNING.validate


def test_defaults_are_valid_and_leave_ollama_defaults_unset() -> None:
    result = validate(ServerSettings())
    assert result.ok and result.errors == {} and result.warnings == {}
    assert environment(ServerSettings()) == {"OLLAMA_HOST": "127.0.0.1:11434", "OLLAMA_NUM_PARALLEL": "1"}


def test_every_knob_reaches_its_real_variable() -> None:
    s = ollama_settings(ServerSettings(
        num_parallel=4, context_length=16384, kv_cache_type="q8_0", flash_attention="on",
        keep_alive="-1", max_queue=64,
        host="0.0.0.0", port=11500, network_allowed_for="0.0.0.0",
        extra_settings="# comment\nexport OLLAMA_DEBUG=\"1\"\n\nCUDA_VISIBLE_DEVICES=0",
    ), max_loaded_models=1, gpu_overhead_mib=512, models_dir="/srv/models")
    assert environment(s) == {
        "OLLAMA_HOST": "0.0.0.0:11500",
        "OLLAMA_NUM_PARALLEL": "4",
        "OLLAMA_CONTEXT_LENGTH": "16384",
        "OLLAMA_KV_CACHE_TYPE": "q8_0",
        "OLLAMA_FLASH_ATTENTION": "1",
        "OLLAMA_KEEP_ALIVE": "-1",
        "OLLAMA_MAX_LOADED_MODELS": "1",
        "OLLAMA_MAX_QUEUE": "64",
        "OLLAMA_GPU_OVERHEAD": str(512 * MIB),
        "OLLAMA_MODELS": "/srv/models",
        "OLLAMA_DEBUG": "1",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    assert environment(ServerSettings(flash_attention="off"))["OLLAMA_FLASH_ATTENTION"] == "0"
    assert set(FIELD_ENV_VARIABLES.values()) <= set(environment(s))


@pytest.mark.parametrize("name", sorted(INVENTED_VARIABLES))
def test_invented_variables_are_refused_with_the_real_alternative(name: str) -> None:
    error = validate(ServerSettings(extra_settings=f"{name}=8")).errors["extra_settings"]
    assert f"{name} does not exist in Ollama" in error
    assert INVENTED_VARIABLES[name] in error


def test_extra_environment_rules() -> None:
    result = validate(ServerSettings(extra_settings=(
        "OLLAMA_LOAD_TIMEOUT=10m\n"      # real: fine
        "OLLAMA_NUM_PARALEL=4\n"        # typo: warned
        "OLLAMA_HOST=0.0.0.0\n"         # owned by the form: refused
        "JUST_A_NAME\n"                 # no value: refused
        "9LIVES=1\n"                    # not a name: refused
        "CUDA_VISIBLE_DEVICES=0\nCUDA_VISIBLE_DEVICES=1\n"
    )))
    error, warning = result.errors["extra_settings"], result.warnings["extra_settings"]
    assert "line 3: OLLAMA_HOST is set by the form (host and port)" in error
    assert "line 4: JUST_A_NAME has no value" in error
    assert "line 5: '9LIVES' is not a valid variable name" in error
    assert "line 2: OLLAMA_NUM_PARALEL is not a variable Ollama is known to read" in warning
    assert "line 7: CUDA_VISIBLE_DEVICES is set twice" in warning
    assert "OLLAMA_LOAD_TIMEOUT" not in error + warning


def test_field_ranges_and_warnings() -> None:
    result = validate(ollama_settings(ServerSettings(
        num_parallel=0, context_length=100, keep_alive="later", max_queue=0, port=0,
    ), max_loaded_models=65, gpu_overhead_mib=-1, models_dir="~/models"))
    assert set(result.errors) == {
        "num_parallel", "context_length", "keep_alive", "max_loaded_models", "max_queue",
        "gpu_overhead_mib", "port", "models_dir",
    }
    assert "does not expand ~" in result.errors["models_dir"]
    warned = validate(ollama_settings(ServerSettings(
        num_parallel=16, context_length=10000, keep_alive="0", port=80,
    ), gpu_overhead_mib=2048, models_dir="models"))
    assert warned.ok
    assert set(warned.warnings) == {
        "num_parallel", "context_length", "keep_alive", "gpu_overhead_mib", "port", "models_dir",
    }
    assert "32768 to 4096" in warned.warnings["gpu_overhead_mib"]
    assert validate(ollama_settings(models_dir="C:\\models")).ok




def test_mapping_text_is_the_environment_as_lines() -> None:
    assert mapping_text(ServerSettings(num_parallel=4)) == ["OLLAMA_HOST=127.0.0.1:11434", "OLLAMA_NUM_PARALLEL=4"]
    assert OLLAMA_TUNING.mapping_text(ServerSettings()) == mapping_text(ServerSettings())
    assert OLLAMA_TUNING.setting_name("num_parallel") == "OLLAMA_NUM_PARALLEL"
    assert OLLAMA_TUNING.setting_name("ollama_binary") == ""  # an app preference, not a variable


def test_batch_sizes_have_no_variable_and_are_refused_with_the_alternative() -> None:
    assert set(OLLAMA_TUNING.unsupported()) == {"batch_size", "micro_batch_size"}
    result = validate(ServerSettings(batch_size=1024, micro_batch_size=256))
    assert "num_batch is a per-model option" in result.errors["batch_size"]
    assert "Models page" in result.errors["batch_size"]
    assert "micro_batch_size" in result.errors
    assert not any(name.endswith("BATCH") for name in environment(ServerSettings(batch_size=1024)))


def test_options_of_the_wrong_type_are_refused_and_not_passed_on() -> None:
    wrong = ServerSettings().with_options(gpu_overhead_mib="512", max_loaded_models=True, models_dir=3)
    errors = validate(wrong).errors
    assert errors["gpu_overhead_mib"] == "GPU overhead must be a whole number."
    assert errors["max_loaded_models"] == "Max loaded models must be a whole number."
    assert errors["models_dir"] == "Models directory must be text."
    assert environment(wrong) == environment(ServerSettings())


def test_only_ollamas_options_can_be_set_by_name() -> None:
    with pytest.raises(TypeError, match="not an Ollama option: max_batch"):
        ollama_settings(max_batch=8)
    assert [spec.name for spec in OLLAMA_TUNING.options] == [
        "max_loaded_models", "gpu_overhead_mib", "models_dir", "ollama_binary"]
    assert OLLAMA_TUNING.label("gpu_overhead_mib") == "GPU overhead"
    assert OLLAMA_TUNING.label("num_parallel") == "Parallel requests"
