"""What a failed `ollama pull` means, in words a user can act on."""

from __future__ import annotations

# Texts the Ollama server passes on when it cannot reach the registry.
NETWORK_FAILURE_TEXTS = ("dial tcp", "no such host", "i/o timeout", "network is unreachable",
                         "connection refused", "tls handshake", "context deadline exceeded",
                         "temporary failure in name resolution", "connection reset")


def pull_failure_hint(model: str, message: str) -> str:
    """What to do about a failed pull, from Ollama's message."""
    low = message.lower()
    if "file does not exist" in low or "not found" in low:
        return (f"The registry has no '{model}'. Check the name and tag on ollama.com/library "
                "(e.g. qwen3:14b, qwen3:14b-q8_0); Ollama has no FP8 tags.")
    if any(text in low for text in NETWORK_FAILURE_TEXTS):
        return ("The Ollama server could not reach the registry: check this computer's network, "
                "proxy (HTTPS_PROXY for the server) and firewall, then pull again; downloaded "
                "layers are kept and the pull resumes.")
    if "no space left" in low:
        return "The disk holding the models is full; delete unused models or move OLLAMA_MODELS."
    return "See the server log for details; pulling again resumes from the layers already downloaded."


__all__ = ["NETWORK_FAILURE_TEXTS", "pull_failure_hint"]
