"""llama.cpp's llama-server as a backend: one GGUF file served over an OpenAI-style API, with
/metrics and /slots; its model files are the user's own (nothing is pulled, made or deleted)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.backends.llama_server.log_signals import log_signal_reader
from app.backends.llama_server.metrics import server_telemetry
from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.backends.llama_server.probe import LLAMA_SERVER_PROCESS
from app.backends.llama_server.supervisor import make_supervisor
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING, models_dir
from app.core.console.reply_words import ReplyWords
from app.core.lazy_import import attribute, lazy
from app.core.fixed_model_store import FixedModelStore, NoVariant
from app.core.ports.backend import BackendSpec, Capabilities, CommandWords
from app.core.server.settings import ServerSettings

# The client side (chat streaming, the GGUF catalog) lives in app/backends/llama_server/client.py as
# `LlamaServerClient` (console and catalog) and `load_client`; it is looked up when first used, so
# the server side stands without it.
CLIENT_MODULE = "app.backends.llama_server.client"

NO_VARIANTS = ("llama-server serves the GGUF file you choose as it is; it has no model variants to create. "
               "Set the context per slot and the batch on the Server page instead; a different quantization is "
               "a different GGUF file (llama.cpp's llama-quantize makes one).")
NO_PULLS = ("llama-server does not download models: choose a GGUF file on disk (the Server page's model file, "
            "or a file from the models folder).")


def _client_attribute(name: str) -> Any:
    return attribute(CLIENT_MODULE, name)


def _lazy(name: str) -> Callable[..., Any]:
    return lazy(CLIENT_MODULE, name)


def _bind(spec: BackendSpec, settings: Callable[[], ServerSettings]) -> BackendSpec:
    """The spec whose catalog and console list the models folder of the settings in force."""
    def client(base_url: str, **kwargs: Any) -> Any:
        return _client_attribute("LlamaServerClient")(base_url, models_dir=models_dir(settings()) or None, **kwargs)

    client.__name__ = client.__qualname__ = "LlamaServerClient"
    return replace(spec, catalog=client, console=client, prompt_counter=client, binder=None)


class LlamaServerModelRules(FixedModelStore):
    """llama-server's model store is a set of GGUF files: no quantize targets, no variants, no pulls."""

    def __init__(self) -> None:
        super().__init__(NO_PULLS, NO_VARIANTS)


LLAMA_SERVER = BackendSpec(
    name="llama_server",
    display_name="llama-server",
    capabilities=Capabilities(
        pull=False,  # GGUF files are the user's; nothing is downloaded through the server
        create=False,  # no variants: flags apply to the whole server
        delete=False,  # the files are the user's to delete
        lists_loaded=False,  # it names the model it serves, but not how much of it sits in VRAM
        load_unload=False,  # the model is loaded at start and stays until the server stops
        restarts_with_settings=True,  # flags are read when llama-server starts
        reports_slots=True,  # GET /slots (--slots, always on)
        server_metrics=True,  # GET /metrics (--metrics, always on)
        thinking_control=True,  # chat_template_kwargs.enable_thinking, where the model's template takes it
    ),
    catalog=_lazy("LlamaServerClient"),
    console=_lazy("LlamaServerClient"),
    load_client=_lazy("load_client"),
    prompt_counter=_lazy("LlamaServerClient"),  # POST /tokenize and /apply-template: exact, whatever the length
    server=make_supervisor,
    model_rules=LlamaServerModelRules(),
    tuning=LLAMA_SERVER_TUNING,
    planner=LLAMA_SERVER_PLANNER,  # the settings as given, the model's context when none is set
    server_telemetry=server_telemetry,  # /metrics and /slots, read once a second while it runs
    binder=_bind,  # the catalog lists the settings' models folder beside the served file
    log_signals=log_signal_reader,  # its own log: slots and context per slot, layers placed, shifts, a full cache
    reply_words=ReplyWords(
        output_count="predicted_n", count_header="predicted\ntokens", decode_source="timings.predicted_per_second",
        total_source="prompt_ms + predicted_ms", stop_field="finish_reason",
        think_hint=("Sent as chat_template_kwargs.enable_thinking, where the model's template takes it; the trace "
                    "comes apart as reasoning_content. Thinking tokens count in predicted_n and delay the first "
                    "answer token.")),
    command_words=CommandWords(
        start_hint=("Is llama-server running? Start it with `llama-server -m MODEL.gguf --port PORT` and point --url "
                    "at it, or run `ollama-deck --demo`, which starts the embedded engine (its address is in the "
                    "window's header)."),
        model_hint=("llama-server serves the one model it was started with: give --model the name it lists "
                    "(GET /v1/models), or restart it with -m on another GGUF file."),
        a_server="a llama-server",
        first_model=("Start llama-server with a model: `llama-server -m MODEL.gguf --port PORT`, or run "
                     "`ollama-deck --demo` (the embedded engine and its small model).")),
    process=LLAMA_SERVER_PROCESS,
    missing_reasons={
        "lists_loaded": ("llama-server names the model it serves but not how much of it sits in VRAM; the "
                         "dashboard's VRAM graph shows what the server process holds."),
        "pull": NO_PULLS,
        "create": NO_VARIANTS,
        "delete": "llama-server does not delete models: its GGUF files are yours; remove them in your file manager.",
        "load_unload": ("llama-server loads its one model when it starts and keeps it until it stops; to serve "
                        "another file, choose it on the Server page and restart."),
    },
)

__all__ = ["LLAMA_SERVER", "LlamaServerModelRules", "NO_PULLS", "NO_VARIANTS", "NoVariant"]
