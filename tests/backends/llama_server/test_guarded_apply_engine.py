"""The guarded apply on the real llama-server with the bundled model: the model it serves is loaded,
so the check says so (llama-server lists no GPU/CPU split for it, unlike Ollama's /api/ps)."""

from __future__ import annotations

import pytest

from app.backends.llama_server.client import LlamaServerClient
from app.core.server.state import ServerState
from app.services.guarded_apply import GuardedApplier
from tests.backends.llama_server.test_supervisor import make_llama  # noqa: F401 - the fixture
from tests.fakes.scripted_gpu import ScriptedGpuBackend


async def _served(base_url: str) -> str:
    async with LlamaServerClient(base_url) as client:
        return (await client.tags())[0].name


@pytest.mark.engine
def test_an_apply_on_llama_server_checks_the_model_it_serves(make_llama) -> None:
    h = make_llama(num_parallel=1)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    good = h.supervisor.settings
    model = h.run(_served(good.base_url))
    records: list[dict] = []
    applier = GuardedApplier(h.supervisor, LlamaServerClient, ScriptedGpuBackend(available=False, reason="none"),
                             record=records.append)

    report = h.run(applier.apply(good.replace(num_parallel=2), good, model, None))

    assert report.judgement.keep and h.supervisor.settings.num_parallel == 2
    assert report.observation.model_loaded
    assert "no model was loaded" not in report.judgement.reason
    assert report.judgement.reason.startswith(f"{model} is loaded with the new settings")
    assert records[0]["observation"]["model_loaded"] is True
