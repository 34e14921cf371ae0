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


def streamed(fake) -> list[dict]:
    """The streamed chat requests' bodies (after a reply, the command counts its prompt with short probes)."""
    return [r.json for r in fake.requests if r.path == "/api/chat" and r.json.get("stream", True) is not False]


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
    assert data["events"] == [] and data["spoiled"] is False and "events during" not in proc.stderr


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
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["thinking_tokens"] == 0 and data["eval_count"] == 5 and data["done_reason"] == "length"
    sent = streamed(fake)[-1]
    assert sent["think"] is False and sent["options"] == {"num_predict": 5}
    assert "Stopped at the output cap of 5 tokens (num_predict); raise --num-predict (0: no cap)" in err


def test_replies_are_capped_by_default_and_0_lifts_the_cap(make_fake_ollama, capsys) -> None:
    fake = make_fake_ollama(tokens_per_s=1000.0, answer_tokens=6)
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "hi"]) == 0
    assert streamed(fake)[-1]["options"] == {"num_predict": 2048}
    assert "output cap" not in capsys.readouterr().err  # it ended by itself
    assert main(["prompt", "--model", "qwen3:14b", "--url", fake.url, "--no-think", "--num-predict", "0", "hi"]) == 0
    assert "num_predict" not in (streamed(fake)[-1].get("options") or {})


@pytest.mark.parametrize("args, text", [
    (["--model", "nope:1b", "--no-think"], "model 'nope:1b' not found — Pull it first with `ollama pull nope:1b`"),
    (["--model", "nope:1b", "--think"], "model 'nope:1b' not found — Pull it first with `ollama pull nope:1b`"),
    (["--model", "llama3.2:3b", "--think"], 'llama3.2:3b cannot think: it has no "thinking" capability (the server '
                                            "lists: completion, tools) — use --no-think"),
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
    err = capsys.readouterr().err
    assert "Cannot connect to Ollama at http://127.0.0.1:9" in err and "Start it with `ollama serve`" in err
    assert "page" not in err  # a shell user is told commands, not the GUI's pages


def test_backend_picks_the_servers_api_and_its_words(capsys) -> None:
    assert main(["prompt", "--backend", "llama_server", "--model", "m", "--url", "http://127.0.0.1:9", "--no-think",
                 "hi"]) == 1
    err = capsys.readouterr().err
    assert "llama-server at http://127.0.0.1:9" in err and "`llama-server -m MODEL.gguf" in err
    assert "`ollama-deck --demo`" in err and "page" not in err
    with pytest.raises(SystemExit) as exited:
        main(["prompt", "--backend", "vllm", "--model", "m", "--no-think", "hi"])
    assert exited.value.code == 2 and "'vllm' is not a backend; choose one of ollama, llama_server" in capsys.readouterr().err


@pytest.mark.engine
def test_prompt_on_the_real_llama_server(llama_server_binary: Path, bundled_model: Path, tmp_path: Path,
                                         capsys) -> None:
    from tests.backends.llama_server.engine_server import get, llama_server

    with llama_server(llama_server_binary, bundled_model, tmp_path, ("-np", "1", "-c", "2048", "-t", "2")) as server:
        url = server.base_url
        # Without --backend the Ollama API is not found there, and the message names the option that fixes it.
        assert main(["prompt", "--model", "any", "--url", url, "--no-think", "hi"]) == 1
        err = capsys.readouterr().err
        assert "not Ollama's API at that address" in err and "--backend (llama_server, openai)" in err
        name = json.loads(get(f"{url}/v1/models")[1])["data"][0]["id"]
        assert main(["prompt", "--backend", "llama_server", "--model", name, "--url", url, "--no-think",
                     "--num-predict", "8", "--temperature", "0", "--json", "Name a colour."]) == 0
        out, err = capsys.readouterr()
        data = json.loads(out)
        assert 1 <= data["eval_count"] <= 8 and data["answer"] and data["thinking"] == ""
        assert data["ttft_ms"] > 0 and data["eval_tokens_per_s"] > 0
        # SmolLM2's chat template has no thinking mode: --think is refused before anything is generated.
        assert main(["prompt", "--backend", "llama_server", "--model", name, "--url", url, "--think", "hi"]) == 1
        err = capsys.readouterr().err
        assert f"{name} cannot think: this model's chat template has no thinking mode" in err
        assert err.rstrip().endswith("use --no-think")
        assert main(["prompt", "--backend", "llama_server", "--model", "nope.gguf", "--url", url, "--think",
                     "hi"]) == 1
        assert "give --model the name it lists (GET /v1/models)" in capsys.readouterr().err


def test_a_mode_is_required(capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["prompt", "--model", "qwen3:14b", "hi"])
    assert exited.value.code == 2
    assert "one of the arguments --think --no-think --think-level is required" in capsys.readouterr().err
