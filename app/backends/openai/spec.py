"""Any OpenAI-compatible server as a backend (vLLM, SGLang, TGI, LM Studio's server, llama-server's or Ollama's
/v1): attached to, never started; chats streamed from /v1/chat/completions, models from /v1/models, token
counts from the stream's usage, the server's Prometheus /metrics where it has one."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from app.backends.openai.attached import APPLY_HINT, SETTINGS_THERE, make_attached
from app.backends.openai.endpoint import SESSION
from app.core.console.reply_words import ReplyWords
from app.core.lazy_import import lazy
from app.core.fixed_model_store import FixedModelStore
from app.core.ports.backend import BackendSpec, Capabilities, CommandWords
from app.core.server.mapping import MappingTexts, NeutralTuning
from app.core.server.settings import FIELD_LABELS, ServerSettings, Validation, validate

# The client side lives in app/backends/openai/client.py, the /metrics reader in app/backends/openai/metrics.py;
# both are imported on first use, so the spec stands without them.
CLIENT_MODULE = "app.backends.openai.client"
METRICS_MODULE = "app.backends.openai.metrics"

ATTACHED = ("An OpenAI-compatible server is started and configured on its own machine; ollama-deck attaches to it "
            "as a client")
NO_PULLS = (f"{ATTACHED} and cannot download models through it: the server serves the models it was "
            "started with (e.g. `vllm serve MODEL`); start it with another model where it runs.")
NO_VARIANTS = (f"{ATTACHED}; its context and batch are its start options (vLLM's --max-model-len and "
               "--max-num-batched-tokens, SGLang's --context-length), not model variants ollama-deck can create.")


def _lazy(name: str) -> Callable[..., Any]:
    return lazy(CLIENT_MODULE, name)


def server_telemetry(base_url: str) -> Any:
    """The server's /metrics reader (app/backends/openai/metrics.py's OpenAiTelemetry) for the URL a client would
    use, with this session's Authorization header and, for https, its certificate checked as the streams check it
    (--ca-bundle); it says itself when the server has no /metrics."""
    url = SESSION.resolve(base_url)
    metrics = importlib.import_module(METRICS_MODULE)
    transport = lazy(CLIENT_MODULE, "plain_transport")(url)
    return metrics.OpenAiTelemetry(url, headers=dict(SESSION.headers(url)), transport=transport)


class AttachedTuning(NeutralTuning):
    """The settings of a server ollama-deck does not start: none of them reach it (APPLY_HINT says where they
    are set); host and port only say where it is."""

    kind = "openai"
    delivery = "none"
    texts = MappingTexts(server_name="the OpenAI-compatible server",
                         context_default="Set where the server was started",
                         flash_auto="Set where the server was started",
                         mapping_title="Set on the server's own machine",
                         defaults_note="# ollama-deck does not start this server")

    def unsupported(self) -> Mapping[str, str]:
        """Every tuning field: the server was started with its own."""
        return {name: f"{label} is the OpenAI-compatible server's own start option. {APPLY_HINT}"
                for name, label in FIELD_LABELS.items() if name not in ("host", "port", "options", "backend")}

    def validate(self, settings: ServerSettings) -> Validation:
        """The shared checks (host and port)."""
        return validate(settings)

    def mapping_text(self, settings: ServerSettings) -> list[str]:
        """What would reach the server: nothing, and where its settings are."""
        return [f"# {APPLY_HINT}"]


OPENAI = BackendSpec(
    name="openai",
    display_name="OpenAI-compatible",
    capabilities=Capabilities(
        pull=False,  # the API has no download
        create=False,  # no variants: context and batch are the server's start options
        delete=False,  # the API deletes no models
        lists_loaded=False,  # /v1/models lists what it serves, never how much of it sits in VRAM
        load_unload=False,  # the server loads what it was started with
        restarts_with_settings=False,  # attached only: ollama-deck never starts or restarts it
        reports_slots=False,  # no /slots in the API
        server_metrics=True,  # Prometheus /metrics where the server has one (vLLM, SGLang, TGI); said when not
        thinking_control=True,  # chat_template_kwargs.enable_thinking: obeyed where server and template take it
    ),
    catalog=_lazy("OpenAiClient"),
    console=_lazy("OpenAiClient"),
    load_client=_lazy("load_client"),
    server=make_attached,
    model_rules=FixedModelStore(NO_PULLS, NO_VARIANTS),
    tuning=AttachedTuning(),
    # The /metrics reader where its module is there (it comes with app/backends/openai/metrics.py).
    server_telemetry=server_telemetry if importlib.util.find_spec(METRICS_MODULE) is not None else None,
    reply_words=ReplyWords(
        output_count="completion_tokens", count_header="completion\ntokens",
        decode_source="not reported: the API has no server times (TTFT and wall time are measured on this machine)",
        total_source="not reported: the API has no server times", stop_field="finish_reason",
        think_hint=("Sent as chat_template_kwargs.enable_thinking (a level as reasoning_effort). vLLM, SGLang and "
                    "llama-server hand it to the model's chat template, which decides (Qwen3's reads it); other "
                    "servers may ignore it, or refuse a field they do not know. The trace arrives as "
                    "reasoning_content or reasoning where the server splits it off (vLLM needs --reasoning-parser); "
                    "thinking tokens count in completion_tokens and delay the first answer token.")),
    command_words=CommandWords(
        start_hint=("Is the OpenAI-compatible server running, and is --url its base (http://HOST:PORT or "
                    "https://HOST/v1)? ollama-deck attaches to it and does not start it: start it on its machine, "
                    "e.g. `vllm serve MODEL`."),
        model_hint="Give --model an id the server lists (GET /v1/models).",
        a_server="an OpenAI-compatible server",
        first_model="Start the server with a model on its machine, e.g. `vllm serve MODEL`."),
    missing_reasons={
        "pull": NO_PULLS,
        "create": NO_VARIANTS,
        "delete": f"{ATTACHED}; its models are deleted where it runs, not through its API.",
        "lists_loaded": (f"{ATTACHED}; its API lists the models it serves but not how much of them "
                         "sits in VRAM (its /metrics may show the KV cache's share)."),
        "load_unload": (f"{ATTACHED}; it serves the models it was started with and its API cannot load "
                        "or unload one."),
        "restarts_with_settings": (f"{ATTACHED} and cannot restart it with settings: its context, "
                                   "batch and parallel requests are options of its own start command. "
                                   f"{SETTINGS_THERE}"),
        "reports_slots": ("The OpenAI API has no per-slot state; the server's /metrics (where it has one) gives "
                          "requests running and waiting instead."),
    },
)

__all__ = ["AttachedTuning", "NO_PULLS", "NO_VARIANTS", "OPENAI", "server_telemetry"]
