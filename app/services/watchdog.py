"""The watchdog: what a server does without saying so, read where it really shows and turned into events.

One Watchdog follows one server. It is fed what the app already reads — the server's log lines (through
the backend's LogSignalReader), its list of loaded models, its slots and counters, the GPU driver's
samples, the supervised process's status and each finished reply — and raises a WatchEvent when they
show a prompt cut short, layers on the CPU, fewer slots or a smaller context than asked, a cold load in
the middle of work, a full KV cache, requests deferred, context shifts, the GPU slowing itself, VRAM
taken by other processes, or the server restarting or crashing behind the app's back.

A condition that lasts (a full cache, a throttled GPU, a spilled model) is one event when it starts, and
another only after it has cleared. Nothing is guessed: a signal the server does not give raises nothing.

Qt-free and thread-safe: the feeds may be called from any thread; subscribers are called on the feeding
thread, outside the lock.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app.core.bench.outcome import is_truncated
from app.core.models import RunningModel
from app.core.ports.log_signals import LogSignalReader
from app.core.server.state import ServerState, ServerStatus
from app.core.server_telemetry import ServerSample, kv_fill_from_slots
from app.core.telemetry import GpuSample, GpuSlowdown
from app.core.watch.events import EventKind, Evidence, Severity, Source, WatchEvent, between
from app.core.watch.signals import (
    Asked, CacheExhausted, ContextShifted, EngineExited, LaunchSeen, LayersPlaced, LoadFinished, LogSignal, PromptCut,
    ReplyFacts, ServerListening,
)

GIB = 1024 ** 3
BACKLOG_S = 30.0  # a log line the log dates this much before now was logged before it was read (a backlog)
from app.services.listeners import Listeners


@dataclass(frozen=True)
class WatchLimits:
    """When a reading becomes an event."""

    kv_full: float = 0.95  # KV-cache fill (0..1) from which the cache counts as full
    kv_clear: float = 0.80  # ... and below which it counts as free again
    cold_load_s: float = 1.0  # a load this long while work goes on is a cold load
    work_window_s: float = 600.0  # a reply within this many seconds means work is going on
    vram_rise_mib: float = 512.0  # other processes' GPU memory grew by at least this much ...
    vram_free_share: float = 0.05  # ... and free memory fell under this share of the card
    vram_free_severe_share: float = 0.02  # free memory under this share: severe
    vram_clear_share: float = 0.10  # free memory back above this share: the episode is over
    clear_samples: int = 3  # readings without the condition before it counts as cleared
    repeat_s: float = 30.0  # the same log-borne event (a shift, a full cache) within this is one episode
    keep: int = 2000  # events kept in memory


Listener = Callable[[WatchEvent], None]

_SEVERE_SLOWDOWNS = frozenset({GpuSlowdown.THERMAL, GpuSlowdown.HW_SLOWDOWN, GpuSlowdown.POWER_BRAKE})


class Watchdog:
    """Turns one server's signals into events; see the module's docstring."""

    def __init__(self, *, subject: str = "", log_reader: LogSignalReader | None = None,
                 limits: WatchLimits | None = None, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._subject = subject
        self._reader = log_reader
        self._limits = limits or WatchLimits()
        self._clock = clock
        self._mono = monotonic
        self._lock = threading.Lock()
        self._events: deque[WatchEvent] = deque(maxlen=self._limits.keep)
        self._listeners: Listeners[WatchEvent] = Listeners("watch event")
        self._gpu_present: bool | None = None
        self._others_base_mib: float | None = None
        self._start_over()

    def _start_over(self) -> None:
        """Forget what was read of the server followed (not the events, the listeners or the GPU)."""
        self._asked: Asked | None = None
        self._active: dict[tuple[EventKind, str], object] = {}  # lasting conditions now on -> their key value
        self._quiet: dict[tuple[EventKind, str], int] = {}  # readings without the condition, per active key
        self._cleared: dict[tuple[EventKind, str], tuple[float, object]] = {}  # when an episode ended, its value
        self._last_emit: dict[tuple[EventKind, str], float] = {}
        self._last_reply: dict[str, float] = {}  # model -> wall time of its last reply
        self._loaded: dict[str, RunningModel] = {}
        self._loaded_seen = False
        self._launches = 0
        self._listening = 0
        # The app (re)started the server and its "listening" line has not been read yet: the status may reach the
        # watch before the log line does, so that line is the app's own start even once the status says running.
        self._own_start_pending = False
        self._status: ServerStatus | None = None
        self._server_prev: ServerSample | None = None
        self._had_attached = False  # an attached server was seen running (its return is a restart)
        self._dated: float | None = None  # while reading a backlog line: the time the log gives it
        self._log_cuts: deque[float] = deque(maxlen=256)  # when the log told of cuts no reply has matched yet

    # -- configuration ---------------------------------------------------------------------------------
    @property
    def subject(self) -> str:
        """What this watchdog follows (a server address)."""
        return self._subject

    def follow(self, subject: str, log_reader: LogSignalReader | None) -> None:
        """Follow another server (or the same address started again by the app): what was read of the one
        before is forgotten, so its starting over is no event; the events seen so far stay, for one history."""
        with self._lock:
            self._subject = subject
            self._reader = log_reader
            self._start_over()

    def expect(self, asked: Asked | None) -> None:
        """What the settings in force asked for (None: nothing to hold the server to)."""
        with self._lock:
            self._asked = asked
            for key in [k for k in self._active if k[0] in (EventKind.FEWER_SLOTS, EventKind.SMALLER_CONTEXT)]:
                self._active.pop(key, None)

    def gpu_present(self, present: bool) -> None:
        """Whether the server has a GPU at all (without one, a model on the CPU is by design)."""
        with self._lock:
            self._gpu_present = present

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` with each new event; returns the unsubscribe function."""
        return self._listeners.subscribe(listener)

    # -- reading back ----------------------------------------------------------------------------------
    def events(self) -> tuple[WatchEvent, ...]:
        """Every event kept, oldest first."""
        with self._lock:
            return tuple(self._events)

    def between(self, start: float, end: float) -> tuple[WatchEvent, ...]:
        """The events seen from `start` to `end` (wall-clock seconds)."""
        return between(self.events(), start, end)

    def now(self) -> float:
        """The watchdog's wall clock (for marking the start and end of a measurement)."""
        return self._clock()

    # -- feeds -----------------------------------------------------------------------------------------
    def feed_log(self, line: str) -> list[WatchEvent]:
        """One line of the server's log, in the order logged."""
        if self._reader is None:
            return []
        try:
            signals = list(self._reader.read(line))
        except Exception:  # noqa: BLE001 - a reader must never take the log's follower down
            return []
        out: list[WatchEvent] = []
        for signal in signals:
            out.extend(self.feed_signal(signal))
        return out

    def feed_signal(self, signal: LogSignal) -> list[WatchEvent]:
        """One signal read from the log (feed_log's step, open for a reader run elsewhere). A line the log dates
        well before now (a followed log's backlog) gives events dated when it was logged."""
        with self._lock:
            logged = signal.logged_at
            self._dated = logged if logged is not None and logged < self._clock() - BACKLOG_S else None
            try:
                made = self._on_signal(signal)
            finally:
                self._dated = None
        return self._publish(made)

    def feed_loaded(self, models: Sequence[RunningModel]) -> list[WatchEvent]:
        """The server's list of loaded models now, with their sizes in memory."""
        with self._lock:
            made = self._on_loaded(models)
        return self._publish(made)

    def feed_server(self, sample: ServerSample) -> list[WatchEvent]:
        """One reading of the server's slots and counters."""
        with self._lock:
            made = self._on_server(sample)
        return self._publish(made)

    def feed_gpu(self, sample: GpuSample) -> list[WatchEvent]:
        """One reading of the GPU driver."""
        with self._lock:
            self._gpu_present = True
            made = self._on_gpu(sample)
        return self._publish(made)

    def feed_status(self, status: ServerStatus) -> list[WatchEvent]:
        """The supervised server's status, each time it changes."""
        with self._lock:
            made = self._on_status(status)
        return self._publish(made)

    def feed_reply(self, reply: ReplyFacts) -> list[WatchEvent]:
        """One finished reply's figures; returns the events it raised itself."""
        with self._lock:
            made = self._on_reply(reply)
        return self._publish(made)

    # -- the detectors (called with the lock held) -----------------------------------------------------
    def _on_signal(self, signal: LogSignal) -> list[WatchEvent]:
        ev = Evidence(Source.LOG, signal.line)
        if isinstance(signal, LaunchSeen):
            self._launches += 1
            return self._launch_checks(signal, ev)
        if isinstance(signal, LayersPlaced):
            return self._layers(signal.on_gpu, signal.total, Evidence(
                Source.LOG, signal.line, {"layers_on_gpu": signal.on_gpu, "layers_total": signal.total}),
                subject=self._model_subject())
        if isinstance(signal, LoadFinished):
            return self._cold_load(self._model_subject(), signal.seconds, ev)
        if isinstance(signal, ContextShifted):
            figures = {"slot": float(signal.slot)} if signal.slot is not None else {}
            if signal.dropped_tokens is not None:
                figures["dropped_tokens"] = float(signal.dropped_tokens)
            return self._once(EventKind.CONTEXT_SHIFT, Severity.WARNING, self._subject,
                              "A slot's context filled up and the server dropped tokens from it to go on: the model "
                              "no longer sees the start of that conversation.",
                              "Raise the context per slot (or lower parallel to give each slot more), or send shorter "
                              "conversations.", Evidence(Source.LOG, signal.line, figures))
        if isinstance(signal, CacheExhausted):
            return self._once(EventKind.KV_CACHE_FULL, Severity.WARNING, self._subject,
                              "The KV cache had no room for a batch: requests wait or are cut.",
                              "Lower parallel or the context, or quantize the KV cache (q8_0) to give it room.", ev)
        if isinstance(signal, PromptCut):
            figures = {k: float(v) for k, v in (("prompt_tokens_sent", signal.sent),
                                                ("prompt_tokens_kept", signal.kept)) if v is not None}
            numbers = f" ({signal.kept} of {signal.sent} tokens kept)" if signal.sent and signal.kept else ""
            self._log_cuts.append(self._clock())
            return [self._event(EventKind.PROMPT_TRUNCATED, Severity.SEVERE, self._model_subject(),
                                f"The server cut a prompt to fit its context{numbers}: the answer is to a prompt "
                                "that was not asked.", _CUT_ADVICE, Evidence(Source.LOG, signal.line, figures))]
        if isinstance(signal, EngineExited):
            return [self._event(EventKind.SERVER_CRASHED, Severity.SEVERE, self._subject,
                                f"The engine serving the model ended ({signal.error or 'no detail'}).",
                                "Read the server's log just before this line for its reason; the next request "
                                "loads the model again.", ev)]
        if isinstance(signal, ServerListening):
            self._listening += 1
            own, self._own_start_pending = self._own_start_pending, False
            if own or (self._status is not None and self._status.state is ServerState.STARTING):
                return []  # the app's own (re)start, not one behind its back
            if self._listening > 1:
                return [self._event(EventKind.SERVER_RESTARTED, Severity.WARNING, self._subject,
                                    "The server started again: models, caches and counters start over.",
                                    "Nothing to do if it was yours; measurements across the restart are not one "
                                    "run.", ev)]
        return []

    def _model_subject(self) -> str:
        asked = self._asked
        return asked.model if asked is not None and asked.model else self._subject

    def _launch_checks(self, launch: LaunchSeen, ev: Evidence) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        asked = self._asked
        # the model as the settings name it, where they do (a log may name only the file it loads)
        subject = self._model_subject() if asked is not None and asked.model else launch.model or self._subject
        if asked is not None and asked.parallel and launch.parallel and launch.parallel < asked.parallel:
            out += self._condition(EventKind.FEWER_SLOTS, subject, launch.parallel, Severity.WARNING,
                                   f"The server runs {launch.parallel} slot{'s' if launch.parallel != 1 else ''}, "
                                   f"not the {asked.parallel} asked: requests beyond {launch.parallel} wait.",
                                   _SLOTS_ADVICE, Evidence(Source.LOG, launch.line, {
                                       "slots": launch.parallel, "slots_asked": asked.parallel}))
        per_slot = launch.context_per_slot
        if per_slot is None and launch.context_total and launch.parallel:
            per_slot = launch.context_total // launch.parallel
        if asked is not None and asked.context_per_slot and per_slot and per_slot < asked.context_per_slot:
            out += self._condition(EventKind.SMALLER_CONTEXT, subject, per_slot, Severity.WARNING,
                                   f"The server gave each slot a context of {per_slot} tokens, not the "
                                   f"{asked.context_per_slot} asked: longer prompts are cut or refused.",
                                   _CONTEXT_ADVICE, Evidence(Source.LOG, launch.line, {
                                       "context_per_slot": per_slot, "context_per_slot_asked": asked.context_per_slot}))
        if launch.gpu_layers == 0:
            self._active[(EventKind.LAYERS_ON_CPU, subject)] = "asked"  # the CPU was asked for: not hidden
        return out

    def _layers(self, on_gpu: int, total: int, ev: Evidence, subject: str) -> list[WatchEvent]:
        key = (EventKind.LAYERS_ON_CPU, subject)
        if on_gpu >= total or total <= 0:
            self._active.pop(key, None)
            return []
        if self._active.get(key) == "asked" or (on_gpu == 0 and self._gpu_present is not True):
            return []  # the CPU asked for, or no GPU to put them on
        if self._active.get(key) == (on_gpu, total):
            return []
        self._active[key] = (on_gpu, total)
        priced = self._asked is not None and self._asked.fits_on_gpu is True
        cpu = total - on_gpu
        return [self._event(EventKind.LAYERS_ON_CPU, Severity.SEVERE if priced else Severity.WARNING, subject,
                            f"{cpu} of {total} layers run on the CPU"
                            + (" although the load was priced to fit on the GPU" if priced else "")
                            + ": generation runs at the CPU's speed.", _SPILL_ADVICE, ev)]

    def _cold_load(self, model: str, seconds: float | None, ev: Evidence) -> list[WatchEvent]:
        now = self._clock()
        working = any(now - t <= self._limits.work_window_s for t in self._last_reply.values())
        if not working or (seconds is not None and seconds < self._limits.cold_load_s):
            return []
        took = f" ({seconds:.1f} s)" if seconds is not None else ""
        return self._once(EventKind.COLD_LOAD, Severity.WARNING, model or self._subject,
                          f"The model was loaded again in the middle of work{took}: the request that waited for it "
                          "answered that much later.",
                          "Keep the model loaded longer (a longer keep-alive), or stop other models from evicting "
                          "it; a measurement that included the load is not the setting's own.", ev)

    def _on_loaded(self, models: Sequence[RunningModel]) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        now_names = {m.name: m for m in models}
        if self._loaded_seen:
            for name, gone in self._loaded.items():
                if name not in now_names:
                    self._active.pop((EventKind.LAYERS_ON_CPU, name), None)
                    out.append(self._event(EventKind.MODEL_UNLOADED, Severity.INFO, name,
                                           f"{name} left memory (its keep-alive ran out, another model took its place, "
                                           "or it was unloaded): the next request to it waits for a load.",
                                           "Raise the keep-alive to keep it loaded between requests.",
                                           Evidence(Source.LOADED, f"{name} is no longer in the loaded models",
                                                    _sizes(gone))))
        for m in models:
            if m.size_bytes is None or m.size_vram_bytes is None or m.size_bytes <= 0:
                continue
            on_cpu = m.size_bytes - m.size_vram_bytes
            key = (EventKind.LAYERS_ON_CPU, m.name)
            if on_cpu <= 0:
                if self._active.get(key) != "asked":
                    self._active.pop(key, None)
                continue
            if self._active.get(key) == "asked" or (m.size_vram_bytes == 0 and self._gpu_present is not True):
                continue
            if key in self._active:
                continue
            self._active[key] = ("loaded", m.size_vram_bytes)
            priced = self._asked is not None and self._asked.fits_on_gpu is True
            out.append(self._event(
                EventKind.LAYERS_ON_CPU, Severity.SEVERE if priced else Severity.WARNING, m.name,
                f"{m.name} holds {on_cpu / GIB:.1f} GiB in host memory ({m.processor})"
                + (" although it was priced to fit on the GPU" if priced else "")
                + ": the layers there run at the CPU's speed.", _SPILL_ADVICE,
                Evidence(Source.LOADED, f"{m.name}: size {m.size_bytes} B, size_vram {m.size_vram_bytes} B "
                         f"({m.processor})", _sizes(m))))
        self._loaded = dict(now_names)
        self._loaded_seen = True
        return out

    def _on_server(self, s: ServerSample) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        prev, self._server_prev = self._server_prev, s
        if prev is not None and prev.source == s.source:
            for name, before, after in (("prompt tokens", prev.prompt_tokens_total, s.prompt_tokens_total),
                                        ("generated tokens", prev.predicted_tokens_total, s.predicted_tokens_total)):
                if before is not None and after is not None and after < before:
                    out.append(self._event(EventKind.SERVER_RESTARTED, Severity.WARNING, self._subject,
                                           f"The server's {name} counter fell from {before:.0f} to {after:.0f}: it "
                                           "started again behind the app's back (models, caches and counters start "
                                           "over).", "Find who restarted it (a crash, a service manager, an update); "
                                           "measurements across the restart are not one run.",
                                           Evidence(Source.METRICS, f"{name} total {before:.0f} -> {after:.0f}",
                                                    {"before": before, "after": after})))
                    break
        asked = self._asked
        if asked is not None and asked.parallel and s.slots_total is not None:
            if s.slots_total < asked.parallel:
                out += self._condition(EventKind.FEWER_SLOTS, self._model_subject(), s.slots_total, Severity.WARNING,
                                       f"The server runs {s.slots_total} slot{'s' if s.slots_total != 1 else ''}, not "
                                       f"the {asked.parallel} asked: requests beyond {s.slots_total} wait.",
                                       _SLOTS_ADVICE, Evidence(Source.SLOTS, f"{s.slots_total} slots reported",
                                                               {"slots": s.slots_total, "slots_asked": asked.parallel}))
        if asked is not None and asked.context_per_slot and s.slots:
            ctx = min((slot.n_ctx for slot in s.slots if slot.n_ctx), default=None)
            if ctx is not None and ctx < asked.context_per_slot:
                out += self._condition(EventKind.SMALLER_CONTEXT, self._model_subject(), ctx, Severity.WARNING,
                                       f"The server gave each slot a context of {ctx} tokens, not the "
                                       f"{asked.context_per_slot} asked: longer prompts are cut or refused.",
                                       _CONTEXT_ADVICE, Evidence(Source.SLOTS, f"slot n_ctx {ctx}", {
                                           "context_per_slot": ctx, "context_per_slot_asked": asked.context_per_slot}))
        fill = s.kv_cache_fill
        if fill is not None and not math.isnan(fill):
            out += self._lasting(EventKind.KV_CACHE_FULL, fill >= self._limits.kv_full, fill < self._limits.kv_clear,
                                 Severity.WARNING, f"The KV cache is {fill * 100:.0f} % full: new requests wait for "
                                 "room, or the server shifts contexts to make it.",
                                 "Lower parallel or the context, or quantize the KV cache (q8_0) to give it room.",
                                 _fill_evidence(s, fill))
        deferred = s.requests_deferred
        if deferred is not None:
            out += self._lasting(EventKind.REQUESTS_DEFERRED, deferred > 0, deferred == 0, Severity.INFO,
                                 f"{deferred} request{'s wait' if deferred != 1 else ' waits'} in the server's queue for a "
                                 "free slot.", "More parallel slots serve them at once, if the VRAM price fits; "
                                 "otherwise this is the queue doing its job.",
                                 Evidence(Source.METRICS, f"requests deferred {deferred}",
                                          {"requests_deferred": deferred}))
        return out

    def _on_gpu(self, g: GpuSample) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        if g.slowdowns:
            names = ", ".join(sorted(r.value for r in g.slowdowns))
            severe = bool(g.slowdowns & _SEVERE_SLOWDOWNS)
            out += self._lasting(EventKind.GPU_SLOWDOWN, True, False, Severity.SEVERE if severe else Severity.WARNING,
                                 f"The GPU lowers its clocks ({names})"
                                 + (f" at {g.temperature_c:.0f} °C" if not math.isnan(g.temperature_c) else "")
                                 + (f", {g.power_w:.0f} W" if not math.isnan(g.power_w) else "")
                                 + ": tokens come slower than the card can make them.",
                                 _SLOWDOWN_ADVICE, Evidence(Source.GPU, f"clock-event reasons: {names}", _gpu_figures(g)),
                                 value=frozenset(g.slowdowns))
        else:
            out += self._lasting(EventKind.GPU_SLOWDOWN, False, True, Severity.WARNING, "", "", None)
        total, used, server = g.memory_total_mib, g.memory_used_mib, g.server_memory_mib
        if not any(math.isnan(x) for x in (total, used, server)) and total > 0:
            others = max(0.0, used - server)
            if self._others_base_mib is None:
                self._others_base_mib = others
            self._others_base_mib = min(self._others_base_mib, others)
            free = g.memory_free_mib  # the driver's reserve is neither others' nor free
            rise = others - self._others_base_mib
            on = rise >= self._limits.vram_rise_mib and free < total * self._limits.vram_free_share
            severe = free < total * self._limits.vram_free_severe_share
            out += self._lasting(EventKind.VRAM_FROM_OTHERS, on, free >= total * self._limits.vram_clear_share,
                                 Severity.SEVERE if severe else Severity.WARNING,
                                 f"Other processes took {rise:.0f} MiB more GPU memory ({others:.0f} MiB now); "
                                 f"{free:.0f} MiB of {total:.0f} MiB is free: the next load or a longer context "
                                 "may not fit and spill to the CPU.",
                                 "Close what else uses the GPU (a browser, a game, another model server), or price "
                                 "the settings again with what is free now.",
                                 Evidence(Source.GPU, f"used {used:.0f} MiB, by the server {server:.0f} MiB, free "
                                          f"{free:.0f} MiB", {"others_mib": others, "others_rise_mib": rise,
                                                              "free_mib": free, "total_mib": total,
                                                              "reserved_mib": g.memory_reserved_mib}))
        return out

    def _on_status(self, st: ServerStatus) -> list[WatchEvent]:
        prev, self._status = self._status, st
        if st.state in (ServerState.STARTING, ServerState.STOPPING):
            self._server_prev = None  # the app (re)starts it: its counters starting over say nothing
        if st.state is ServerState.STARTING:
            self._own_start_pending = True
        if prev is None:
            return []
        lines = "\n".join(st.last_log_lines[-3:])
        if prev.state.is_running and st.state is ServerState.CRASHED:
            code = f" (exit code {st.exit_code})" if st.exit_code is not None else ""
            return [self._event(EventKind.SERVER_CRASHED, Severity.SEVERE, self._subject,
                                f"The server ended without being asked to{code}. {st.message}".strip(),
                                "Read the server's last log lines for its reason, then start it again.",
                                Evidence(Source.STATUS, lines or st.message,
                                         {"exit_code": float(st.exit_code)} if st.exit_code is not None else {}))]
        if prev.state is ServerState.RUNNING_ATTACHED and not st.state.is_running \
                and st.state is not ServerState.STOPPING:
            return [self._event(EventKind.SERVER_CRASHED, Severity.SEVERE, self._subject,
                                f"The server the app attached to stopped answering ({st.state.value}). "
                                f"{st.message}".strip(),
                                "Whoever runs it (a service manager, a desktop app) may restart it; check its log.",
                                Evidence(Source.STATUS, st.message or st.state.value))]
        restarted = (prev.state.is_running and st.state.is_running and prev.pid is not None
                     and st.pid is not None and st.pid != prev.pid)
        came_back = (prev.state in (ServerState.CRASHED, ServerState.STOPPED)
                     and st.state is ServerState.RUNNING_ATTACHED and self._had_attached)
        if st.state is ServerState.RUNNING_ATTACHED:
            self._had_attached = True
        if restarted or came_back:
            pids = f" (pid {prev.pid} -> {st.pid})" if restarted else ""
            return [self._event(EventKind.SERVER_RESTARTED, Severity.WARNING, self._subject,
                                f"The server started again behind the app's back{pids}: models, caches and counters "
                                "start over.", "Find who restarted it (a crash, a service manager, an update); "
                                "measurements across the restart are not one run.",
                                Evidence(Source.STATUS, st.message or st.state.value,
                                         {"pid": float(st.pid)} if st.pid is not None else {}))]
        return []

    def _on_reply(self, r: ReplyFacts) -> list[WatchEvent]:
        out: list[WatchEvent] = []
        if not r.refused_too_long and is_truncated(r.prompt_sent, r.prompt_used) and not self._cut_logged(r.at):
            how = "counted in the server's tokens" if r.prompt_counted else "estimated"
            ctx = f" at a context of {r.context_per_slot} tokens per slot" if r.context_per_slot else ""
            figures = {"prompt_tokens_sent": float(r.prompt_sent or 0), "prompt_tokens_used": float(r.prompt_used or 0)}
            out.append(self._event(EventKind.PROMPT_TRUNCATED, Severity.SEVERE, r.model,
                                   f"The server used {r.prompt_used} of the {r.prompt_sent} prompt tokens sent ({how})"
                                   f"{ctx} and said nothing: the answer is to a prompt that was not asked.",
                                   _CUT_ADVICE, Evidence(Source.REPLY, f"prompt tokens sent {r.prompt_sent}, used by "
                                                         f"the server {r.prompt_used}", figures), at=r.at))
        if r.load_s is not None:
            out += self._cold_load(r.model, r.load_s, Evidence(Source.REPLY, f"load {r.load_s:.2f} s"
                                   + (f", first token after {r.ttft_s:.2f} s" if r.ttft_s is not None else ""),
                                   {"load_s": r.load_s} | ({"ttft_s": r.ttft_s} if r.ttft_s is not None else {})))
        self._last_reply[r.model] = max(self._last_reply.get(r.model, 0.0), r.at)
        return out

    def _cut_logged(self, at: float) -> bool:
        """Whether the log already told of this reply's cut (the server logs it before it answers): the
        oldest cut no reply has matched yet, within the work window, is this one's."""
        while self._log_cuts and at - self._log_cuts[0] > self._limits.work_window_s:
            self._log_cuts.popleft()
        if self._log_cuts and self._log_cuts[0] <= at:
            self._log_cuts.popleft()
            return True
        return False

    # -- emitting --------------------------------------------------------------------------------------
    def _event(self, kind: EventKind, severity: Severity, subject: str, summary: str, advice: str,
               evidence: Evidence, *, at: float | None = None) -> WatchEvent:
        if at is None:
            at = self._dated
        clock = self._clock()
        now = clock if at is None else at
        mono = self._mono() - max(0.0, clock - now)  # on the live axis where it happened (before it, for a backlog)
        event = WatchEvent(kind, severity, now, summary, advice, (evidence,), subject or self._subject, mono)
        self._last_emit[(kind, event.subject)] = now
        return event

    def _once(self, kind: EventKind, severity: Severity, subject: str, summary: str, advice: str,
              evidence: Evidence) -> list[WatchEvent]:
        """An event from a signal that repeats (a shift per request): one per repeat_s per subject."""
        last = self._last_emit.get((kind, subject or self._subject))
        if last is not None and self._clock() - last < self._limits.repeat_s:
            return []
        return [self._event(kind, severity, subject, summary, advice, evidence)]

    def _condition(self, kind: EventKind, subject: str, value: object, severity: Severity, summary: str,
                   advice: str, evidence: Evidence) -> list[WatchEvent]:
        """A state read whole each time (the slots the server has): an event when its value changes."""
        key = (kind, subject)
        if self._active.get(key) == value:
            return []
        self._active[key] = value
        return [self._event(kind, severity, subject, summary, advice, evidence)]

    def _lasting(self, kind: EventKind, on: bool, off: bool, severity: Severity, summary: str, advice: str,
                 evidence: Evidence | None, *, value: object = True) -> list[WatchEvent]:
        """A condition read sample by sample: an event when it starts (or its value changes); over after
        clear_samples readings that say it is off. One that comes back as it was within repeat_s of clearing
        (a cache emptied by a shift and filled again) is the same episode."""
        key = (kind, self._subject)
        if on and evidence is not None:
            self._quiet.pop(key, None)
            if self._active.get(key) == value:
                return []
            self._active[key] = value
            cleared = self._cleared.pop(key, None)
            if cleared is not None and cleared[1] == value and self._clock() - cleared[0] < self._limits.repeat_s:
                return []
            return [self._event(kind, severity, self._subject, summary, advice, evidence)]
        if off and key in self._active:
            quiet = self._quiet.get(key, 0) + 1
            if quiet >= self._limits.clear_samples:
                self._cleared[key] = (self._clock(), self._active.pop(key))
                self._quiet.pop(key, None)
            else:
                self._quiet[key] = quiet
        return []

    def _publish(self, made: Iterable[WatchEvent]) -> list[WatchEvent]:
        events = list(made)
        if not events:
            return events
        with self._lock:
            self._events.extend(events)
        self._listeners.tell(events)
        return events


