"""What a backend reads out of its server's log and replies, in neutral terms, for the watchdog.

Each backend knows its server's log lines (app.core.ports.log_signals.LogSignalReader turns one line into
these); the watchdog (app.services.watchdog) knows what they mean together: a launch with fewer slots
than asked, layers placed on the CPU after a load priced to fit, a load while replies were streaming.
Every signal keeps the line it was read from, as logged, for the event's evidence, and the time the log
gives it where it gives one (`logged_at`): a log followed from its last lines tells of what happened before
the app looked, and an event read there is dated when it happened, not when it was read."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.replies import FinalFigures


@dataclass(frozen=True)
class LaunchSeen:
    """The engine that serves a model started with these settings (as its command line or its own load
    log says); None where the line does not say."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    parallel: int | None = None  # slots
    context_total: int | None = None  # context over all slots, tokens
    context_per_slot: int | None = None  # where the server says it per slot
    gpu_layers: int | None = None  # layers asked onto the GPU (-1/None: the server decides)
    model: str = ""  # the model file or name it loads


@dataclass(frozen=True)
class LayersPlaced:
    """Where a load put the model's layers: `on_gpu` of `total` on the GPU."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    on_gpu: int
    total: int


@dataclass(frozen=True)
class LoadFinished:
    """A model load finished after `seconds`."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    seconds: float | None = None


@dataclass(frozen=True)
class ContextShifted:
    """A slot's context was full and the server dropped tokens to go on."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    slot: int | None = None
    dropped_tokens: int | None = None


@dataclass(frozen=True)
class CacheExhausted:
    """The server found no room in its KV cache for a batch (it defers, shrinks or fails the request)."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log


@dataclass(frozen=True)
class PromptCut:
    """The server says it cut a prompt: kept `kept` of `sent` tokens (None where it does not say)."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    sent: int | None = None
    kept: int | None = None


@dataclass(frozen=True)
class EngineExited:
    """The engine serving a model ended; `error` as the log gives it ("exit status 2", "signal: killed")."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    error: str = ""


@dataclass(frozen=True)
class ServerListening:
    """The server itself (re)started and listens; `version` where it says."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    version: str = ""


@dataclass(frozen=True)
class BufferLogged:
    """The engine logged one buffer its load allocated (llama.cpp's `CUDA0 KV buffer size = 6400.00 MiB`): what it
    holds (model, KV, RS, compute, output), its size and the device whose memory holds it (None: host memory).
    A load logs its model buffers first, then its caches, then its compute buffers."""

    line: str
    logged_at: float | None = field(default=None, kw_only=True, compare=False)  # when logged, per the log
    buffer: str  # the buffer's name as logged ("CUDA0", "CPU_Mapped", "CUDA_Host")
    kind: str  # "model", "KV", "RS", "compute" or "output"
    size_bytes: int
    device: int | None = None  # the GPU's index for a device buffer; None for one in host memory


LogSignal = (LaunchSeen | LayersPlaced | LoadFinished | ContextShifted | CacheExhausted | PromptCut | EngineExited
             | ServerListening | BufferLogged)


@dataclass(frozen=True)
class Asked:
    """What the user's settings asked the server for, to hold what it really did against; None: not asked
    (the server decides)."""

    parallel: int | None = None
    context_per_slot: int | None = None
    fits_on_gpu: bool | None = None  # the load was priced to fit on the GPU whole (None: not priced)
    model: str = ""

    @classmethod
    def of(cls, parallel: int | None, context_per_slot: int | None, *, planned_parallel: int | None = None,
           planned_context: int | None = None, fits_on_gpu: bool | None = None, model: str = "") -> Asked:
        """What to hold the server to: the settings' own parallel and context where they set them, else what
        the launch was planned with (a server's own default is what it plans, not a promise broken)."""
        return cls(parallel=parallel or planned_parallel, context_per_slot=context_per_slot or planned_context,
                   fits_on_gpu=fits_on_gpu, model=model)


@dataclass(frozen=True)
class ReplyFacts:
    """One finished (or failed) reply as the watchdog needs it; tokens and seconds.

    `prompt_sent` is the prompt's length in the server's own tokens where it could be counted (else an
    estimate, `prompt_counted` False); `prompt_used` what the server says it used, cached tokens
    included."""

    model: str
    at: float  # wall-clock time the reply ended
    prompt_sent: int | None = None
    prompt_counted: bool = False
    prompt_used: int | None = None
    load_s: float | None = None  # the server's time loading the model for this request
    ttft_s: float | None = None
    refused_too_long: bool = False  # the server refused the prompt as longer than a slot's context
    context_per_slot: int | None = None  # the context per slot in force, where known

    @classmethod
    def of(cls, final: FinalFigures | None, *, model: str, at: float, prompt_sent: int | None = None,
           prompt_counted: bool = False, ttft_s: float | None = None, refused_too_long: bool = False,
           context_per_slot: int | None = None) -> ReplyFacts:
        """From a reply's final figures: the prompt tokens the server used are those it evaluated plus those
        it took from its cache (where it tells them apart), its load time in seconds."""
        used = load_s = None
        if final is not None:
            used = final.prompt_tokens
            if used is not None and final.cached_prompt_tokens is not None:
                used += final.cached_prompt_tokens
            load_s = final.load_ms / 1e3 if final.load_ms is not None else None
        return cls(model=model, at=at, prompt_sent=prompt_sent, prompt_counted=prompt_counted, prompt_used=used,
                   load_s=load_s, ttft_s=ttft_s, refused_too_long=refused_too_long, context_per_slot=context_per_slot)


__all__ = ["Asked", "BufferLogged", "CacheExhausted", "ContextShifted", "EngineExited", "LaunchSeen", "LayersPlaced", "LoadFinished",
           "LogSignal", "PromptCut", "ReplyFacts", "ServerListening"]
