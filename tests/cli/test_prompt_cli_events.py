"""`ollama-deck prompt` prints what the server did without saying so during the reply, against the stand-in Ollama:
a prompt it cut to fit a short context (the real 0.32.15's context shift: a 200 and a prompt_eval_count far
below what was sent), a model it spilled to the CPU; --json carries the same events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.cli import main

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = 256
LONG_PROMPT = " ".join(f"Paragraph {i} says the cache holds every token the model has seen." for i in range(60))


def test_a_cut_prompt_is_reported_under_the_figures_with_both_numbers(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=5)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", LONG_PROMPT]) == 0  # exit unchanged
    out, err = capsys.readouterr()
    assert out == "Local inference speed is mostly\n"  # stdout keeps only the answer (5 tokens)
    figures, _, events = err.partition("\nevents during this reply (1):\n")
    assert "done_reason          stop" in figures
    used = CONTEXT // 2 + 2
    lines = events.splitlines()
    assert " SEVERE prompt cut short: The server used " in lines[0]
    assert f"used {used} of the " in lines[0] and f"at a context of {CONTEXT} tokens per slot" in lines[0]
    assert lines[1].startswith("    reply: prompt tokens sent ") and lines[1].endswith(f", used by the server {used}")
    sent = int(lines[1].split("sent ")[1].split(",")[0])
    assert sent > 3 * CONTEXT
    assert lines[2].startswith("    what to do: Raise the context per slot")
    assert lines[3] == "ollama-deck prompt: Not a clean reply: prompt cut short (see the events)."


def test_json_carries_the_events_through_the_real_entry_point(make_fake_ollama) -> None:
    fake = make_fake_ollama(context_length=CONTEXT, tokens_per_s=2000.0, prompt_tokens_per_s=1e6, answer_tokens=5)
    proc = subprocess.run([sys.executable, "-m", "app", "prompt", "--model", "qwen3:14b", "--url", fake.url,
                           "--no-think", "--json", "-"], input=LONG_PROMPT, capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # still exactly one JSON object
    (event,) = data["events"]
    assert event["kind"] == "prompt_truncated" and event["severity"] == "severe" and event["subject"] == "qwen3:14b"
    figures = event["evidence"][0]["figures"]
    assert figures["prompt_tokens_used"] == data["prompt_eval_count"] == CONTEXT // 2 + 2
    assert figures["prompt_tokens_sent"] > 3 * CONTEXT
    assert data["spoiled"] is True
    assert "SEVERE prompt cut short" in proc.stderr  # the lines go to stderr with the notes, in either mode


def test_a_model_the_server_spilled_to_the_cpu_is_reported_from_its_loaded_models(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(gpu_memory_bytes=4 << 30, tokens_per_s=2000.0, answer_tokens=3)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "--json", "hi"]) == 0
    out, err = capsys.readouterr()
    (event,) = json.loads(out)["events"]
    assert event["kind"] == "layers_on_cpu" and event["severity"] == "warning"
    assert event["evidence"][0]["source"] == "loaded"
    assert event["evidence"][0]["figures"]["size_vram_bytes"] == 4 << 30
    assert "WARNING layers on the CPU: qwen3:14b holds " in err and "(see the events)" in err


def test_a_short_prompt_on_a_whole_gpu_prints_no_events(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(tokens_per_s=2000.0, answer_tokens=3)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "hi"]) == 0
    err = capsys.readouterr().err
    assert "events during" not in err and "Not a clean reply" not in err
