"""`ollama-deck prompt` against the stand-in Ollama: streams, figures, JSON, errors, default URL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.storage.settings_store import SettingsStore
from app.cli import main
from app.core.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parents[2]
JSON_KEYS = ("ttft_ms", "first_answer_ms", "thinking_tokens", "answer_tokens", "eval_count", "eval_tokens_per_s",
             "prompt_eval_count", "prompt_tokens_per_s", "load_ms", "total_ms", "done_reason")


def test_json_through_the_real_entry_point(make_fake_ollama) -> None:
    fake = make_fake_ollama(tokens_per_s=300.0, thinking_tokens=15, answer_tokens=24)
    proc = subprocess.run([sys.executable, "-m", "app", "prompt", "--model", "qwen3:14b", "--url", fake.url,
                           "--think", "--json", "Why is decode memory-bound?"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert all(key in data for key in JSON_KEYS)
    assert (data["thinking_tokens"], data["answer_tokens"], data["eval_count"]) == (15, 24, 39)
    assert data["eval_tokens_per_s"] == pytest.approx(300.0, rel=0.03)
    assert data["done_reason"] == "stop" and data["ttft_ms"] < data["first_answer_ms"]
    assert data["answer"].startswith("Local inference") and data["thinking"].startswith("Okay,")
    assert "thinking> Okay," in proc.stderr  # the live text still shows, on stderr


def test_answer_to_stdout_marked_thinking_and_figures_to_stderr(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0, thinking_tokens=6, answer_tokens=8)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--think", "hi"]) == 0
    out, err = capsys.readouterr()
    assert out == "Local inference speed is mostly bounded by memory\n"  # 8 tokens, then a newline
    assert err.startswith("thinking> Okay, the user wants a short\n")
    assert "time to first token" in err and "done_reason          stop" in err
    assert "thinking tokens      6" in err and "eval_count           14" in err


def test_no_think_and_num_predict_are_sent(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "--num-predict", "5",
                 "--json", "hi"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["thinking_tokens"] == 0 and data["eval_count"] == 5 and data["done_reason"] == "length"
    assert fake.requests[-1].json["think"] is False and fake.requests[-1].json["options"] == {"num_predict": 5}


@pytest.mark.parametrize("args, text", [
    (["--model", "nope:1b", "--no-think"], "model 'nope:1b' not found — Pull the model first"),
    (["--model", "llama3.2:3b", "--think"], '"llama3.2:3b" does not support thinking — this model has no '
                                            "thinking mode; use --no-think."),
])
def test_server_refusals_exit_1_with_ollamas_message(make_fake_ollama, capsys, args, text) -> None:
    fake = make_fake_ollama()
    assert main(["prompt", "--url", fake.url, *args, "hi"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and text in err


def test_an_in_band_error_after_some_text_exits_1(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0)
    fake.fail_next("midstream_error", path="/api/chat", after_chunks=3)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "hi"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("Local inference speed")
    assert "an error was encountered while running the model: unexpected EOF" in err


def test_the_saved_settings_give_the_default_url(make_fake_ollama, capsys, tmp_path: Path) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0, answer_tokens=3)
    SettingsStore(tmp_path).save(ServerSettings(port=fake.port))
    assert main(["prompt", "--model", "qwen3:14b", "--config-dir", str(tmp_path), "--no-think", "--json", "hi"]) == 0
    assert json.loads(capsys.readouterr().out)["eval_count"] == 3


def test_nothing_listening_is_a_clear_error(capsys) -> None:
    assert main(["prompt", "--model", "qwen3:14b", "--url", "http://127.0.0.1:9", "--no-think", "hi"]) == 1
    assert "Cannot connect to Ollama at http://127.0.0.1:9" in capsys.readouterr().err


def test_a_mode_is_required(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["prompt", "--model", "qwen3:14b", "hi"])
    assert exited.value.code == 2
    assert "one of the arguments --think --no-think --think-level is required" in capsys.readouterr().err
