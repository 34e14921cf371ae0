"""Core is the neutral model under every backend: no module of it names a server. What one server is called,
and which server the documents of earlier releases were for, come from the backends and the storage adapter."""

from __future__ import annotations

import re
from pathlib import Path

import app.core

CORE = Path(app.core.__file__).parent
# The servers ollama-deck drives or may drive; the app's own name, ollama-deck, is no server.
SERVER_NAMES = re.compile(r"ollama(?!-deck)|llama-server|llama_server|vllm|sglang", re.IGNORECASE)


def test_no_core_module_names_a_server() -> None:
    found = [f"{path.relative_to(CORE.parent.parent)}:{number}: {line.strip()}"
             for path in sorted(CORE.rglob("*.py"))
             for number, line in enumerate(path.read_text("utf-8").splitlines(), 1) if SERVER_NAMES.search(line)]
    assert found == []
    assert len(list(CORE.rglob("*.py"))) > 20  # the scan saw core's modules
