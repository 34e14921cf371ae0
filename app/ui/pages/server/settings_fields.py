"""Texts and choices the settings form shows; kept apart so the form's wiring stays readable."""

from __future__ import annotations

from app.core.server.exposure import exposure_of
from app.core.server.mapping import TuningMapping
from app.core.server.settings import ServerSettings

CONTEXT_PRESETS: tuple[int, ...] = (2048, 4096, 8192, 16384, 32768, 40960, 65536, 131072)
DEFAULT_CUSTOM_CONTEXT = 8192

KV_CACHE_CHOICES: tuple[tuple[str, str], ...] = (
    ("f16", "f16 — 2 bytes/element"),
    ("q8_0", "q8_0 — ≈1.06 bytes/element"),
    ("q4_0", "q4_0 — ≈0.56 bytes/element"),
)
# "auto" is labelled by the backend's mapping (e.g. "Auto — Ollama decides").
FLASH_ATTENTION_CHOICES: tuple[tuple[str, str], ...] = (
    ("on", "On"),
    ("off", "Off"),
)

PARALLEL_LABEL = "Parallel requests\n(batch size)"
PARALLEL_HINT = (
    "What articles call “batch size”: requests served at once per model. Each slot gets the full "
    "context, so the KV cache grows as context × parallel. Not num_batch, which is the "
    "prompt-processing batch of one model."
)
MAX_QUEUE_HINT = "Requests waiting beyond this are refused with 503 “server busy”."
BATCH_DEFAULT_TEXT = "Default"
BATCH_HINT = "Prompt tokens processed per step: larger prefills faster and needs a larger compute buffer."
MICRO_BATCH_HINT = "Tokens per physical step on the GPU; at most the batch."
KV_HINT = (
    "q8_0 halves the KV cache and is close to lossless; q4_0 quarters it. Both need flash attention."
)
FLASH_HINT = "Auto is on for qwen3. Off turns a q8_0/q4_0 KV cache back into f16."
KEEP_ALIVE_HINT = (
    "How long a model stays loaded after a request: 5m, 1h, 300 (seconds); -1 forever, "
    "0 unload at once."
)
HOST_HINT = "127.0.0.1 = this machine only; 0.0.0.0 or a LAN address opens the API to the network."
ALLOW_NETWORK_TEXT = "Allow network access"
ALLOW_NETWORK_TOOLTIP = (
    "Lets other machines (or, where the extra settings let other web sites in, the pages you open) reach "
    "this server. Its API "
    "has no authentication: anyone who can reach the port can run, pull and delete models. Given for "
    "this host only: changing the host unticks it."
)


def allow_network_text(host: str) -> str:
    """The permission checkbox's text, naming the host it is given for."""
    return f"{ALLOW_NETWORK_TEXT} on {host}" if host else ALLOW_NETWORK_TEXT
EXPOSED_ACTION = "Stop the server, or set Host to 127.0.0.1 and remove what opens it, to close it."


def exposure_notice(settings: ServerSettings, mapping: TuningMapping) -> str:
    """What the banner says when a managed server started with these settings is open to others ('' if not)."""
    warning = exposure_of(settings, mapping).warning()
    return f"{warning} {EXPOSED_ACTION}" if warning else ""


PREVIEW_INVALID_NOTE = "# Not valid yet: fix the fields marked in red."


def parse_context_text(text: str) -> int | None:
    """Tokens from '8192', '8,192', '32k' or '32K'; None if it is not a whole number."""
    cleaned = text.strip().replace(",", "").replace("_", "").replace(" ", "")
    multiplier = 1
    if cleaned[-1:] in ("k", "K"):
        cleaned, multiplier = cleaned[:-1], 1024
    if not (cleaned.isascii() and cleaned.isdigit()):
        return None
    return int(cleaned) * multiplier


CONTEXT_PARSE_ERROR = (
    "Context length must be a whole number of tokens, e.g. 8192 or 32k — or choose Default."
)
