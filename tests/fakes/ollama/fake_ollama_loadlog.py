"""What the stand-in logs while it loads a model as Ollama >= 0.30 does: the llama-server command line,
llama.cpp's own buffer lines, and the failure of a quantized KV cache without flash attention, in the
shape of the real 0.32.15's log (tests/data/ollama/real/serve_*.log)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from tests.fakes.ollama.fake_ollama_infer import Refused
from tests.fakes.ollama.fake_ollama_wire import slog_line
from tests.fakes.ollama.recorded import kv_needs_flash_message
from app.core.units import MIB

if TYPE_CHECKING:
    from tests.fakes.ollama.fake_ollama_models import FakeModel
    from tests.fakes.ollama.fake_ollama_sched import SchedulerMixin

# Where Ollama's Linux installer puts the program's runners (…/bin/ollama -> …/lib/ollama/).
LLAMA_SERVER = "/usr/local/lib/ollama/llama-server"
MODELS_DIR = "/usr/share/ollama/.ollama/models"
# Recorded with num_batch unset on the CPU: 512. Ollama picks more on a large GPU (2048 on an H200);
# the stand-in keeps the recorded value, as no test depends on the pick.
BATCH = 512


def runs_llama_server(version: str) -> bool:
    """True from Ollama 0.30, which runs every GGUF model in upstream llama.cpp's llama-server."""
    parts = tuple(int(p) for p in version.split("-")[0].split(".")[:2] if p.isdigit())
    return parts >= (0, 30)


def flash_attn_flag(flash_attention: bool | None) -> str:
    """--flash-attn as Ollama passes it: OLLAMA_FLASH_ATTENTION=1 on, =0 off, unset auto."""
    return "auto" if flash_attention is None else "on" if flash_attention else "off"


def llama_server_command(server: SchedulerMixin, model: FakeModel, ctx: int) -> str:
    """The `cmd=` of `msg="starting llama-server"`: -c is the per-slot context times -np."""
    words = [LLAMA_SERVER, "--model", f"{MODELS_DIR}/blobs/sha256-{model.digest}",
             "--port", str(random.randint(32768, 60999)), "--host", "127.0.0.1", "--no-webui", "--offline",
             "-c", str(ctx * server.num_parallel), "-np", str(server.num_parallel), "--log-verbosity", "4",
             "--no-log-prefix", "--no-log-timestamps", "--no-jinja", "--load-mode", "none"]
    if server.kv_cache_type != "f16":
        words += ["--cache-type-k", server.kv_cache_type, "--cache-type-v", server.kv_cache_type]
    words += ["--flash-attn", flash_attn_flag(server.flash_attention), "-b", str(BATCH), "-ub", str(BATCH),
              "--context-shift", "--keep", "4"]
    return " ".join(words)


def log_start(server: SchedulerMixin, model: FakeModel, ctx: int) -> None:
    """The lines before llama-server loads: which runner, and its command line."""
    server.log(slog_line("INFO", "server.go:109", "using llama-server for model",
                         model=f"{MODELS_DIR}/blobs/sha256-{model.digest}"))
    server.log(slog_line("INFO", "llama_server.go:433", "starting llama-server",
                         cmd=llama_server_command(server, model, ctx)))


def fail_quantized_kv_without_flash(server: SchedulerMixin, model: FakeModel, ctx: int) -> None:
    """llama-server refuses a quantized V cache without flash attention and exits; Ollama answers 500
    to the request, and to every later one, since each tries the load again."""
    log_start(server, model, ctx)
    for line in ("llama_init_from_model: quantized V cache requires flash_attn to be enabled",
                 "common_fit_params: encountered an error while trying to fit params to free device memory: "
                 "failed to create llama_context from model",
                 "srv  llama_server: exiting due to model loading error"):
        server.log(line)
    server.log(slog_line("ERROR", "llama_server.go:1023", "llama-server terminated", error="exit status 1", exit=1))
    message = kv_needs_flash_message()
    server.log(slog_line("INFO", "sched.go:641", "Load failed", model=f"{MODELS_DIR}/blobs/sha256-{model.digest}",
                         error=message))
    raise Refused(500, message)


def log_loaded(server: SchedulerMixin, model: FakeModel, layers: int, size: int, size_vram: int, kv_bytes: int,
               load_s: float) -> None:
    """llama.cpp's placement lines and Ollama's start line. The recording is from a machine without a
    GPU (`CPU model buffer size`); the stand-in plays a CUDA card, as its tests price for one, so its
    lines name CUDA0 as llama.cpp does there (`offloaded 41/41 layers to GPU`)."""
    on_gpu = round(layers * size_vram / size) if size else layers
    weights_gpu = model.size * size_vram / size if size else 0
    server.log(f"load_tensors: offloaded {on_gpu}/{layers} layers to GPU")
    server.log(f"load_tensors:        CUDA0 model buffer size = {weights_gpu / MIB:10.2f} MiB")
    server.log(f"load_tensors:   CPU_Mapped model buffer size = {(model.size - weights_gpu) / MIB:10.2f} MiB")
    server.log(f"llama_kv_cache:      CUDA0 KV buffer size = {kv_bytes / MIB:10.2f} MiB")
    server.log(f"sched_reserve:      CUDA0 compute buffer size = {300.0:10.2f} MiB")
    server.log(slog_line("INFO", "llama_server.go:1362", f"llama-server started in {load_s:.2f} seconds"))
