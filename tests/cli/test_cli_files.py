"""The command line with its files in a bad state, as a real process: a folder given as --history is
refused untouched (exit 2), a garbage history is moved aside and said on stderr with both paths,
and folders that cannot be created never end `bench`, `estimate` or `prompt` in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fakes.ollama.server_fixtures import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def deck(*args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT), **env)
    return subprocess.run([sys.executable, "-m", "app", *args], env=full_env, capture_output=True, text=True,
                          timeout=120)


def _dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_a_folder_given_as_history_is_refused_and_left_alone(tmp_path):
    notes = tmp_path / "mybench"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    result = deck("bench", "--model", "m", "--url", _dead_url(), "--config-dir", str(tmp_path / "cfg"),
                  "--history", str(notes), "--quiet")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("ollama-deck bench: --history:") and f"{notes} is a folder" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mybench"]  # no mybench.corrupt-…, no new database
    assert [p.name for p in notes.iterdir()] == ["todo.txt"]


def test_a_history_under_a_regular_file_is_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = deck("bench", "--model", "m", "--url", _dead_url(), "--config-dir", str(tmp_path / "cfg"),
                  "--history", str(blocker / "h.sqlite3"), "--quiet")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"{blocker} is a file, not a folder" in line and blocker.read_text() == "x"


def test_a_garbage_history_is_moved_aside_and_said_on_stderr(tmp_path):
    # The app's own history file (the default place): damage there is moved aside, and said.
    folder = tmp_path / "data" / "ollama-deck"
    folder.mkdir(parents=True)
    history = folder / "benchmarks.sqlite3"
    history.write_bytes(b"grocery list " * 200)
    result = deck("bench", "--model", "m", "--url", _dead_url(), "--config-dir", str(tmp_path / "cfg"),
                  "--quiet", XDG_DATA_HOME=str(tmp_path / "data"))
    assert result.returncode == 1  # the server is not there; the history was dealt with first
    [kept] = [p for p in folder.iterdir() if ".corrupt-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert kept.read_bytes() == b"grocery list " * 200
    said = [line for line in result.stderr.splitlines() if "moved to" in line]
    assert said and str(history) in said[0] and str(kept) in said[0] and "Traceback" not in result.stderr


def test_unusable_folders_never_end_a_command_in_a_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = {"XDG_CONFIG_HOME": str(blocker / "config"), "XDG_DATA_HOME": str(blocker / "data")}
    url = _dead_url()
    bench = deck("bench", "--model", "m", "--url", url, "--quiet", **env)
    assert bench.returncode == 1 and "Cannot connect" in bench.stderr
    assert f"{blocker} is a file, not a folder. This run is not kept in the history." in bench.stderr
    for code, args in ((2, ("estimate", "--model", "qwen3:14b", "--ctx", "8192", "--url", url)),  # its documented code
                       (1, ("prompt", "--model", "m", "--no-think", "--url", url, "hello")),
                       (1, ("prompt", "--model", "m", "--no-think", "--config-dir", str(blocker / "cfg"), "hi"))):
        result = deck(*args, **env)
        assert result.returncode == code and "Cannot connect" in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr, args
    assert blocker.read_text() == "x"


def _bench_history_when_read_only(path: str) -> dict[str, object]:
    import argparse
    import contextlib
    import io

    from app.cli import bench as bench_command

    assert not os.access(path, os.W_OK)  # the condition under test holds
    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        history = bench_command._open_history(argparse.Namespace(history=path))
    return {"history": repr(history), "said": said.getvalue()}


def test_a_read_only_history_is_said_and_the_run_goes_on_without_it():
    from app.adapters.storage.history import BenchHistory
    from tests.adapters.storage.test_history import make_run
    from tests.adapters.storage.unwritable import reachable_folder, read_only, run_unprivileged

    with reachable_folder() as folder:
        path = folder / "history.sqlite3"
        BenchHistory(path).save(make_run())
        before = path.read_bytes()
        read_only(path)
        found = run_unprivileged(_bench_history_when_read_only, str(path))
        assert path.read_bytes() == before
    assert found["history"] == "None"  # the sweep runs and prints its table; nothing is written
    assert found["said"] == (f"ollama-deck bench: The benchmark history {path} is read-only; showing its runs, "
                             "new results will not be saved to it.\n")



def test_a_history_named_on_the_command_line_that_is_not_sqlite_is_refused_and_left_alone(tmp_path):
    """`--history results.json` (a slip for --json) must not move the user's file aside as a damaged history."""
    notes = tmp_path / "results.json"
    notes.write_text('{"mine": true}\n', encoding="utf-8")
    result = deck("bench", "--model", "m", "--url", _dead_url(), "--config-dir", str(tmp_path / "cfg"),
                  "--history", str(notes), "--quiet")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("ollama-deck bench: --history:")
    assert f"{notes} is not an SQLite file, so it is not a benchmark history; nothing was changed" in line
    assert notes.read_text(encoding="utf-8") == '{"mine": true}\n'
    assert not [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]


