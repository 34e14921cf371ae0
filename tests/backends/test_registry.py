"""The backend registry and Ollama's spec: what the composition roots pick and what pages ask."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.backends import registry
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.spec import OLLAMA
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.ports.backend import Capabilities
from app.core.server.settings import ServerSettings


def test_the_registry_names_ollama_and_refuses_an_unknown_backend():
    assert registry.names() == ["ollama", "llama_server", "openai"]
    assert registry.get() is OLLAMA and registry.get("ollama") is OLLAMA
    with pytest.raises(KeyError, match="unknown backend 'vllm'; known: ollama, llama_server, openai"):
        registry.get("vllm")


def test_ollamas_capabilities_are_what_the_real_server_offers():
    assert OLLAMA.display_name == "Ollama" and OLLAMA.tuning.delivery == "environment"
    assert OLLAMA.tuning.kind == OLLAMA.name  # the settings file keeps its options under the backend's name
    assert OLLAMA.capabilities.names() == ["pull", "create", "delete", "lists_loaded", "load_unload",
                                           "restarts_with_settings", "reports_slots", "thinking_control"]
    # Slots: those of the llama-server child Ollama 0.30+ runs, at the port its log names.
    assert OLLAMA.can("reports_slots") and OLLAMA.why_not("reports_slots") == ""
    assert OLLAMA.server_telemetry is not None
    assert not OLLAMA.can("server_metrics") and "/metrics" in OLLAMA.why_not("server_metrics")
    assert "without --metrics" in OLLAMA.why_not("server_metrics")
    assert OLLAMA.why_not("pull") == ""


def test_a_missing_capability_without_its_own_words_names_the_backend():
    bare = Capabilities()
    assert bare.names() == []
    spec = replace(OLLAMA, display_name="Some server", capabilities=bare, missing_reasons={})
    assert spec.why_not("create") == "Some server does not offer this (create)."
    with pytest.raises(KeyError, match="unknown capability 'fly'"):
        spec.can("fly")


def test_the_spec_makes_ollamas_client_and_supervisor():
    statuses: list[object] = []
    supervisor = OLLAMA.server(ServerSettings(port=11500), on_status=statuses.append, on_log=lambda _line: None)
    assert isinstance(supervisor, ServerSupervisor) and supervisor.settings.port == 11500
    assert OLLAMA.catalog is OllamaClient


def test_ollamas_model_rules_speak_for_its_model_store():
    rules = OLLAMA.model_rules
    assert list(rules.quantize_choices) == ["q4_K_M", "q4_K_S", "q8_0"]
    assert "no FP8" in rules.quantization_advice("qwen3:14b-fp8", 14_768_307_200, 24 * 1024**3)
    assert rules.quantization_advice("qwen3:14b-q8_0", None, None) == ""
    check = rules.check_variant("qwen3:14b", "qwen3-14b-16k", 16384, None, local_names={"qwen3:14b"})
    assert check.ok and check.body == {"model": "qwen3-14b-16k", "from": "qwen3:14b",
                                       "parameters": {"num_ctx": 16384}}
    assert "network" in rules.pull_failure_hint("qwen3:14b", "dial tcp: lookup registry.ollama.ai: no such host")
