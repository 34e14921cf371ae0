"""The real-Ollama fixtures find the program (an `ollama` 0.32.15 on PATH with its runners, else the kit),
skip naming what is missing, and fail with DECK_REQUIRE_OLLAMA=1 (as CI runs them) — not with
DECK_REQUIRE_ENGINE=1, which is the embedded engine's switch: a fresh clone has the engine but no kit.
A child pytest asks for the kit with no `ollama` on PATH and DECK_OLLAMA_KIT pointing at a folder without
assemble.sh, or at an assemble.sh that fails as the real one does without libsqlite3-0."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ollama_real_fixtures as fixtures
from tests.ollama_real_fixtures import OFFLINE_ENV, OllamaKit, server_env

ROOT = Path(__file__).resolve().parents[1]


def run_child(tmp_path: Path, kit_dir: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_ollama.py").write_text(
        "import pytest\n\n@pytest.mark.ollama_real\ndef test_it(ollama_kit):\n    assert ollama_kit.ollama.exists()\n")
    tools = tmp_path / "tools"  # PATH: bash for assemble.sh, and no `ollama`
    tools.mkdir(exist_ok=True)
    if not (tools / "bash").exists():
        (tools / "bash").symlink_to(shutil.which("bash") or "/bin/bash")
    env = {key: value for key, value in os.environ.items()
           if key not in ("DECK_REQUIRE_ENGINE", "DECK_REQUIRE_OLLAMA", "DECK_OLLAMA_LAYOUT")}
    env.update(PYTHONPATH=str(ROOT), DECK_OLLAMA_KIT=str(kit_dir), PATH=str(tools))
    env.update(env_extra)
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
def test_without_a_real_ollama_it_skips_and_fails_only_when_ollama_is_required(tmp_path, make_kit, said):
    kit = make_kit(tmp_path)
    for env in ({}, {"DECK_REQUIRE_ENGINE": "1"}):  # the engine's switch does not govern Ollama
        skipped = run_child(tmp_path, kit, env)
        assert skipped.returncode == 0, skipped.stdout + skipped.stderr
        assert "1 skipped" in skipped.stdout and said.format(kit=kit) in skipped.stdout
        assert "no `ollama` on PATH" in skipped.stdout and "no real Ollama 0.32.15" in skipped.stdout

    failed = run_child(tmp_path, kit, {"DECK_REQUIRE_OLLAMA": "1"})
    assert failed.returncode == 1 and "1 error" in failed.stdout
    assert said.format(kit=kit) in failed.stdout and "DECK_REQUIRE_OLLAMA=1 is set" in failed.stdout


def _real_program(folder: Path) -> Path:
    """Ollama's own program from the kit, unpacked into folder/bin (skips, or fails when required, without the kit)."""
    packed = fixtures.kit_source() / f"ollama-{fixtures.OLLAMA_VERSION}-linux-amd64.gz"
    if not packed.is_file():
        fixtures.missing_ollama(f"the real Ollama kit is missing: no {packed}")
    program = folder / "bin" / "ollama"
    program.parent.mkdir(parents=True)
    with gzip.open(packed) as source, program.open("wb") as out:
        shutil.copyfileobj(source, out)
    program.chmod(0o755)
    return program


def test_an_ollama_on_path_is_used_only_with_its_runners_and_the_tested_version(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    program = _real_program(tmp_path / "opt")
    linked = tmp_path / "usr" / "bin" / "ollama"  # as a package manager links it onto PATH
    linked.parent.mkdir(parents=True)
    linked.symlink_to(program)
    on_path = lambda name: str(linked) if name == "ollama" else None  # noqa: E731

    said = fixtures.ollama_on_path(on_path)
    runners = tmp_path / "opt" / "lib" / "ollama"  # beside the real program, not beside the link
    assert said == (f"the `ollama` on PATH ({linked}) has no llama-server or llama-quantize in {runners}, "
                    "where Ollama looks for them")
    runners.mkdir(parents=True)
    for name in ("llama-server", "llama-quantize"):
        (runners / name).write_bytes(b"")
    assert fixtures.ollama_on_path(on_path) == program

    monkeypatch.setattr(fixtures, "OLLAMA_VERSION", "0.40.0")  # what the tests would check if they were newer
    assert fixtures.ollama_on_path(on_path) == (
        f"the `ollama` on PATH ({linked}) is version 0.32.15; these tests check Ollama 0.40.0")
    # Rejected, so the kit is looked for next, and both reasons are given when it is not there either.
    monkeypatch.setenv("DECK_OLLAMA_KIT", str(tmp_path / "absent"))
    said = fixtures.real_ollama_program(tmp_path / "dest", which=on_path)
    assert isinstance(said, str) and "is version 0.32.15" in said and f"no {tmp_path / 'absent'}/assemble.sh" in said


@pytest.mark.ollama_real
def test_a_real_ollama_on_path_is_preferred_to_the_kit(ollama_kit, tmp_path, monkeypatch):
    # The laid-out kit as an Ollama installed on PATH: found there, with no kit folder to lay out.
    monkeypatch.setenv("DECK_OLLAMA_KIT", str(tmp_path / "absent"))
    found = fixtures.real_ollama_program(tmp_path / "dest", which=lambda name: str(ollama_kit.ollama))
    assert found == ollama_kit.ollama.resolve() and not (tmp_path / "dest").exists()


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
