"""`ollama-deck bench --scenario` as a user runs it: a real process against the stand-in `ollama` and the
embedded engine, real files and the real history; bad names and files are refused with exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.adapters.storage.history import BenchHistory
from tests.fakes.ollama.server_fixtures import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "10"}
TWO_CLASSES = """
name = "support-and-review"
description = "questions at a rate, reviews in conversations"

[[classes]]
name = "questions"
prompt_tokens = { dist = "normal", mean = 20, sd = 5, min = 5, max = 40 }
output_tokens = 6
arrival = { kind = "poisson", rate_rps = 200 }
targets = { ttft_avg_ms = 60000, e2e_p95_ms = 60000 }

[[classes]]
name = "review"
prompt_tokens = { dist = "uniform", min = 10, max = 30 }
output_tokens = 8
turns = 2
system = "You review code."
arrival = { kind = "closed", concurrency = 1 }
"""


def bench(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **FAST, **env)
    return subprocess.run([sys.executable, "-m", "app", "bench", "--config-dir", str(tmp_path / "cfg"), *args],
                          env=full_env, capture_output=True, text=True, timeout=600)


def test_list_scenarios_prints_the_built_ins_with_the_articles_numbers(tmp_path):
    result = bench(tmp_path, "--list-scenarios")
    assert result.returncode == 0, result.stderr
    heads = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("scenario ")]
    assert heads == ["customer-qa", "long-document", "code-review", "content-generation", "mixed"]
    assert "~80 (sd 20, 20–200) prompt tokens → ~120 (sd 30, 30–300) out, 1 req/s Poisson" in result.stdout
    assert "~10200" in result.stdout and "0.2 req/s" in result.stdout
    assert "3-turn conversations, ~1200 prompt tokens on average with the history" in result.stdout


@pytest.mark.parametrize("args, words", [
    (["--scenario", "no-such"], "--scenario 'no-such' is neither a built-in scenario"),
    (["--scenario", "missing.toml"], "cannot read --scenario missing.toml: no such file"),
    (["--scenario", "mixed", "--rate", "2"], "--rate does not go with --scenario"),
    (["--scenario", "mixed", "--num-predict", "9"], "--num-predict does not go with --scenario"),
    (["--scale-lengths", "0.1"], "--scale-lengths scales a scenario's lengths; add --scenario"),
    (["--scenario", "mixed", "--scale-lengths", "2"], "--scale-lengths must be at most 1, got 2"),
])
def test_bad_scenario_arguments_are_refused_with_status_2(tmp_path, args, words):
    result = bench(tmp_path, "--model", "m", "--url", f"http://127.0.0.1:{free_port()}", *args)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("text, words", [
    ('name = "x"\n[[classes]]\nname = "a"\nprompt_tokens = 0\noutput_tokens = 5\n',
     "classes[0].prompt_tokens = 0: must be a token count from 1 to 1048576 (class 'a')"),
    ('name = "x"\n[[classes]]\nname = "a"\nprompt_tokens = 5\noutput_tokens = 5\nthinking_share = 1.5\n',
     "classes[0].thinking_share = 1.5: must be a number from 0 to 1 (class 'a')"),
    ('name = "x"\n[[classes]\n', "is not valid TOML"),
    ('{"name": "x", "classes": []}', "classes has 0 entries"),
])
def test_a_bad_scenario_file_names_the_field_the_value_and_the_range(tmp_path, text, words):
    path = tmp_path / ("bad.json" if text.startswith("{") else "bad.toml")
    path.write_text(text, encoding="utf-8")
    result = bench(tmp_path, "--model", "m", "--url", f"http://127.0.0.1:{free_port()}", "--scenario", str(path))
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_scenario_file_runs_per_class_and_is_kept_with_the_run(tmp_path, external_standin):
    server = external_standin(OLLAMA_NUM_PARALLEL="2", **FAST)
    path = tmp_path / "mine.toml"
    path.write_text(TWO_CLASSES, encoding="utf-8")
    history = tmp_path / "history.sqlite3"
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{server.port}", "--scenario",
                   str(path), "--requests", "8", "--concurrency", "1,2", "--json", "-", "--quiet", "--history",
                   str(history))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["scenario"]["name"] == "support-and-review"
    assert [p["concurrency"] for p in data["points"]] == [1, 2]  # the in-flight cap of each point
    for point in data["classes"]:
        by_name = {c["class"]: c for c in point["classes"]}
        # 8 requests split by weight: 200 req/s against 1 client.
        assert {n: (c["requests"], c["requests_ok"]) for n, c in by_name.items()} == {"questions": (7, 7),
                                                                                      "review": (1, 1)}
        assert by_name["questions"]["targets_met"] is True and by_name["review"]["targets_met"] is None
        assert by_name["questions"]["ttft_ms_p95"] > 0 and by_name["questions"]["output_tokens_per_s"] > 0
    # The table goes to stderr with --json -: the classes under it.
    assert "scenario support-and-review (2 classes)" in result.stderr and "targets met" in result.stderr
    (summary,) = BenchHistory(history).list_runs()
    run = BenchHistory(history).load(summary.run_id)
    assert run.spec.workload.scenario is not None and run.spec.workload.scenario.name == "support-and-review"
    records = [r for res in run.results for r in res.records if not r.warmup]
    assert {r.request_class for r in records} == {"questions", "review"}
    assert all(r.turn == 1 for r in records if r.request_class == "questions")


@pytest.mark.engine
@pytest.mark.parametrize("name, scale, requests, classes", [
    ("code-review", "0.02", "2", {"code-review": 2}),  # one conversation of two turns
    ("mixed", "0.01", "3", {"customer-qa": 1, "long-document": 1, "code-review": 1}),
])
def test_a_shortened_built_in_scenario_runs_on_the_embedded_engine(tmp_path, llama_server_binary, bundled_model,
                                                                    name, scale, requests, classes):
    out = tmp_path / "out.json"
    result = bench(tmp_path, "--demo", "--url", f"http://127.0.0.1:{free_port()}", "--scenario", name,
                   "--scale-lengths", scale, "--requests", requests, "--warmup", "1", "--no-history", "--quiet",
                   "--json", str(out))
    assert result.returncode == 0, result.stderr
    assert f"scenario {name} (" in result.stdout and f"lengths × {float(scale):g}" in result.stdout
    data = json.loads(out.read_text())
    assert data["scenario"]["scaled_by"] == float(scale)
    (point,) = data["classes"]
    counts = {c["class"]: (c["requests"], c["requests_ok"]) for c in point["classes"]}
    assert counts == {k: (v, v) for k, v in classes.items()}
    for c in point["classes"]:
        assert c["targets_met"] in (True, False) and c["prompt_tokens_mean"] > 0 and c["ttft_ms_mean"] > 0
        assert c["targets_met"] or c["targets_missed"]
    # llama-server counts each request's messages whole (/apply-template, /tokenize), after its reply: what it
    # should have counted is what it used, so no prompt was cut and the requested lengths are known.
    for p in data["points"]:
        assert p["requests_failed"] == 0 and "truncated" not in p["errors"], p
        assert p["prompt_tokens_requested_mean"] == p["prompt_tokens_delivered_mean"] > 0, p
