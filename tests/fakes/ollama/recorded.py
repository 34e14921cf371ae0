"""What the real Ollama 0.32.15 was recorded answering (tests/data/ollama/real/, written by
tests/data/ollama/record.py), for the stand-ins to replay: its version, its error texts, and the
bundled SmolLM2 as it lists and shows it."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from tests.fakes.ollama.fake_ollama_models import FakeModel

RECORDED_DIR = Path(__file__).resolve().parents[2] / "data" / "ollama" / "real"


@functools.cache
def exchanges() -> dict[str, Any]:
    """Every recorded exchange by name (see record.py for what each one asked)."""
    loaded: dict[str, Any] = json.loads((RECORDED_DIR / "exchanges.json").read_text(encoding="utf-8"))
    return loaded


def recorded_log(scenario: str) -> list[str]:
    """The lines one recorded server wrote (scenario: default, parallel2, queue1, q8_fa_off, q8_fa_auto)."""
    return (RECORDED_DIR / f"serve_{scenario}.log").read_text(encoding="utf-8").splitlines()


def body_of(name: str) -> Any:
    """The parsed body of one recorded exchange (JSON, a list of NDJSON lines, or text)."""
    record = exchanges()[name]
    for key in ("json", "ndjson", "text"):
        if key in record:
            return record[key]
    raise KeyError(f"{name} has no body")


def error_of(name: str) -> str:
    """The `error` text of a recorded refusal."""
    body = body_of(name)
    line = body[-1] if isinstance(body, list) else body
    return str(line["error"])


@functools.cache
def real_version() -> str:
    """The version the real server reported ("0.32.15")."""
    return str(body_of("version")["version"])


def kv_needs_flash_message() -> str:
    """The 500 every request gets with a quantized KV cache and flash attention off (llama-server exits)."""
    return error_of("q8_fa_off_chat")


def offline_pull_message(name: str) -> str:
    """The pull error of a server that cannot reach the registry, for `name` ("qwen3:0.6b")."""
    recorded = error_of("pull_offline_no_stream")
    repo, _, tag = name.partition(":")
    path = repo if "/" in repo else f"library/{repo}"
    return recorded.replace("library/qwen3/manifests/0.6b", f"{path}/manifests/{tag or 'latest'}")


def smollm2() -> FakeModel:
    """`smollm2:latest` as the real server listed and showed it (the bundled SmolLM2-135M, Q4_1)."""
    [entry] = body_of("tags")["models"]
    shown = body_of("show")
    details = entry["details"]
    return FakeModel(
        entry["name"], family=details["family"], parameter_size=details["parameter_size"],
        quantization_level=details["quantization_level"], size=entry["size"], digest=entry["digest"],
        capabilities=tuple(entry["capabilities"]), model_info=dict(shown["model_info"]),
        context_length=details["context_length"], parameters={"stop": ["<|im_start|>", "<|im_end|>"]},
        template=shown["template"], modified_at=entry["modified_at"], license="")
