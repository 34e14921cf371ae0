"""The model store on the real Ollama 0.32.15 through the app's client: a pull without network fails with
the server's own words (streamed: an in-band error after `pulling manifest`; not streamed: a 500), and
a tuned variant is created, listed, shown and deleted."""

from __future__ import annotations

import http.client
import re
import json

import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.spec import OllamaModelRules
from app.core.errors import ModelNotFound, ServerError
from tests.ollama_real_fixtures import MODEL_NAME

pytestmark = pytest.mark.ollama_real
OFFLINE_PULL = "pull model manifest: Get \"https://registry.ollama.ai/v2/library/qwen3/manifests/0.6b\""


@pytest.fixture
def loop():
    thread = LoopThread(name="e2e-models-loop")
    yield thread
    thread.stop()


def test_a_pull_without_network_fails_with_the_servers_words_streamed_and_not(make_real_ollama, loop):
    server = make_real_ollama()
    seen: list[str] = []

    async def pull() -> ServerError:
        async with OllamaClient(server.base_url) as client:
            try:
                async for progress in client.pull("qwen3:0.6b"):
                    seen.append(progress.status)
            except ServerError as exc:
                return exc
        raise AssertionError("the pull succeeded without a network")

    error = loop.run(pull(), timeout=60)
    assert seen == ["pulling manifest"]
    assert error.message.startswith(OFFLINE_PULL) and "connection refused" in error.message
    assert "could not reach the registry" in OllamaModelRules().pull_failure_hint("qwen3:0.6b", error.message)

    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        connection.request("POST", "/api/pull", json.dumps({"model": "qwen3:0.6b", "stream": False}),
                           {"Content-Type": "application/json"})
        reply = connection.getresponse()
        body = json.loads(reply.read())
    finally:
        connection.close()
    assert reply.status == 500 and body == {"error": error.message}


def test_a_variant_is_created_listed_shown_and_deleted(make_real_ollama, tmp_path, loop):
    server = make_real_ollama(models=tmp_path / "own-models")  # this test writes the store: its own
    server.create_model()
    variant = "smollm2-ctx1k"
    statuses: list[str] = []

    async def create_and_delete() -> tuple[list[str], dict, list[str], Exception]:
        async with OllamaClient(server.base_url) as client:
            async for status in client.create(variant, MODEL_NAME, parameters={"num_ctx": 1024}):
                statuses.append(status)
            listed = [m.name for m in await client.tags()]
            shown = await client.show(variant)
            await client.delete(variant)
            after = [m.name for m in await client.tags()]
            try:
                await client.delete(variant)
            except ModelNotFound as exc:
                return listed, {"parameters": shown.parameters, "architecture": shown.architecture}, after, exc
        raise AssertionError("a second delete of the same model succeeded")

    listed, shown, after, again = loop.run(create_and_delete(), timeout=120)
    assert statuses[-1] == "success" and "writing manifest" in statuses
    assert f"{variant}:latest" in listed and f"{MODEL_NAME}:latest" in listed
    assert re.search(r"^num_ctx\s+1024$", shown["parameters"], re.MULTILINE), shown["parameters"]
    assert shown["architecture"] == "llama"
    assert after == [f"{MODEL_NAME}:latest"]
    assert again.message == f"model '{variant}' not found"
    assert server.logs.wait_for('"/api/delete"').split("|")[1].strip() == "200"
