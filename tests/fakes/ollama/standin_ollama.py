"""A stand-in `ollama` executable for tests of the server supervisor.

`ollama --version`, `ollama serve` and `ollama runner` behave like the real program: `serve` reads
the OLLAMA_* environment, writes Ollama-style log lines to stderr, serves the stand-in HTTP API
(tests/fakes/fake_ollama.FakeOllama), spawns one child runner process, and exits 0 on SIGTERM after
stopping that runner. Failure modes are chosen with FAKE_OLLAMA_* variables (see FAILURE_VARIABLES).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from collections.abc import Mapping

from app.core.units import GIB, KIB, MIB

PROJECT_ROOT = Path(__file__).resolve().parents[3]
if __name__ == "__main__":  # run as a program: the project's modules below need the project on the path
    sys.path.insert(0, str(PROJECT_ROOT))

from tests.fakes.ollama.fake_ollama_loadlog import runs_llama_server  # noqa: E402
from tests.fakes.ollama.recorded import real_version  # noqa: E402
from tests.fakes.ollama.standin_log import go_duration, server_config_line, slog_line  # noqa: E402, F401 - go_duration: re-exported

DEFAULT_VERSION = real_version()  # what the real server reported (tests/data/ollama/real/)
ORPHAN_LINGER_S = 30.0

FAILURE_VARIABLES: dict[str, str] = {
    "FAKE_OLLAMA_VERSION": "version reported by --version, GET /api/version and the log (default: the recorded "
                           "real one, 0.32.15); before 0.30 the log and a quantized KV cache are 0.12's",
    "FAKE_OLLAMA_OFFLINE": "1: no registry can be reached: pulls fail with the real server's offline error",
    "FAKE_OLLAMA_START_DELAY_S": "seconds to wait before listening (slow start)",
    "FAKE_OLLAMA_HANG_ON_START": "1: never listen (start hangs in GPU discovery)",
    "FAKE_OLLAMA_CRASH_AFTER_S": "crash this many seconds after the process started",
    "FAKE_OLLAMA_CRASH_EXIT_CODE": "exit code of that crash (default 2, as a Go panic)",
    "FAKE_OLLAMA_CRASH_MESSAGE": "final error line of that crash (default: a Go nil-pointer panic)",
    "FAKE_OLLAMA_IGNORE_SIGTERM": "1: server and runner ignore SIGTERM (only SIGKILL stops them)",
    "FAKE_OLLAMA_OOM_ON_LOAD": "1: the first model load fails with CUDA out of memory (HTTP 500)",
    "FAKE_OLLAMA_OOM_ABOVE_MIB": "every load needing more than this many MiB (weights + KV for context x "
                                 "parallel + graph) fails with CUDA out of memory (HTTP 500)",
    "FAKE_OLLAMA_GPU_MIB": "GPU memory in MiB: a load needing more is split, the rest on the CPU "
                           "(/api/ps size_vram < size)",
    "FAKE_OLLAMA_UNFINISHED_PROMPT": "a streamed reply to a prompt holding this text ends properly but without its "
                                     "final `done: true` record, as Ollama 0.32.15 ends some replies",
    "FAKE_OLLAMA_UNFINISHED_AFTER": "tokens such a reply sends before it ends (default 3)",
}

# Pacing of the stand-in's replies (FakeOllama's keyword, and how to read the value).
PACING_VARIABLES: dict[str, tuple[str, type, str]] = {
    "FAKE_OLLAMA_TOKENS_PER_S": ("tokens_per_s", float, "decode rate of one reply, tokens/s (default 200)"),
    "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": ("prompt_tokens_per_s", float, "prompt processing rate, tokens/s"),
    "FAKE_OLLAMA_ANSWER_TOKENS": ("answer_tokens", int, "answer tokens per reply (default 30)"),
    "FAKE_OLLAMA_THINKING_TOKENS": ("thinking_tokens", int, "thinking tokens per reply when thinking"),
    "FAKE_OLLAMA_LOAD_S": ("load_s", float, "seconds a model load takes"),
    "FAKE_OLLAMA_DECODE_SLOWDOWN": ("decode_slowdown", float,
                                    "per-token time grows by this fraction per other busy slot"),
}


def pacing_from_env(env: Mapping[str, str]) -> dict[str, object]:
    """FakeOllama keywords from the FAKE_OLLAMA_* pacing variables that are set."""
    out: dict[str, object] = {}
    for name, (keyword, kind, _help) in PACING_VARIABLES.items():
        if env.get(name, "").strip():
            out[keyword] = kind(env[name])
    return out


_GO_PANIC = (
    "panic: runtime error: invalid memory address or nil pointer dereference",
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x18 pc=0x5581e3b2c1a4]",
    "",
    "goroutine 57 [running]:",
    "github.com/ollama/ollama/server.(*Scheduler).processCompleted(0xc0001a2000, {0x55820a1c3f28, 0xc0004b6050})",
    "\tgithub.com/ollama/ollama/server/sched.go:612 +0x1a4",
    "created by github.com/ollama/ollama/server.(*Scheduler).Run in goroutine 1",
    "\tgithub.com/ollama/ollama/server/sched.go:117 +0x105",
)

_write_lock = threading.Lock()


def emit(line: str) -> None:
    """Write a log line to stderr at once (the supervisor reads it line by line)."""
    with _write_lock:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except BrokenPipeError:
            _die_of_sigpipe()


def _die_of_sigpipe() -> None:
    """As the real (Go) server: a write to a broken stdout or stderr ends it by SIGPIPE, its runner
    left behind; that is what the pipe of a killed app does to it. Python ignores SIGPIPE and lets
    only the main thread change that, so libc restores the default from whichever thread wrote."""
    import ctypes

    try:
        ctypes.CDLL(None).signal(signal.SIGPIPE, 0)  # SIG_DFL
        os.kill(os.getpid(), signal.SIGPIPE)
    finally:
        os._exit(128 + signal.SIGPIPE)  # where libc could not be reached, as a shell reports it


def parse_host(value: str | None) -> tuple[str, int]:
    """OLLAMA_HOST as the real server reads it: scheme optional, default 127.0.0.1:11434."""
    text = (value or "").strip()
    text = re.sub(r"^[a-z]+://", "", text).rstrip("/")
    if not text:
        return "127.0.0.1", 11434
    match = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", text) or re.fullmatch(r"([^:]*)(?::(\d+))?", text)
    if match is None:
        return text, 11434
    host = match.group(1) or "127.0.0.1"
    return host, int(match.group(2) or 11434)


def print_version(env: Mapping[str, str]) -> int:
    """`ollama --version`: asks the running server first, as the real client does."""
    version = env.get("FAKE_OLLAMA_VERSION", DEFAULT_VERSION)
    host, port = parse_host(env.get("OLLAMA_HOST"))
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    url_host = f"[{host}]" if ":" in host else host
    try:
        with urllib.request.urlopen(f"http://{url_host}:{port}/api/version", timeout=1.0) as reply:
            server_version = json.load(reply).get("version", "")
    except (OSError, ValueError):
        print("Warning: could not connect to a running Ollama instance")
        print(f"Warning: client version is {version}")
        return 0
    print(f"ollama version is {server_version}")
    if server_version != version:
        print(f"Warning: client version is {version}")
    return 0


def _ignore_sigterm(env: Mapping[str, str]) -> bool:
    return env.get("FAKE_OLLAMA_IGNORE_SIGTERM", "") == "1"


def run_runner(env: Mapping[str, str]) -> int:
    """`ollama runner`: the child process that would hold the model; waits for SIGTERM.

    Orphaned by a crashed server it lingers ORPHAN_LINGER_S seconds (long enough for a test to
    see whether the supervisor reaps it), then leaves, so stray runs leak nothing for long."""
    stop = threading.Event()
    if _ignore_sigterm(env):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    parent = os.getppid()
    orphaned_at: float | None = None
    while not stop.wait(0.5):
        if os.getppid() != parent:
            orphaned_at = orphaned_at or time.monotonic()
            if time.monotonic() - orphaned_at > ORPHAN_LINGER_S:
                break
    return 0


def _spawn_runner() -> subprocess.Popen:
    launcher = sys.argv[0]
    if os.path.basename(launcher) == "ollama" and os.access(launcher, os.X_OK):
        command = [launcher]
    else:
        command = [sys.executable, str(Path(__file__).resolve())]
    # The runner shares the server's stderr, as the real runner's output reaches the server log.
    return subprocess.Popen(
        command + ["runner", "--ollama-engine", "--port", "0"], stdin=subprocess.DEVNULL,
    )


def _stop_runner(runner: subprocess.Popen) -> None:
    if runner.poll() is not None:
        return
    runner.terminate()
    try:
        runner.wait(timeout=2.0)
    except subprocess.TimeoutExpired:
        runner.kill()
        runner.wait()


def _crash(env: Mapping[str, str]) -> None:
    """Die like the real server does: final error lines, then exit without cleaning up."""
    code = int(env.get("FAKE_OLLAMA_CRASH_EXIT_CODE", "2"))
    message = env.get("FAKE_OLLAMA_CRASH_MESSAGE")
    for line in ((message,) if message else _GO_PANIC):
        emit(line)
    os._exit(code)


def run_serve(env: Mapping[str, str]) -> int:
    """`ollama serve`: log like the real server, serve the stand-in API, keep one runner child."""
    from tests.fakes.ollama.fake_ollama import FakeOllama

    version = env.get("FAKE_OLLAMA_VERSION", DEFAULT_VERSION)
    host, port = parse_host(env.get("OLLAMA_HOST"))
    stop = threading.Event()
    if _ignore_sigterm(env):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    crash_after = env.get("FAKE_OLLAMA_CRASH_AFTER_S")
    if crash_after:
        timer = threading.Timer(float(crash_after), _crash, args=(env,))
        timer.daemon = True
        timer.start()
    emit(server_config_line(env, host, port, version))
    emit(slog_line("INFO", "images.go:522", "total blobs: 6"))
    emit(slog_line("INFO", "images.go:529", "total unused blobs removed: 0"))
    runner = _spawn_runner()
    try:
        if env.get("FAKE_OLLAMA_HANG_ON_START") == "1":
            emit(slog_line("INFO", "runner.go:80", "discovering available GPUs..."))
            stop.wait()
            return 0
        delay = float(env.get("FAKE_OLLAMA_START_DELAY_S", "0") or 0)
        if delay > 0 and stop.wait(delay):
            return 0
        try:
            gpu_mib = env.get("FAKE_OLLAMA_GPU_MIB")
            extra: dict[str, object] = {"gpu_memory_bytes": int(float(gpu_mib) * MIB)} if gpu_mib else {}
            extra.update(pacing_from_env(env))
            if env.get("FAKE_OLLAMA_OFFLINE") == "1":
                extra["offline"] = True
            if env.get("FAKE_OLLAMA_UNFINISHED_PROMPT"):
                extra["unfinished_prompt"] = env["FAKE_OLLAMA_UNFINISHED_PROMPT"]
                extra["unfinished_after"] = int(env.get("FAKE_OLLAMA_UNFINISHED_AFTER") or 3)
            fake = FakeOllama.from_env(env, version=version, **extra)
        except OSError:
            emit(f"Error: listen tcp {host}:{port}: bind: address already in use")
            return 1
        fake.on_log = LoadLogRelay(fake)
        if env.get("FAKE_OLLAMA_OOM_ON_LOAD") == "1":
            fail_first_load_with_oom(fake)
        if env.get("FAKE_OLLAMA_OOM_ABOVE_MIB"):
            fail_loads_above(fake, int(float(env["FAKE_OLLAMA_OOM_ABOVE_MIB"]) * MIB))
        fake.start()
        try:
            emit(slog_line("INFO", "routes.go:1564", f"Listening on {host}:{fake.port} (version {version})"))
            emit(slog_line("INFO", "runner.go:80", "discovering available GPUs..."))
            for line in gpu_lines():
                emit(line)
            if runs_llama_server(version):
                emit(slog_line("INFO", "routes.go:2058", "vram-based default context", total_vram="24.0 GiB",
                               default_num_ctx=fake.default_context_length()))
            stop.wait()
        finally:
            fake.stop()
        return 0
    finally:
        _stop_runner(runner)


def human_bytes(n: float) -> str:
    """Bytes as Ollama prints them ('8.6 GiB', '417.3 MiB')."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


