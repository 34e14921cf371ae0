"""The llama-server spec: truthful capabilities with reasons, its model rules, its supervisor, and
the --backend choice of the GUI and the headless commands."""

from __future__ import annotations

import argparse

import pytest

from app.backends import registry
from app.backends.llama_server.spec import LLAMA_SERVER, NO_PULLS, NO_VARIANTS
from app.backends.llama_server.supervisor import LlamaServerSupervisor
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.cli import _gui_parser
from app.cli.backend_arg import BACKEND_HELP, backend_name
from app.core.server.settings import ServerSettings
from tests.cli.cli_property import invoke


def test_the_registry_knows_llama_server_by_its_name():
    assert registry.get("llama_server") is LLAMA_SERVER
    assert LLAMA_SERVER.display_name == "llama-server" and LLAMA_SERVER.tuning is LLAMA_SERVER_TUNING
    assert LLAMA_SERVER.tuning.kind == LLAMA_SERVER.name  # the settings file keeps its options under the name


def test_capabilities_are_what_llama_server_offers_and_the_rest_says_why():
    assert LLAMA_SERVER.capabilities.names() == ["restarts_with_settings", "reports_slots",
                                                 "server_metrics", "thinking_control"]
    assert "not how much of it sits in VRAM" in LLAMA_SERVER.why_not("lists_loaded")
    assert LLAMA_SERVER.why_not("pull") == NO_PULLS and "GGUF file on disk" in NO_PULLS
    assert LLAMA_SERVER.why_not("create") == NO_VARIANTS
    assert "GGUF files are yours" in LLAMA_SERVER.why_not("delete")
    assert "restart" in LLAMA_SERVER.why_not("load_unload")
    assert LLAMA_SERVER.why_not("reports_slots") == ""


def test_model_rules_have_no_variants_or_quantize_targets():
    rules = LLAMA_SERVER.model_rules
    assert list(rules.quantize_choices) == []
    check = rules.check_variant("a.gguf", "b", 4096, None)
    assert not check.ok and check.body is None and check.errors["name"] == NO_VARIANTS
    assert rules.pull_failure_hint("qwen3:14b", "anything") == NO_PULLS
    assert rules.quantization_advice("qwen3:14b-fp8", None, None) == ""
    assert rules.variant_request_text({}) == NO_VARIANTS


def test_the_spec_makes_the_llama_server_supervisor(tmp_path):
    statuses: list[object] = []
    made = LLAMA_SERVER.server(ServerSettings(backend="llama_server", port=8081), on_status=statuses.append,
                               on_log=lambda _line: None, runtime_dir=tmp_path)
    assert isinstance(made, LlamaServerSupervisor) and made.settings.port == 8081
    assert LLAMA_SERVER.catalog.__name__ == "LlamaServerClient" and LLAMA_SERVER.load_client.__name__ == "load_client"


def test_backend_help_names_every_registered_backend():
    assert all(name in BACKEND_HELP for name in registry.names())
    assert backend_name("llama_server") == "llama_server"
    with pytest.raises(argparse.ArgumentTypeError, match="'vllm' is not a backend; choose one of ollama, llama_server"):
        backend_name("vllm")


def test_the_gui_takes_backend_and_refuses_an_unknown_one_in_one_line():
    assert _gui_parser().parse_args(["--backend", "llama_server"]).backend == "llama_server"
    assert _gui_parser().parse_args([]).backend is None  # main.py then uses the default backend
    code, out, err = invoke(["--backend", "vllm"])
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("ollama-deck: argument --backend: 'vllm' is not a backend")


@pytest.mark.parametrize("command", [["bench", "--model", "m"], ["estimate", "--model", "m", "--ctx", "4096"]])
def test_headless_commands_take_backend_too(command: list[str]):
    code, _out, err = invoke([*command, "--backend", "nope"])
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith(f"ollama-deck {command[0]}: argument --backend: 'nope' is not a backend")
