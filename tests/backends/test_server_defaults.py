"""Each backend names its server's own default tuning, in the server's words, and starts the server that way
with the user's other settings kept."""

from __future__ import annotations

import pytest

from app.backends import registry
from app.backends.llama_server.tuning import arguments
from app.backends.ollama.tuning import environment
from app.core.server.settings import ServerSettings


@pytest.mark.parametrize("kind", sorted(registry.display_names()))
def test_every_backend_says_its_defaults_and_keeps_the_rest(kind: str) -> None:
    tuning = registry.get(kind).tuning
    base = ServerSettings(backend=kind, num_parallel=8, context_length=8192, kv_cache_type="q8_0",
                          flash_attention="on", host="127.0.0.1", port=18080)
    out = tuning.server_defaults.apply(base)
    assert tuning.server_defaults.words and all(w.strip() for w in tuning.server_defaults.words)
    assert (out.backend, out.host, out.port) == (kind, "127.0.0.1", 18080)
    assert out.context_length is None and out.kv_cache_type == "f16"


def test_llama_server_default_is_auto_parallel_with_a_unified_cache() -> None:
    # What llama-server does without -np (it logs "n_slots = 4, …, kv_unified = 'true'"): 4 slots, one shared
    # KV cache, the model's context; an explicit -np alone would turn the unified cache off.
    tuning = registry.get("llama_server").tuning
    args = arguments(tuning.server_defaults.apply(ServerSettings(backend="llama_server", num_parallel=2,
                                                                 context_length=4096, port=18080)))
    assert args[args.index("-np") + 1] == "4" and "--kv-unified" in args
    assert "-c" not in args and "-ctk" not in args and "-fa" not in args
    assert any(w.startswith("-np auto") for w in tuning.server_defaults.words)


def test_ollama_default_is_one_request_at_a_time_on_its_own_context() -> None:
    tuning = registry.get("ollama").tuning
    env = environment(tuning.server_defaults.apply(ServerSettings(backend="ollama", num_parallel=4,
                                                                  context_length=8192, kv_cache_type="q8_0")))
    assert env.get("OLLAMA_NUM_PARALLEL", "1") == "1"
    assert "OLLAMA_CONTEXT_LENGTH" not in env and "OLLAMA_FLASH_ATTENTION" not in env
    assert env.get("OLLAMA_KV_CACHE_TYPE", "f16") == "f16"
