"""The real-Ollama fixtures skip naming what is missing, and fail with DECK_REQUIRE_ENGINE=1 (as CI runs
them): a child pytest asks for the kit with DECK_OLLAMA_KIT pointing at a folder without assemble.sh,
or at an assemble.sh that fails as the real one does without libsqlite3-0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ollama_real_fixtures import OFFLINE_ENV, OllamaKit, server_env

ROOT = Path(__file__).resolve().parents[1]


def run_child(tmp_path: Path, kit_dir: Path, require: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_ollama.py").write_text(
        "import pytest\n\n@pytest.mark.ollama_real\ndef test_it(ollama_kit):\n    assert ollama_kit.ollama.exists()\n")
    env = {key: value for key, value in os.environ.items()
           if key not in ("DECK_REQUIRE_ENGINE", "DECK_OLLAMA_LAYOUT")}
    env.update(PYTHONPATH=str(ROOT), DECK_OLLAMA_KIT=str(kit_dir))
    if require is not None:
        env["DECK_REQUIRE_ENGINE"] = require
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ollama_real_fixtures", "-p", "no:cacheprovider", "-rs", "-q",
         "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_needs_ollama.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def no_sqlite_kit(tmp_path: Path) -> Path:
    """A kit folder whose assemble.sh ends as the real one does when the program cannot load libsqlite3."""
    kit = tmp_path / "kit"
    kit.mkdir()
    script = kit / "assemble.sh"
    script.write_text('#!/usr/bin/env bash\necho "ollama needs libsqlite3-0 (Debian package)" >&2\nexit 1\n')
    script.chmod(0o755)
    return kit


@pytest.mark.parametrize("make_kit, said", [
    (lambda tmp: tmp / "absent", "no {kit}/assemble.sh (set DECK_OLLAMA_KIT"),
    (no_sqlite_kit, "ollama needs libsqlite3-0 (Debian package); install it with: apt-get install -y libsqlite3-0"),
])
def test_a_kit_that_cannot_be_laid_out_skips_then_fails_when_required(tmp_path, make_kit, said):
    kit = make_kit(tmp_path)
    skipped = run_child(tmp_path, kit, require=None)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "1 skipped" in skipped.stdout and said.format(kit=kit) in skipped.stdout

    failed = run_child(tmp_path, kit, require="1")
    assert failed.returncode == 1 and "1 error" in failed.stdout
    assert said.format(kit=kit) in failed.stdout and "DECK_REQUIRE_ENGINE=1 is set" in failed.stdout


def test_each_server_gets_its_own_home_models_and_port_offline_and_no_inherited_knobs(tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_NUM_PARALLEL", "9")
    monkeypatch.setenv("OLLAMA_HOST", "0.0.0.0:11434")
    kit = OllamaKit(tmp_path / "kit" / "bin" / "ollama", tmp_path / "model.gguf")
    env = server_env(kit, tmp_path / "home", tmp_path / "models", 40123, {"OLLAMA_MAX_QUEUE": "1"})
    assert (env["HOME"], env["OLLAMA_MODELS"], env["OLLAMA_HOST"]) == (
        str(tmp_path / "home"), str(tmp_path / "models"), "127.0.0.1:40123")
    assert "OLLAMA_NUM_PARALLEL" not in env and env["OLLAMA_MAX_QUEUE"] == "1"
    assert all(env[name] == value for name, value in OFFLINE_ENV.items())
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "kit" / "bin")
