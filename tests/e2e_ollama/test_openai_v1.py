"""The openai backend against the real Ollama 0.32.15's OpenAI-compatible /v1: its model list, a streamed reply's
usage, a model it does not have, and the prompt command with --backend openai."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.backends.openai.client import OpenAiClient
from app.core.errors import ModelNotFound
from app.core.replies import StreamChunk
from tests.bounded import run_within
from tests.ollama_real_fixtures import MODEL_NAME

pytestmark = pytest.mark.ollama_real
ROOT = Path(__file__).resolve().parents[2]
HI = [{"role": "user", "content": "Count from 1 to 20."}]
run = functools.partial(run_within, timeout=180.0)


def test_ollamas_v1_lists_its_models_and_streams_usage(make_real_ollama):
    server = make_real_ollama()

    async def go() -> tuple[list[str], list[StreamChunk]]:
        async with OpenAiClient(server.base_url + "/v1") as client:
            ids = [m.name for m in await client.tags()]
            chunks = [c async for c in client.chat(MODEL_NAME, HI, options={"num_predict": 8, "seed": 1})]
            return ids, chunks

    ids, chunks = run(go)
    assert any(i.split(":")[0] == MODEL_NAME for i in ids)
    final = chunks[-1].final
    assert chunks[-1].done and final is not None
    assert final.output_tokens is not None and 0 < final.output_tokens <= 8
    assert final.prompt_tokens is not None and final.prompt_tokens > 0
    assert final.done_reason == "length"
    assert "".join(c.content for c in chunks).strip()


def test_a_model_ollama_does_not_have_is_model_not_found(make_real_ollama):
    server = make_real_ollama()

    async def go() -> None:
        async with OpenAiClient(server.base_url) as client:
            async for _chunk in client.chat("no-such-model", HI):
                pass

    with pytest.raises(ModelNotFound, match="no-such-model"):
        run(go)


def test_the_prompt_command_on_ollamas_v1(make_real_ollama, tmp_path):
    server = make_real_ollama()
    done = subprocess.run([sys.executable, "-m", "app", "prompt", "--backend", "openai", "--url",
                           server.base_url + "/v1", "--model", MODEL_NAME, "--no-think", "--num-predict", "6",
                           "--json", "--config-dir", str(tmp_path / "cfg"), "Say hello."],
                          capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert 0 < report["eval_count"] <= 6 and report["eval_tokens_per_s"] is None and report["ttft_ms"] > 0
