"""The llama-server command line Ollama ≥ 0.30 will run for a model, predicted before it loads.

Ollama builds it in llm/llama_server.go, startLlamaServer (v0.32.15): a fixed head (model, a port
it picks, loopback, no web UI, offline), `-c` = per-slot context × slots and `-np`, its log flags,
`--no-jinja --chat-template chatml` when Ollama renders the chat itself (appendJinjaArgs),
`--load-mode none` when mmap is off (appendLoadModeArgs; off by default on a machine without a
GPU, server/sched.go disableMmapDefaultReason), `--cache-type-k/v` when OLLAMA_KV_CACHE_TYPE is
set, `--flash-attn` (appendFlashAttentionArgs), `-b/-ub` (appendBatchArgs), `-ngl` only when
num_gpu is set, and `--context-shift --keep` (appendContextShiftArgs). The numbers come from
app.backends.ollama.launch_plan.OllamaLaunch.
"""

from __future__ import annotations

import shlex

from app.backends.ollama.launch_plan import OllamaLaunch

# The port is one Ollama asks the kernel for at start; the prediction cannot know it.
PORT_PLACEHOLDER = "<port>"
MODEL_PLACEHOLDER = "<model blob>"
LLAMA_SERVER = "llama-server"
# llm/llama_server.go, appendLlamaServerLogArgs: kept so Ollama can read the buffer lines.
LOG_ARGS = ("--log-verbosity", "4", "--no-log-prefix", "--no-log-timestamps")


def llama_server_args(plan: OllamaLaunch, model_path: str = MODEL_PLACEHOLDER, port: str = PORT_PLACEHOLDER,
                      ollama_renders_chat: bool = True) -> list[str]:
    """The arguments after the program name, in the order Ollama writes them."""
    args = ["--model", model_path, "--port", port, "--host", "127.0.0.1", "--no-webui", "--offline",
            "-c", str(plan.ctx_total), "-np", str(plan.parallel), *LOG_ARGS]
    if ollama_renders_chat:
        args += ["--no-jinja", "--chat-template", "chatml"]
    if plan.load_mode_none:
        args += ["--load-mode", "none"]
    if plan.kv_cache_type:
        args += ["--cache-type-k", plan.kv_cache_type, "--cache-type-v", plan.kv_cache_type]
    args += ["--flash-attn", plan.flash_attention, "-b", str(plan.num_batch), "-ub", str(plan.num_batch)]
    if plan.num_gpu is not None and plan.num_gpu >= 0:
        args += ["-ngl", str(plan.num_gpu)]
    if plan.context_shift:
        args += ["--context-shift"]
        if plan.num_keep > 0:
            args += ["--keep", str(plan.num_keep)]
    return args


def llama_server_command(plan: OllamaLaunch, program: str = LLAMA_SERVER, model_path: str = MODEL_PLACEHOLDER,
                         port: str = PORT_PLACEHOLDER) -> str:
    """The whole command as one line a user can read and compare with Ollama's log."""
    return shlex.join([program, *llama_server_args(plan, model_path, port)])


def predicted_lines(plan: OllamaLaunch) -> list[str]:
    """The predicted command with where its numbers come from, as lines for the Server page."""
    return [
        "# llama-server as Ollama will start it (predicted):",
        llama_server_command(plan),
        f"# -c {plan.ctx_total} = {plan.num_ctx} per slot ({plan.context_source}) × {plan.parallel} slots; "
        f"-b/-ub {plan.num_batch}: {plan.batch_source}",
        *(f"# {note}" for note in plan.notes),
    ]


__all__ = ["LLAMA_SERVER", "llama_server_args", "llama_server_command", "predicted_lines"]
