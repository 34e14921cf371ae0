"""ServerSettings: the shared rules it enforces, its backend options and its JSON form."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hypothesis_settings
from hypothesis import strategies as st

from app.core.server.mapping import NeutralTuning
from app.adapters.storage.saved_format import SAVED_FORMAT
from app.core.server.settings import (
    FIELD_LABELS,
    ServerSettings,
    parse_keep_alive,
    validate,
)


def test_defaults_are_valid() -> None:
    result = validate(ServerSettings())
    assert result.ok and result.errors == {} and result.warnings == {}
    assert NeutralTuning().mapping_text(ServerSettings()) == []


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
    allowed = validate(ServerSettings(host="0.0.0.0", network_allowed_for="0.0.0.0"))
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


@pytest.mark.parametrize("text, seconds", [
    ("5m", 300.0), ("1h30m", 5400.0), ("300", 300.0), ("-1", -1.0), ("0", 0.0),
    ("1.5h", 5400.0), ("-5m", -300.0), ("soon", None), ("5 m", None), ("", None),
])
def test_keep_alive_parsing(text: str, seconds: float | None) -> None:
    assert parse_keep_alive(text) == seconds


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
    extra_settings=st.text(max_size=60),
    batch_size=st.none() | st.integers(-1, 100_000),
    network_allowed_for=st.text(max_size=20) | st.sampled_from(["0.0.0.0", "::", "192.168.1.5"]),
))
def test_json_round_trip_and_validate_never_raises(settings: ServerSettings) -> None:
    assert ServerSettings.from_json(settings.to_json()) == (settings, [])
    validate(settings)


def test_batch_sizes_default_to_the_server_and_are_checked() -> None:
    assert ServerSettings().batch_size is None and ServerSettings().micro_batch_size is None
    assert validate(ServerSettings(batch_size=2048, micro_batch_size=512)).ok
    assert "between 1 and" in validate(ServerSettings(batch_size=0)).errors["batch_size"]
    too_big = validate(ServerSettings(batch_size=256, micro_batch_size=512)).errors["micro_batch_size"]
    assert "cannot be larger than the batch (256)" in too_big


def test_options_are_kept_sorted_and_compare_equal_however_given() -> None:
    a = ServerSettings().with_options(zeta=1, alpha="x")
    b = ServerSettings(options=(("alpha", "x"), ("zeta", 1)))
    assert a == b and hash(a) == hash(b) and a.options == (("alpha", "x"), ("zeta", 1))
    assert a.option("alpha") == "x" and a.option("missing", 7) == 7
    assert a.with_options(alpha=None) == ServerSettings().with_options(zeta=1)
    assert ServerSettings().with_options(gpu_overhead_mib=512).gpu_overhead_mib == 512
    assert ServerSettings().with_options(gpu_overhead_mib="lots").gpu_overhead_mib == 0


def test_a_format_1_flat_dict_reads_with_its_backend_knobs_as_options() -> None:
    # As format 1 wrote ServerSettings.to_json() (also inside older run documents).
    flat = {"num_parallel": 4, "context_length": 16384, "kv_cache_type": "q8_0", "flash_attention": "on",
            "keep_alive": "-1", "max_loaded_models": 2, "max_queue": 64, "gpu_overhead_mib": 512,
            "host": "0.0.0.0", "port": 11500, "models_dir": "/srv/models", "extra_env": "OLLAMA_DEBUG=1",
            "ollama_binary": "/opt/ollama/bin/ollama", "allow_network": True}
    settings, problems = ServerSettings.from_json(flat, SAVED_FORMAT)
    assert problems == []
    assert settings == ServerSettings(
        num_parallel=4, context_length=16384, kv_cache_type="q8_0", flash_attention="on", keep_alive="-1",
        max_queue=64, host="0.0.0.0", port=11500, extra_settings="OLLAMA_DEBUG=1",
        network_allowed_for="0.0.0.0", backend="ollama",
    ).with_options(max_loaded_models=2, gpu_overhead_mib=512, models_dir="/srv/models",
                   ollama_binary="/opt/ollama/bin/ollama")
    assert settings.backend == "ollama"


def test_options_of_the_wrong_shape_are_reported() -> None:
    settings, problems = ServerSettings.from_json({"options": {"a": [1], "b": 2}})
    assert settings.options == (("b", 2),)
    assert problems == ["Server options (options): 'a' = [1] is not text, a number or true/false; "
                        "using the server's default."]
    assert ServerSettings.from_json({"options": 5})[1] == [
        "Server options (options): 5 is not an object; using the server's defaults."]


def test_neutral_mapping_writes_the_changed_fields() -> None:
    neutral = NeutralTuning()
    assert neutral.mapping_text(ServerSettings(num_parallel=4, batch_size=1024)) == [
        "num_parallel = 4", "batch_size = 1024"]
    assert neutral.validate(ServerSettings(port=0)).errors == {"port": "Port must be between 1 and 65535."}
    assert neutral.options == () and neutral.unsupported() == {} and neutral.setting_name("num_parallel") == ""

