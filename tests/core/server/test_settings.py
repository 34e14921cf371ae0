"""ServerSettings: the environment it produces, the rules it enforces, and its JSON form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hypothesis_settings
from hypothesis import strategies as st

from app.core.server.settings import (
    FIELD_ENV_VARIABLES,
    FIELD_LABELS,
    INVENTED_VARIABLES,
    ServerSettings,
    parse_keep_alive,
    validate,
)
from app.core.units import MIB


def test_defaults_are_valid_and_leave_ollama_defaults_unset() -> None:
    result = validate(ServerSettings())
    assert result.ok and result.errors == {} and result.warnings == {}
    assert ServerSettings().to_env() == {"OLLAMA_HOST": "127.0.0.1:11434", "OLLAMA_NUM_PARALLEL": "1"}


def test_every_knob_reaches_its_real_variable() -> None:
    s = ServerSettings(
        num_parallel=4, context_length=16384, kv_cache_type="q8_0", flash_attention="on",
        keep_alive="-1", max_loaded_models=1, max_queue=64, gpu_overhead_mib=512,
        host="0.0.0.0", port=11500, models_dir="/srv/models", allow_network=True,
        extra_env="# comment\nexport OLLAMA_DEBUG=\"1\"\n\nCUDA_VISIBLE_DEVICES=0",
    )
    assert s.to_env() == {
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
    assert ServerSettings(flash_attention="off").to_env()["OLLAMA_FLASH_ATTENTION"] == "0"
    assert set(FIELD_ENV_VARIABLES.values()) <= set(s.to_env())


def test_addresses() -> None:
    assert ServerSettings(host="0.0.0.0").base_url == "http://127.0.0.1:11434"
    assert ServerSettings(host="::", port=8080).base_url == "http://[::1]:8080"
    assert ServerSettings(host="::1").bind_address == "[::1]:11434"
    assert not ServerSettings(host="localhost").exposed_to_network
    assert ServerSettings(host="192.168.1.20").exposed_to_network


@pytest.mark.parametrize("kv, flash, error, warning", [
    ("f16", "off", False, False),
    ("q8_0", "on", False, False),
    ("q8_0", "auto", False, True),
    ("q4_0", "off", True, False),
])
def test_quantized_kv_needs_flash_attention(kv: str, flash: str, error: bool, warning: bool) -> None:
    result = validate(ServerSettings(kv_cache_type=kv, flash_attention=flash))
    assert ("kv_cache_type" in result.errors) is error
    assert ("kv_cache_type" in result.warnings) is warning
    if error:
        assert "needs flash attention" in result.errors["kv_cache_type"]
        assert "On" in result.errors["kv_cache_type"]


def test_network_binding_needs_explicit_consent() -> None:
    refused = validate(ServerSettings(host="0.0.0.0"))
    assert "Allow network access" in refused.errors["host"]
    assert "no authentication" in refused.errors["host"]
    allowed = validate(ServerSettings(host="0.0.0.0", allow_network=True))
    assert allowed.ok and "no authentication" in allowed.warnings["host"]
    assert validate(ServerSettings(host="localhost")).ok


@pytest.mark.parametrize("host, words", [
    ("", "empty"),
    ("http://127.0.0.1", "without a scheme"),
    ("127.0.0.1:11434", "Port field"),
    ("bad host!", "IP address or a hostname"),
])
def test_bad_hosts_say_what_to_write(host: str, words: str) -> None:
    assert words in validate(ServerSettings(host=host)).errors["host"]


@pytest.mark.parametrize("name", sorted(INVENTED_VARIABLES))
def test_invented_variables_are_refused_with_the_real_alternative(name: str) -> None:
    error = validate(ServerSettings(extra_env=f"{name}=8")).errors["extra_env"]
    assert f"{name} does not exist in Ollama" in error
    assert INVENTED_VARIABLES[name] in error


def test_extra_environment_rules() -> None:
    result = validate(ServerSettings(extra_env=(
        "OLLAMA_LOAD_TIMEOUT=10m\n"      # real: fine
        "OLLAMA_NUM_PARALEL=4\n"        # typo: warned
        "OLLAMA_HOST=0.0.0.0\n"         # owned by the form: refused
        "JUST_A_NAME\n"                 # no value: refused
        "9LIVES=1\n"                    # not a name: refused
        "CUDA_VISIBLE_DEVICES=0\nCUDA_VISIBLE_DEVICES=1\n"
    )))
    error, warning = result.errors["extra_env"], result.warnings["extra_env"]
    assert "line 3: OLLAMA_HOST is set by the form (host and port)" in error
    assert "line 4: JUST_A_NAME has no value" in error
    assert "line 5: '9LIVES' is not a valid variable name" in error
    assert "line 2: OLLAMA_NUM_PARALEL is not a variable Ollama is known to read" in warning
    assert "line 7: CUDA_VISIBLE_DEVICES is set twice" in warning
    assert "OLLAMA_LOAD_TIMEOUT" not in error + warning


@pytest.mark.parametrize("text, seconds", [
    ("5m", 300.0), ("1h30m", 5400.0), ("300", 300.0), ("-1", -1.0), ("0", 0.0),
    ("1.5h", 5400.0), ("-5m", -300.0), ("soon", None), ("5 m", None), ("", None),
])
def test_keep_alive_parsing(text: str, seconds: float | None) -> None:
    assert parse_keep_alive(text) == seconds


def test_field_ranges_and_warnings() -> None:
    result = validate(ServerSettings(
        num_parallel=0, context_length=100, keep_alive="later", max_loaded_models=65, max_queue=0,
        gpu_overhead_mib=-1, port=0, models_dir="~/models",
    ))
    assert set(result.errors) == {
        "num_parallel", "context_length", "keep_alive", "max_loaded_models", "max_queue",
        "gpu_overhead_mib", "port", "models_dir",
    }
    assert "does not expand ~" in result.errors["models_dir"]
    warned = validate(ServerSettings(
        num_parallel=16, context_length=10000, keep_alive="0", gpu_overhead_mib=2048, port=80,
        models_dir="models",
    ))
    assert warned.ok
    assert set(warned.warnings) == {
        "num_parallel", "context_length", "keep_alive", "gpu_overhead_mib", "port", "models_dir",
    }
    assert "32768 to 4096" in warned.warnings["gpu_overhead_mib"]
    assert validate(ServerSettings(models_dir="C:\\models")).ok


def test_from_json_reports_wrong_types_by_label() -> None:
    settings, problems = ServerSettings.from_json(
        {"num_parallel": "4", "context_length": None, "allow_network": "yes", "port": True, "x": 1}
    )
    assert settings == ServerSettings()
    assert problems == [
        "Parallel requests (num_parallel): '4' is not a whole number; using the default 1.",
        "Port (port): True is not a whole number; using the default 11434.",
        "Allow network access (allow_network): 'yes' is not true or false; using the default False.",
        "'x': not a setting this version knows; ignored.",
    ]
    assert ServerSettings.from_json([1])[1] == ["The settings are not a JSON object (list); using defaults."]


def test_every_field_has_a_label() -> None:
    assert set(FIELD_LABELS) == set(ServerSettings().to_json())


@hypothesis_settings(deadline=None)  # a loaded 2-core CI machine must not turn slowness into failure
@given(st.builds(
    ServerSettings,
    num_parallel=st.integers(-5, 100),
    context_length=st.none() | st.integers(0, 2_000_000),
    kv_cache_type=st.sampled_from(["f16", "q8_0", "q4_0", "fp8"]),
    flash_attention=st.sampled_from(["auto", "on", "off"]),
    keep_alive=st.text(max_size=8),
    host=st.text(max_size=20),
    extra_env=st.text(max_size=60),
    allow_network=st.booleans(),
))
def test_json_round_trip_and_validate_never_raises(settings: ServerSettings) -> None:
    assert ServerSettings.from_json(settings.to_json()) == (settings, [])
    validate(settings)