def test_a_damaged_settings_file_is_named_left_for_the_window_and_said_by_bench_and_prompt(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text("{ broken")
    url = _dead_url()
    for command, args in (("bench", ("--model", "m", "--url", url, "--quiet", "--no-history")),
                          ("prompt", ("--model", "m", "--no-think", "hi"))):
        result = deck(command, "--config-dir", str(cfg), *args)
        assert result.returncode == 1 and "Cannot connect" in result.stderr, result.stderr
        said = [line for line in result.stderr.splitlines() if "settings:" in line]
        assert said and str(cfg / "settings.json") in said[0] and "not valid JSON" in said[0], result.stderr
        assert "left as it is" in said[0] and "window moves it aside" in said[0]
    assert [p.name for p in cfg.iterdir()] == ["settings.json"]  # the window still finds it, to report it
    assert (cfg / "settings.json").read_text() == "{ broken"


def test_bench_for_llama_server_on_an_ollama_users_settings_warns_nothing_and_writes_nothing(tmp_path):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text(
        '{"version": 1, "settings": {"num_parallel": 2, "extra_env": "OLLAMA_DEBUG=1", "models_dir": "/srv/m"}}')
    before = (cfg / "settings.json").read_bytes()
    for _ in range(2):  # every start
        result = deck("bench", "--config-dir", str(cfg), "--backend", "llama_server", "--model", "m.gguf",
                      "--url", _dead_url(), "--quiet", "--no-history")
        assert result.returncode == 1 and "Cannot connect to llama-server" in result.stderr, result.stderr
        assert "refused" not in result.stderr and "settings:" not in result.stderr, result.stderr
    assert [p.name for p in cfg.iterdir()] == ["settings.json"] and (cfg / "settings.json").read_bytes() == before


def test_a_model_file_that_is_not_there_is_named(tmp_path):
    missing = tmp_path / "models" / "qwen3-14b-Q4_K_M.gguf"
    result = deck("bench", "--config-dir", str(tmp_path / "cfg"), "--backend", "llama_server", "--managed",
                  "--model", str(missing), "--url", _dead_url(), "--no-history")
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert f"--model {missing}: there is no such file" in line


def test_a_config_dir_that_is_a_file_is_refused_in_one_line(tmp_path):
    not_a_folder = tmp_path / "show.json"
    not_a_folder.write_text("{}")
    for args in (("bench", "--model", "m", "--url", _dead_url(), "--no-history"),
                 ("prompt", "--model", "m", "--no-think", "--url", _dead_url(), "hi")):
        result = deck(*args, "--config-dir", str(not_a_folder))
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.strip().splitlines() == [
            f"ollama-deck {args[0]}: --config-dir {not_a_folder} is a file, not a folder; give the folder that "
            "holds settings.json"]
    assert not_a_folder.read_text() == "{}"
