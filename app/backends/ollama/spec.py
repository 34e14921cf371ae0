"""Ollama as a backend: what the real Ollama 0.32 server and API offer (see ollama-facts.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Set
from typing import Any

from app.backends.ollama import pull_hints, variant
from app.backends.ollama.child_telemetry import server_telemetry
from app.backends.ollama.client import OllamaClient, load_client
from app.backends.ollama.log_signals import ollama_log_signals
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.probe import OLLAMA_PROCESS
from app.backends.ollama.supervisor import ServerSupervisor
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.console.reply_words import ReplyWords
from app.core.ports.backend import BackendSpec, Capabilities, CommandWords


class OllamaModelRules:
    """Ollama's /api/create checks, its quantize targets, FP8 advice and pull-failure hints."""

    @property
    def quantize_choices(self) -> Sequence[str]:
        """The `quantize` targets /api/create accepts from an F16/F32/BF16 base."""
        return variant.QUANTIZE_CHOICES

    def check_variant(self, base: str, name: str, num_ctx: int | None, num_batch: int | None, quantize: str = "",
                      *, local_names: Set[str] = frozenset(), base_quantization: str = "",
                      training_context: int | None = None, parameter_count: int | None = None,
                      gpu_total_bytes: int | None = None) -> variant.VariantCheck:
        """The create form checked as /api/create would take it (see variant.check_variant)."""
        return variant.check_variant(base, name, num_ctx, num_batch, quantize, local_names=frozenset(local_names),
                                     base_quantization=base_quantization, training_context=training_context,
                                     parameter_count=parameter_count, gpu_total_bytes=gpu_total_bytes)

    def quantization_advice(self, typed: str, parameter_count: int | None, gpu_total_bytes: int | None) -> str:
        """Why an FP8 tag does not exist in Ollama and what the real choices cost; empty otherwise."""
        return variant.fp8_explanation(parameter_count, gpu_total_bytes) if variant.mentions_fp8(typed) else ""

    def pull_failure_hint(self, model: str, message: str) -> str:
        """What to do after a failed pull (network, disk, registry)."""
        return pull_hints.pull_failure_hint(model, message)

    def variant_request_text(self, body: Mapping[str, Any]) -> str:
        """`POST /api/create` with its JSON body."""
        return f"POST /api/create {json.dumps(dict(body))}"


# What Ollama calls a reply's figures: the fields of its final record (eval_count, done_reason, …).
OLLAMA_WORDS = ReplyWords(
    output_count="eval_count", count_header="eval\ncount", decode_source="eval_count / eval_duration",
    total_source="total_duration", stop_field="done_reason",
    think_hint=("Sent as the request's think field. Thinking tokens count in eval_count and delay the first "
                "answer token."))

OLLAMA = BackendSpec(
    name="ollama",
    display_name="Ollama",
    capabilities=Capabilities(
        pull=True,  # POST /api/pull, streamed progress per layer
        create=True,  # POST /api/create from an existing model with new parameters or quantization
        delete=True,  # DELETE /api/delete
        lists_loaded=True,  # GET /api/ps with size and size_vram
        load_unload=True,  # an empty /api/generate loads; keep_alive 0 unloads
        restarts_with_settings=True,  # OLLAMA_* variables are read when `ollama serve` starts
        reports_slots=True,  # from 0.30: its llama-server child's /slots, at the port its log names
        server_metrics=False,  # no /metrics, and the child is started without --metrics
        thinking_control=True,  # `think` on /api/chat and /api/generate
    ),
    catalog=OllamaClient,
    console=OllamaClient,
    load_client=load_client,
    prompt_counter=OllamaClient,  # a probe's prompt_eval_count: cut like the request beyond the context
    server=ServerSupervisor,
    model_rules=OllamaModelRules(),
    tuning=OLLAMA_TUNING,
    planner=OLLAMA_PLANNER,  # Ollama's own context default, automatic batch and placement by version
    server_telemetry=server_telemetry,  # the child's /slots, read once a second while Ollama runs
    reply_words=OLLAMA_WORDS,
    command_words=CommandWords(
        start_hint=("Is Ollama running? Start it with `ollama serve` (or `ollama-deck`, which starts it from its "
                    "window), or point --url at it."),
        model_hint="Pull it first with `ollama pull {model}`, or check the name and tag (`ollama list`).",
        a_server="an Ollama",
        first_model="Pull one: `ollama pull qwen3:0.6b` (0.5 GB; any from https://ollama.com/library works)."),
    process=OLLAMA_PROCESS,
    log_signals=ollama_log_signals,  # its own lines and its llama-server child's, as its log carries them
    missing_reasons={
        "server_metrics": ("Ollama has no /metrics endpoint and starts its llama-server without --metrics; "
                           "throughput is measured from the replies to ollama-deck's own requests."),
    },
)

__all__ = ["OLLAMA", "OllamaModelRules"]
