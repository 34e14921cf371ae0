"""`ollama-deck prompt`, run as a real subprocess against the real Ollama 0.32.15 with a short context
(OLLAMA_CONTEXT_LENGTH=256) and a prompt of about 550 tokens: Ollama answers 200 and says nothing,
its prompt_eval_count far below what was sent; the command counts the prompt in Ollama's own tokens (piece by
piece, each piece within the context) and prints the PROMPT_TRUNCATED event with both numbers."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ollama_real_fixtures import MODEL_NAME

pytestmark = pytest.mark.ollama_real
ROOT = Path(__file__).resolve().parents[2]
CONTEXT = 256
# About 550 of SmolLM2's tokens: counted in pieces of 256 characters, about ten short probes (each a request on
# the CPU, seconds apiece on a busy machine).
PROMPT = " ".join(f"Note {i}: the cache keeps every token the model has read so far." for i in range(40))
LINE = re.compile(r"SEVERE prompt cut short: The server used (\d+) of the (\d+) prompt tokens sent \(counted in the "
                  rf"server's tokens\) at a context of {CONTEXT} tokens per slot and said nothing")


def test_the_prompt_command_prints_the_cut_with_both_numbers(make_real_ollama) -> None:
    server = make_real_ollama(OLLAMA_CONTEXT_LENGTH=str(CONTEXT))
    proc = subprocess.run([sys.executable, "-m", "app", "prompt", "--model", MODEL_NAME, "--url", server.base_url,
                           "--no-think", "--num-predict", "8", "--temperature", "0", "--json", "-"],
                          input=PROMPT, capture_output=True, text=True, cwd=ROOT, timeout=400)
    assert proc.returncode == 0, proc.stderr  # a reply with an event still exits 0
    data = json.loads(proc.stdout)
    found = LINE.search(proc.stderr)
    assert found, proc.stderr
    used, sent = int(found.group(1)), int(found.group(2))
    assert used == data["prompt_eval_count"] <= CONTEXT  # what Ollama kept, at most its context
    assert sent > 2 * CONTEXT  # the whole prompt, counted in Ollama's tokens
    assert f"    reply: prompt tokens sent {sent}, used by the server {used}" in proc.stderr
    assert "    what to do: Raise the context per slot" in proc.stderr
    assert "ollama-deck prompt: Not a clean reply: prompt cut short (see the events)." in proc.stderr
    (event,) = [e for e in data["events"] if e["kind"] == "prompt_truncated"]
    assert event["severity"] == "severe" and data["spoiled"] is True
    assert event["evidence"][0]["figures"] == {"prompt_tokens_sent": sent, "prompt_tokens_used": used}
