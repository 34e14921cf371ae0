"""Ollama as a backend: what the real Ollama 0.32 server and API offer (see ollama-facts.md)."""

from __future__ import annotations

from app.backends.ollama.client import OllamaClient
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.ports.backend import BackendSpec, Capabilities

OLLAMA = BackendSpec(
    name="ollama",
    display_name="Ollama",
    # OLLAMA_* variables are read when `ollama serve` starts, so a change needs a restart.
    settings_mapping="environment",
    capabilities=Capabilities(
        pull=True,  # POST /api/pull, streamed progress per layer
        create=True,  # POST /api/create from an existing model with new parameters or quantization
        delete=True,  # DELETE /api/delete
        lists_loaded=True,  # GET /api/ps with size and size_vram
        load_unload=True,  # an empty /api/generate loads; keep_alive 0 unloads
        restarts_with_settings=True,
        reports_slots=False,  # Ollama exposes no per-slot state
        server_metrics=False,  # nor a /metrics endpoint
        thinking_control=True,  # `think` on /api/chat and /api/generate
    ),
    catalog=OllamaClient,
    server=ServerSupervisor,
    missing_reasons={
        "reports_slots": "Ollama does not report per-slot state; requests in flight are counted by ollama-deck.",
        "server_metrics": "Ollama has no /metrics endpoint; throughput is measured from the replies.",
    },
)

__all__ = ["OLLAMA"]
