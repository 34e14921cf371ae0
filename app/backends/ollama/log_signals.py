"""Ollama's log read into the watchdog's neutral signals (app.core.watch.signals).

The log the app reads (a managed `ollama serve`'s output, an attached one's journal or desktop-app file)
holds two kinds of lines: Ollama's own Go slog lines (`time=… level=… msg="…"`) and, between them, the
lines of the llama-server child it starts for each load (started with `--no-log-prefix`, so as llama.cpp
prints them). Read here, as Ollama 0.32.15 and the llama.cpp it runs word them:

Ollama's own (see child.py, whose parser this reuses):
- `msg="starting llama-server" cmd="… -c 4096 -np 2 …"` -> LaunchSeen (slots from -np, context from -c,
  layers from -ngl where given, the model's blob);
- `msg="llama-server started in 1.81 seconds"` -> LoadFinished (Ollama logs it twice per load: once
  when the child answers, once when the scheduler has it; only the first after a start counts);
- `msg="llama-server terminated" error="exit status 1"` -> EngineExited (a load that failed);
- `level=WARN … msg="llama-server process no longer running" sys=9 string="signal: killed"` -> EngineExited
  (a running child that died, logged when the next request finds it gone, and twice: counted once per
  child; an unload or an expired keep-alive is not logged at all);
- `level=WARN … msg="requested context size too large for model" num_ctx=16384 n_ctx_train=8192` ->
  LaunchSeen with the context per slot the model allows (Ollama then starts the child with that -c);
- `msg="Listening on 127.0.0.1:11434 (version 0.32.15)"` -> ServerListening;
- `level=WARN … msg="truncating input prompt" limit=1024 prompt=5061 keep=4 new=1024` -> PromptCut
  (a single prompt longer than the context; a conversation too long loses whole old messages with no
  line at all).

llama-server's own (tools/server/server-context.cpp, src/llama-model.cpp, src/llama-context.cpp):
- `srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'` -> LaunchSeen
  with the slots and the context per slot the child really has (capped at the model's training context);
- `srv    load_model: the slot context (16384) exceeds the training context of the model (8192) -
  capping` -> LaunchSeen with the capped context per slot;
- `load_tensors: offloaded 27/41 layers to GPU` -> LayersPlaced (printed only by a build with a GPU
  backend);
- `load_tensors:        CUDA0 model buffer size =  8096.47 MiB`, `llama_kv_cache:      CUDA0 KV buffer size =
  6400.00 MiB`, `sched_reserve:      CUDA0 compute buffer size =   728.00 MiB` and their host-side kin (`CPU`,
  `CPU_Mapped`, `CUDA_Host`), `RS buffer` for a recurrent model -> BufferLogged, one per line (Ollama starts
  the child with `--log-verbosity 4`, which prints them);
- `slot   operator(): id  0 | task 7 | slot context shift, n_keep = 5, n_left = 250, n_discard = 125`
  -> ContextShifted;
- `decode: failed to find a memory slot for batch of size 512` and `srv        decode: failed to find
  free space in the KV cache, retrying with smaller batch size, …`, and `Context size has been
  exceeded.` -> CacheExhausted.

Lines the app adds itself (app.adapters.process.attached_log.MARK) are not the server's and say nothing.
A reader never raises on what a log holds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from app.adapters.process.attached_log import MARK
from app.backends.ollama.child import parse_log_line, slog_fields
from app.core.memory.buffer_lines import parse_buffer_line
from app.core.watch.signals import (
    BufferLogged, CacheExhausted, ContextShifted, EngineExited, LaunchSeen, LayersPlaced, LoadFinished, LogSignal, PromptCut,
    ServerListening,
)

TRUNCATING = "truncating input prompt"  # Ollama's WARN when it cuts one prompt to fit the context
NOT_RUNNING = "llama-server process no longer running"  # Ollama's WARN when it finds its child dead
TOO_LARGE = "requested context size too large for model"  # Ollama's WARN before it lowers num_ctx
_OFFLOADED = re.compile(r"\boffloaded (\d+)/(\d+) layers to GPU\b")
_SLOTS = re.compile(r"\binitializing, n_slots = (\d+), n_ctx_slot = (\d+)")
_CAPPED = re.compile(r"\bthe slot context \((\d+)\) exceeds the training context of the model \((\d+)\)")
_SHIFT = re.compile(r"(?:\bid +(\d+) \|.*)?\bslot context shift, n_keep = (\d+), n_left = (\d+), n_discard = (\d+)")
_NO_ROOM = ("failed to find a memory slot for batch", "failed to find free space in the KV cache",
            "Context size has been exceeded.")


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


class OllamaLogSignals:
    """Reads one Ollama log, line by line (see the module's docstring); keeps whether a load is under way,
    so each load's "started in" counts once."""

    def __init__(self) -> None:
        self._loading = False  # a "starting llama-server" was read and its first "started in" not yet
        self._child_gone = False  # the current child was read as ended (its end is logged more than once)
        self._logged_at: float | None = None  # the time= of the newest Ollama line (a child's line has none)

    def read(self, line: str) -> Sequence[LogSignal]:
        """The signals this line holds (most lines: none)."""
        try:
            return self._read(line.rstrip("\r\n"))
        except Exception:  # noqa: BLE001 - a log line never takes the reader down
            return ()

    def _read(self, line: str) -> Sequence[LogSignal]:
        if not line or line.startswith(MARK):
            return ()
        if line.startswith("time="):
            self._logged_at = _line_time(line) or self._logged_at
            signals = self._ollama(line)
        else:
            signals = self._child(line)  # dated by the Ollama line before it: the child's own have no time
        return tuple(replace(s, logged_at=self._logged_at) for s in signals)

    def _ollama(self, line: str) -> Sequence[LogSignal]:
        event = parse_log_line(line)
        if event is None:
            return self._ollama_warning(line)
        if event.kind == "starting" and event.command is not None:
            self._loading, self._child_gone = True, False
            command = event.command
            return (LaunchSeen(line, parallel=command.parallel, context_total=command.context_total,
                               gpu_layers=_int(command.gpu_layers or None), model=command.model),)
        if event.kind == "started":
            if not self._loading:
                return ()
            self._loading = False
            return (LoadFinished(line, seconds=event.seconds),)
        if event.kind == "terminated":
            return self._engine_ended(line, event.error)
        if event.kind == "listening":
            self._loading, self._child_gone = False, False
            return (ServerListening(line, version=event.version),)
        return ()

    def _ollama_warning(self, line: str) -> Sequence[LogSignal]:
        fields = slog_fields(line)
        msg = fields.get("msg") if fields is not None else None
        if fields is None or msg is None:
            return ()
        if msg == TRUNCATING:
            return (PromptCut(line, sent=_int(fields.get("prompt")), kept=_int(fields.get("new"))),)
        if msg == NOT_RUNNING:
            return self._engine_ended(line, fields.get("string", ""))
        if msg == TOO_LARGE and (allowed := _int(fields.get("n_ctx_train"))) is not None:
            return (LaunchSeen(line, context_per_slot=allowed),)
        return ()

    def _engine_ended(self, line: str, error: str) -> Sequence[LogSignal]:
        self._loading = False
        if self._child_gone:
            return ()
        self._child_gone = True
        return (EngineExited(line, error=error),)

    def _child(self, line: str) -> Sequence[LogSignal]:
        if (buffer := parse_buffer_line(line)) is not None:
            return (BufferLogged(line, buffer=buffer.buffer, kind=buffer.kind, size_bytes=buffer.size_bytes,
                                 device=buffer.device),)
        if "offloaded" in line and (m := _OFFLOADED.search(line)):
            return (LayersPlaced(line, on_gpu=int(m.group(1)), total=int(m.group(2))),)
        if "n_slots" in line and (m := _SLOTS.search(line)):
            return (LaunchSeen(line, parallel=int(m.group(1)), context_per_slot=int(m.group(2))),)
        if "training context" in line and (m := _CAPPED.search(line)):
            return (LaunchSeen(line, context_per_slot=int(m.group(2))),)
        if "context shift" in line and (m := _SHIFT.search(line)):
            return (ContextShifted(line, slot=_int(m.group(1)), dropped_tokens=int(m.group(4))),)
        if any(text in line for text in _NO_ROOM):
            return (CacheExhausted(line),)
        return ()


def _line_time(line: str) -> float | None:
    """The wall-clock time of a slog line's `time=` (RFC 3339), None where it cannot be read."""
    fields = slog_fields(line)
    stamp = fields.get("time") if fields is not None else None
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def ollama_log_signals() -> OllamaLogSignals:
    """A fresh reader for one Ollama log (BackendSpec.log_signals)."""
    return OllamaLogSignals()


__all__ = ["OllamaLogSignals", "TRUNCATING", "ollama_log_signals"]