class LoadLogRelay:
    """Passes the stand-in server's log lines to stderr, completing a model load with the lines
    0.12's engine prints (`offloaded 40/41 layers to GPU`, `model weights` per device)."""

    def __init__(self, fake: object) -> None:
        self._fake = fake
        self._model = ""

    def __call__(self, line: str) -> None:
        if 'msg="server config"' in line or 'msg="Listening on' in line:
            return  # run_serve prints these itself, in the real order and with the full environment
        emit(line)
        if 'msg="starting runner"' in line:
            found = re.search(r"\bmodel=(\S+)", line)
            self._model = found.group(1) if found else ""
            return
        offload = re.search(r"layers\.offload=(\d+)", line)
        total = re.search(r"layers\.model=(\d+)", line)
        if not (offload and total):
            return
        on_gpu, layers = int(offload.group(1)), int(total.group(1))
        emit(slog_line("INFO", "ggml.go:498", f"offloaded {on_gpu}/{layers} layers to GPU"))
        model = self._fake.find_model(self._model) if self._model else None  # type: ignore[attr-defined]
        if model is None:
            return
        emit(slog_line("INFO", "backend.go:310", "model weights", device="CUDA0",
                       size=human_bytes(model.size * on_gpu / layers)))
        emit(slog_line("INFO", "backend.go:315", "model weights", device="CPU",
                       size=human_bytes(model.size * (layers - on_gpu) / layers + 417.3 * MIB)))


