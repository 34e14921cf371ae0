"""`ollama-deck bench --scenario … --rate-sweep` as a user runs it: a real process against the stand-in
`ollama` and the embedded engine, real files, the real history and a real PNG; bad input is refused with exit
status 2 and one line."""

from __future__ import annotations

import json

import pytest

from app.adapters.storage.history import BenchHistory
from tests.cli.test_bench_scenario import FAST, bench
from tests.fakes.ollama.server_fixtures import free_port

QUESTIONS = """
name = "questions"

[[classes]]
name = "questions"
prompt_tokens = 8
output_tokens = 6
arrival = { kind = "poisson", rate_rps = 2 }
targets = { e2e_p95_ms = 60000 }

[[classes]]
name = "chat"
prompt_tokens = 8
output_tokens = 4
arrival = { kind = "closed", concurrency = 1 }
"""
# Few tokens, a loose target: the ladder climbs fast and breaks where the CPU cannot keep up.
ONE_CLASS = """
name = "questions"

[[classes]]
name = "questions"
prompt_tokens = 8
output_tokens = 12
arrival = { kind = "poisson", rate_rps = 2 }
targets = { e2e_p95_ms = 20000 }
"""


@pytest.mark.parametrize("args, words", [
    (["--rate-sweep"], "--rate-sweep raises a scenario's arrival rates; add --scenario NAME|FILE"),
    (["--scenario", "content-generation", "--rate-sweep"], "scenario content-generation has no open-loop class"),
    (["--scenario", "customer-qa", "--rate-sweep", "fast"], "--rate-sweep the rate 'fast' is not a number"),
    (["--scenario", "customer-qa", "--rate-sweep", "8:1"], "the stop (1) is below the start (8)"),
    (["--scenario", "customer-qa", "--rate-sweep", "0:4"], "the start 0 must be above 0"),
    (["--scenario", "customer-qa", "--rate-sweep", "1:2:3"], "write START:STOP in requests/s"),
    (["--scenario", "customer-qa", "--rate-sweep", "--refine", "99"], "the refining steps (99) must be from 0 to 10"),
    (["--scenario", "customer-qa", "--refine", "2"], "--refine goes with --rate-sweep"),
    (["--scenario", "customer-qa", "--chart", "x.png"], "--chart goes with --rate-sweep"),
    (["--scenario", "customer-qa", "--rate-sweep", "--chart", "x.svg"], "--chart x.svg: name a .png file"),
])
def test_bad_rate_sweep_arguments_are_refused_with_status_2(tmp_path, args, words):
    result = bench(tmp_path, "--model", "m", "--url", f"http://127.0.0.1:{free_port()}", *args)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def check_capacity(capacity: dict) -> None:
    """What holds for every capacity, whatever the server's speed."""
    steps = capacity["steps"]
    rates = [s["offered_rps"] for s in steps]
    assert rates == sorted(rates) and len(set(rates)) == len(rates)
    for s in steps:
        assert s["met"] == (not s["misses"])
        assert s["offered_rps"] == pytest.approx(sum(s["offered_per_class"].values()))
    missed = [s for s in steps if not s["met"]]
    bad = missed[0]["offered_rps"] if missed else None
    good = [s for s in steps if s["met"] and (bad is None or s["offered_rps"] < bad)]
    expected = good[-1]["offered_rps"] if good else None
    assert capacity["sustainable_rps"] == expected and capacity["broke_at_rps"] == bad
    status = "never_met" if expected is None else "never_broke" if bad is None else "found"
    assert capacity["status"] == status
    if expected is not None:
        assert capacity["requests_per_day"] == pytest.approx(expected * 86_400)
        assert capacity["class_mix"] == good[-1]["offered_per_class"]
    assert capacity["broke_by"] == (missed[0]["misses"] if missed else [])


def test_a_rate_sweep_on_an_attached_server_is_printed_exported_charted_and_kept(tmp_path, external_standin):
    server = external_standin(OLLAMA_NUM_PARALLEL="2", **FAST)
    path = tmp_path / "questions.toml"
    path.write_text(QUESTIONS, encoding="utf-8")
    history, out, chart = tmp_path / "history.sqlite3", tmp_path / "out.json", tmp_path / "load.png"
    result = bench(tmp_path, "--model", "qwen3:0.6b", "--url", f"http://127.0.0.1:{server.port}", "--scenario",
                   str(path), "--rate-sweep", "1,2,4", "--requests", "8", "--json", str(out), "--csv",
                   str(tmp_path / "out.csv"), "--markdown", str(tmp_path / "out.md"), "--chart", str(chart),
                   "--history", str(history))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    capacity = data["capacity"]
    check_capacity(capacity)
    assert capacity["unscaled_classes"] == ["chat"]
    # The closed-loop class runs alongside, not scaled; the open-loop one at each rate asked.
    assert [s["offered_per_class"] for s in capacity["steps"]][:1] == [{"questions": 1.0}]
    assert "capacity step 1 at 1 req/s: measuring" in result.stderr
    assert "Capacity of questions at no client cap" in result.stdout
    assert capacity["summary"] in result.stdout and "closed-loop chat ran alongside, not scaled" in result.stdout
    assert "The rate sweep ran at the sweep's one setting" in result.stdout
    steps_csv = (tmp_path / "out-capacity.csv").read_text().splitlines()
    assert steps_csv[0].startswith("setting,factor,offered_rps") and len(steps_csv) == 1 + len(capacity["steps"])
    assert "## Capacity" in (tmp_path / "out.md").read_text()
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (summary,) = BenchHistory(history).list_runs()
    kept = BenchHistory(history).load(summary.run_id).capacity
    assert kept is not None and kept.summary() == capacity["summary"]
    assert [s.offered_rps for s in kept.steps] == [s["offered_rps"] for s in capacity["steps"]]
    assert all(s.records and s.stats.requests == len([r for r in s.records if not r.warmup]) for s in kept.steps)


@pytest.mark.engine
def test_a_rate_sweep_on_the_embedded_engine_finds_where_its_targets_break(tmp_path, llama_server_binary,
                                                                           bundled_model):
    path = tmp_path / "questions.toml"
    path.write_text(ONE_CLASS, encoding="utf-8")
    out = tmp_path / "out.json"
    result = bench(tmp_path, "--demo", "--url", f"http://127.0.0.1:{free_port()}", "--scenario", str(path),
                   "--rate-sweep", "1,64", "--refine", "1", "--requests", "6", "--warmup", "1",
                   "--ttft-p95-ms", "60000", "--tpot-p95-ms", "60000", "--no-history", "--quiet", "--json", str(out))
    assert result.returncode == 0, result.stderr
    capacity = json.loads(out.read_text())["capacity"]
    check_capacity(capacity)
    assert capacity["steps"], capacity
    for step in capacity["steps"]:
        assert step["stats"]["requests"] == 6 and step["stats"]["ttft_ms_mean"] is not None or not step["met"]
        assert {c["class"] for c in step["classes"]} == {"questions"}
    assert capacity["summary"] in result.stdout