def _sizes(m: RunningModel) -> dict[str, float]:
    figures: dict[str, float] = {}
    if m.size_bytes is not None:
        figures["size_bytes"] = float(m.size_bytes)
    if m.size_vram_bytes is not None:
        figures["size_vram_bytes"] = float(m.size_vram_bytes)
    return figures


def _fill_evidence(s: ServerSample, fill: float) -> Evidence:
    """Where a KV-cache fill was read: the server's own ratio, or its slots' tokens over their context."""
    if s.slots and kv_fill_from_slots(s.slots) == fill:
        held = ", ".join(f"slot {slot.id} {slot.prompt_tokens} of {slot.n_ctx}" for slot in s.slots
                         if slot.busy and slot.prompt_tokens)
        return Evidence(Source.SLOTS, f"slots fill {fill:.2f}" + (f" ({held} tokens)" if held else ""),
                        {"kv_cache_fill": fill})
    return Evidence(Source.METRICS, f"KV-cache usage {fill:.2f}", {"kv_cache_fill": fill})


def _gpu_figures(g: GpuSample) -> dict[str, float]:
    figures = {"temperature_c": g.temperature_c, "power_w": g.power_w, "utilization_pct": g.utilization_pct,
               "sm_clock_mhz": g.sm_clock_mhz}
    return {k: v for k, v in figures.items() if not math.isnan(v)}


_CUT_ADVICE = ("Raise the context per slot to hold the longest prompt and its output (the fit panel prices it), "
               "or send shorter prompts.")
_SLOTS_ADVICE = ("The server lowers the slots when memory is short: free VRAM, lower the context or quantize the KV "
                 "cache so the slots asked fit, or ask for fewer.")
_CONTEXT_ADVICE = ("The server lowers the context when memory is short or the model's training context is smaller: "
                   "free VRAM, lower parallel, or quantize the KV cache.")
_SPILL_ADVICE = ("Free GPU memory (close other GPU programs, unload other models), or lower the context, parallel or "
                 "the KV-cache type until the fit panel says it fits.")
_SLOWDOWN_ADVICE = ("Improve the card's cooling or airflow, or lower its load; a power cap under full load is the card "
                    "at its limit, a thermal or hardware slowdown is not.")

__all__ = ["Listener", "WatchLimits", "Watchdog"]