def fail_first_load_with_oom(fake: object) -> None:
    """Make the first model load run out of VRAM: llama.cpp's allocation lines, then HTTP 500."""
    armed = [True]
    lock = threading.Lock()

    def fire(model: object, _size: int) -> bool:
        with lock:
            hit = armed[0] and model.name not in fake.loaded  # type: ignore[attr-defined]
            if hit:
                armed[0] = False
            return hit

    _oom_when(fake, fire)


def fail_loads_above(fake: object, threshold_bytes: int) -> None:
    """Make every load needing more than threshold_bytes run out of VRAM (llama.cpp lines, HTTP 500)."""
    _oom_when(fake, lambda model, size: size > threshold_bytes and model.name not in fake.loaded)  # type: ignore[attr-defined]


def _oom_when(fake: object, fire: Callable[[object, int], bool]) -> None:
    """Wrap the fake's loader: when fire(model, bytes needed) holds, fail the load as llama.cpp does."""
    from tests.fakes.ollama.fake_ollama import OOM_MESSAGE
    from tests.fakes.ollama.fake_ollama_infer import Refused

    original = fake.ensure_loaded  # type: ignore[attr-defined]

    def ensure_loaded(ex: object, model: object, num_ctx: object, keep_alive_s: object) -> None:
        wanted = int(num_ctx) if num_ctx else int(model.parameters.get("num_ctx")  # type: ignore[attr-defined]
                                                  or fake.default_context_length())  # type: ignore[attr-defined]
        ctx = min(max(wanted, 4), model.context_length)  # type: ignore[attr-defined]
        needed = model.loaded_bytes(ctx * fake.num_parallel, fake.effective_kv_type())  # type: ignore[attr-defined]
        if not fire(model, needed):
            return original(ex, model, num_ctx, keep_alive_s)
        size = needed
        fake.log(slog_line("INFO", "server.go:400", "starting runner", model=model.name))  # type: ignore[attr-defined]
        for line in (
            f"ggml_backend_cuda_buffer_type_alloc_buffer: allocating {size / MIB:.2f} MiB on device 0: "
            "cudaMalloc failed: out of memory",
            f"alloc_tensor_range: failed to allocate CUDA0 buffer of size {size}",
            slog_line("ERROR", "sched.go:489", "error loading llama server", error=OOM_MESSAGE),
        ):
            fake.log(line)  # type: ignore[attr-defined]
        raise Refused(500, OOM_MESSAGE)

    fake.ensure_loaded = ensure_loaded  # type: ignore[attr-defined]


def gpu_lines() -> list[str]:
    """What Ollama logs after GPU discovery on a headless RTX 4090 (the same fields in 0.12 and 0.32;
    the recording, from a machine without a GPU, has `id=cpu library=cpu`: the stand-in plays the
    card its tests price for)."""
    return [slog_line(
        "INFO", "types.go:42", "inference compute",
        id="GPU-3f5c2a91-7d4e-4b2a-9c61-0e8f1d2b7a44", library="CUDA", compute="8.9", name="CUDA0",
        description="NVIDIA GeForce RTX 4090", libdirs="ollama,cuda_v12", driver="12.8",
        pci_id="0000:01:00.0", type="discrete", total="23.5 GiB", available="23.0 GiB",
    )]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the stand-in `ollama` program."""
    args = sys.argv[1:] if argv is None else argv
    env = os.environ
    if args[:1] in (["--version"], ["-v"]):
        return print_version(env)
    if args[:1] == ["serve"]:
        return run_serve(env)
    if args[:1] == ["runner"]:
        return run_runner(env)
    command = args[0] if args else ""
    print(f'Error: unknown command "{command}" for "ollama"', file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
