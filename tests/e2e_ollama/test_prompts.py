"""Prompts on the real Ollama 0.32.15 through the app's entry points: `ollama-deck prompt` reports the
figures of the server's own final record, `--think` on a model without thinking gets the real 400, and
a burst of copies all finish with their own records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient
from app.cli import main
from app.services.prompts import PromptOptions, PromptRequest, run_burst
from tests.e2e_ollama.wire_tap import WireTap
from tests.ollama_real_fixtures import MODEL_NAME

pytestmark = pytest.mark.ollama_real
ROOT = Path(__file__).resolve().parents[2]
NUM_PREDICT = 12
# Asks for far more than NUM_PREDICT tokens, so the reply ends at the cap ("length") whatever the model's build
# ("Say hello." ended on its own after 6 tokens with one build of the engine).
LONG_ANSWER = "Count from 1 to 100 in words, separated by commas."


def test_prompt_reports_the_figures_of_the_servers_final_record(make_real_ollama, tmp_path):
    server = make_real_ollama()
    tap = WireTap(server.port)
    try:
        done = subprocess.run([sys.executable, "-m", "app", "prompt", "--url", tap.url, "--model", MODEL_NAME,
                               "--no-think", "--num-predict", str(NUM_PREDICT), "--seed", "1", "--json", LONG_ANSWER,
                               "--config-dir", str(tmp_path / "cfg")],
                              capture_output=True, text=True, cwd=ROOT, timeout=180)
    finally:
        tap.close()
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    # the streamed reply's final record (counting the prompt after it gets one-object replies of its own)
    final = [line for line in tap.json_lines(streamed_only=True) if line.get("done") is True][-1]

    assert figures["done_reason"] == final["done_reason"] == "length"
    assert figures["eval_count"] == final["eval_count"] == NUM_PREDICT
    assert figures["prompt_eval_count"] == final["prompt_eval_count"]
    assert figures["answer_tokens"] == NUM_PREDICT and figures["thinking_tokens"] == 0
    assert figures["eval_tokens_per_s"] == pytest.approx(final["eval_count"] / final["eval_duration"] * 1e9, rel=1e-3)
    assert figures["prompt_tokens_per_s"] == pytest.approx(
        final["prompt_eval_count"] / final["prompt_eval_duration"] * 1e9, rel=1e-3)
    assert figures["load_ms"] == pytest.approx(final["load_duration"] / 1e6, rel=1e-3)
    assert figures["total_ms"] == pytest.approx(final["total_duration"] / 1e6, rel=1e-3)
    streamed = "".join(line["message"]["content"] for line in tap.json_lines() if line.get("done") is False)
    assert figures["answer"] == streamed and streamed


def test_think_on_a_model_without_thinking_is_refused_in_one_line_from_its_capabilities(make_real_ollama, capsys):
    # The real server's own capabilities (/api/show) say the model cannot think: refused before a chat is sent.
    server = make_real_ollama()
    code = main(["prompt", "--url", server.base_url, "--model", MODEL_NAME, "--think", "Hi"])
    err = capsys.readouterr().err
    assert code == 1
    assert f'{MODEL_NAME} cannot think: it has no "thinking" capability (the server lists: completion)' in err
    assert "--no-think" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "| 200 |" in server.logs.wait_for('"/api/show"')  # asked of the server itself
    assert not [line for line in server.logs.lines if '"/api/chat"' in line]  # and no chat was sent


def test_a_burst_of_copies_all_finish_with_their_own_final_records(make_real_ollama):
    server = make_real_ollama(OLLAMA_NUM_PARALLEL="2", OLLAMA_CONTEXT_LENGTH="1024")
    loop = LoopThread(name="e2e-burst-loop")

    async def burst():
        async with OllamaClient(server.base_url) as client:
            request = PromptRequest(MODEL_NAME, "Name a colour.", think=False,
                                    options=PromptOptions(num_predict=NUM_PREDICT, seed=1))
            return await run_burst(client, request, 4)

    try:
        outcomes = loop.run(burst(), timeout=180)
    finally:
        loop.stop()
    assert [o.index for o in outcomes] == [0, 1, 2, 3]
    assert all(o.ok for o in outcomes), [o.error.message for o in outcomes if o.error]
    for outcome in outcomes:
        assert outcome.stats.finished and outcome.stats.output_tokens == NUM_PREDICT
        assert outcome.stats.answer_tokens == NUM_PREDICT and outcome.content
    assert len(server.logs.wait_for_all(("| 200 |", '"/api/chat"'), 4)) == 4
    assert '-np 2' in server.logs.wait_for('msg="starting llama-server"')  # two served at once, two waited
