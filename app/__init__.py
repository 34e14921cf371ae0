"""ollama-deck: a desktop control panel for a local Ollama server on one GPU."""

__version__ = "0.1.0"
