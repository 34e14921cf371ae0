"""The names the files earlier releases wrote use (settings, bench history, run documents): the first
releases drove only Ollama, so a document that names no server is Ollama's, settings format 1 kept
Ollama's own knobs beside the shared fields, and a run's server version is saved as "ollama_version"."""

from __future__ import annotations

from app.core.saved_format import SavedFormat

SAVED_FORMAT = SavedFormat(
    default_backend="ollama",
    option_fields=("max_loaded_models", "gpu_overhead_mib", "models_dir", "ollama_binary"),
    fingerprint_keys={"server_version": "ollama_version"},
)

__all__ = ["SAVED_FORMAT"]
