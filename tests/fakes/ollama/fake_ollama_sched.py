"""Scheduler of the stand-in Ollama server: model loads with a bounded queue of requests waiting for
them (OLLAMA_MAX_QUEUE), decode slots with an unbounded FIFO queue (a loaded model's requests wait in
its runner, as the real 0.32.15 was recorded doing), the load's log lines for the version reported,
and keep-alive expiry, as a mixin of FakeOllama."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any
from collections.abc import Callable

from tests.fakes.ollama.fake_ollama_infer import ClientGone, Refused
from tests.fakes.ollama.fake_ollama_loadlog import (fail_quantized_kv_without_flash, log_loaded, log_start,
                                                    runs_llama_server)
from tests.fakes.ollama.fake_ollama_models import GRAPH_BYTES_FLASH, FakeModel
from tests.fakes.ollama.fake_ollama_wire import FOREVER_S, Exchange, rfc3339_local, slog_line
from app.core.units import GIB

QUEUE_FULL_MESSAGE = "server busy, please try again.  maximum pending requests exceeded"


def _human_gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


class SchedulerMixin:
    """Slots, loads and expiry; FakeOllama provides the attributes declared here."""

    num_parallel: int
    max_queue: int
    context_length: int | None
    kv_cache_type: str
    flash_attention: bool | None
    keep_alive_s: float
    load_s: float
    version: str
    gpu_memory_bytes: int | None
    loaded: dict[str, dict[str, Any]]
    _expires: dict[str, float]
    _lock: threading.RLock
    _load_lock: threading.Lock
    _slot_cv: threading.Condition
    _active: int
    _loading: int  # requests in ensure_loaded's slow path: the one loading and those waiting for it
    _queue: deque
    log: Callable[[str], None]

    def acquire_slot(self, ex: Exchange) -> None:
        """Wait (FIFO) for one of num_parallel decode slots. No 503 here: the real server passes a
        loaded model's requests to its llama-server, which queues them without a bound."""
        with self._slot_cv:
            if self._active < self.num_parallel and not self._queue:
                self._active += 1
                return
            ticket = object()
            self._queue.append(ticket)
            self._slot_cv.notify_all()  # wakes wait_for_queue observers
            try:
                while not (self._queue[0] is ticket and self._active < self.num_parallel):
                    self._slot_cv.wait(0.05)
                    if ex.peer_gone():
                        raise ClientGone("client left while queued")
            except BaseException:
                self._queue.remove(ticket)
                self._slot_cv.notify_all()
                raise
            self._queue.popleft()
            self._active += 1
            self._slot_cv.notify_all()

    @property
    def active_slots(self) -> int:
        """Decode slots in use now."""
        return self._active

    def release_slot(self) -> None:
        """Give a decode slot back and wake the queue."""
        with self._slot_cv:
            self._active -= 1
            self._slot_cv.notify_all()

    def default_context_length(self) -> int:
        """num_ctx when neither request nor model sets one (VRAM-tiered from 0.15.5)."""
        if self.context_length:
            return int(self.context_length)
        parts = tuple(int(p) for p in self.version.split("-")[0].split(".")[:3] if p.isdigit())
        if parts >= (0, 15, 5) and self.gpu_memory_bytes:
            return 262144 if self.gpu_memory_bytes >= 47 * GIB else 32768 if self.gpu_memory_bytes >= 23 * GIB else 4096
        return 4096

    def effective_kv_type(self) -> str:
        """KV cache type in force: quantized types need flash attention (on unless disabled)."""
        if self.kv_cache_type != "f16" and self.flash_attention is False:
            return "f16"
        return self.kv_cache_type

    def ensure_loaded(self, ex: Exchange, model: FakeModel, num_ctx: Any, keep_alive_s: float | None) -> None:
        """Load `model` (taking load_s) unless it is loaded with the same context already. One request
        loads and up to max_queue wait for it; more are refused with 503, as the real scheduler does."""
        wanted = int(num_ctx) if num_ctx else int(model.parameters.get("num_ctx") or self.default_context_length())
        ctx = min(max(wanted, 4), model.context_length)
        self._purge_expired()
        with self._lock:
            entry = self.loaded.get(model.name)
            if entry is not None and entry["context_length"] == ctx:
                return
        with self._slot_cv:
            if self._loading >= 1 + self.max_queue:
                raise Refused(503, QUEUE_FULL_MESSAGE)
            self._loading += 1
            self._slot_cv.notify_all()  # wakes wait_for_queue observers
        try:
            self._load(ex, model, wanted, ctx, keep_alive_s)
        finally:
            with self._slot_cv:
                self._loading -= 1
                self._slot_cv.notify_all()

    def _load(self, ex: Exchange, model: FakeModel, wanted: int, ctx: int, keep_alive_s: float | None) -> None:
        with self._load_lock:
            self._purge_expired()
            entry = self.loaded.get(model.name)
            if entry is not None and entry["context_length"] == ctx:
                return
            if ctx < wanted:
                self.log(slog_line("WARN", "server.go:165", "requested context size too large for model",
                                   num_ctx=wanted, n_ctx_train=model.context_length))
            upstream = runs_llama_server(self.version)
            if upstream and self.kv_cache_type != "f16" and self.flash_attention is False:
                fail_quantized_kv_without_flash(self, model, ctx)
            kv_type = self.effective_kv_type()
            if kv_type != self.kv_cache_type:  # before 0.30: Ollama fell back to an f16 cache
                self.log(slog_line("WARN", "server.go:211", "quantized kv cache requested but flash attention disabled",
                                   type=self.kv_cache_type))
            layers = int(model.model_info.get(f"{model.family}.block_count") or 32) + 1
            if upstream:
                log_start(self, model, ctx)
            else:
                self.log(slog_line("INFO", "server.go:400", "starting runner", model=model.name,
                                   num_ctx=ctx * self.num_parallel, parallel=self.num_parallel))
            ex.wait_until(time.monotonic() + self.load_s)
            size = model.loaded_bytes(ctx * self.num_parallel, kv_type)
            others = sum(e["size_vram"] for n, e in self.loaded.items() if n != model.name)
            size_vram = size if self.gpu_memory_bytes is None else max(0, min(size, self.gpu_memory_bytes - others))
            kv = size - model.size - (0 if model.vram_bytes is not None else GRAPH_BYTES_FLASH)
            if upstream:
                log_loaded(self, model, layers, size, size_vram, max(kv, 0), self.load_s)
            else:
                self._log_go_engine_load(layers, size, size_vram, kv)
            with self._lock:
                self.loaded[model.name] = {
                    "name": model.name, "model": model.name, "size": size, "digest": model.digest,
                    "details": model.details(), "expires_at": "", "size_vram": size_vram, "context_length": ctx}
            self.touch(model.name, keep_alive_s, unload_on_zero=False)

    def _log_go_engine_load(self, layers: int, size: int, size_vram: int, kv: int) -> None:
        """The lines Ollama's own Go engine (0.12 to 0.2x) printed for a load."""
        self.log(slog_line("INFO", "ggml.go:487", "offloading", **{"layers.offload": round(layers * size_vram / size),
                                                                    "layers.model": layers}))
        self.log(slog_line("INFO", "device.go:212", "kv cache", device="CUDA0", size=_human_gib(max(kv, 0))))
        self.log(slog_line("INFO", "device.go:217", "total memory", size=_human_gib(size)))
        self.log(slog_line("INFO", "server.go:1289", f"llama runner started in {self.load_s:.2f} seconds"))

    def touch(self, name: str, keep_alive_s: float | None, unload_on_zero: bool = True) -> None:
        """Restart a loaded model's keep-alive timer (0 unloads it once the request is done)."""
        seconds = self.keep_alive_s if keep_alive_s is None else keep_alive_s
        with self._lock:
            if name not in self.loaded:
                return
            if seconds == 0 and unload_on_zero:
                self.unload(name)
                return
            expires = time.time() + (seconds if seconds != FOREVER_S else 1e12)
            self._expires[name] = expires
            self.loaded[name]["expires_at"] = rfc3339_local(expires)

    def unload(self, name: str) -> None:
        """Drop a model from memory."""
        with self._lock:
            if self.loaded.pop(name, None) is not None:
                self.log(slog_line("INFO", "sched.go:559", "unloading", model=name))
            self._expires.pop(name, None)

    def _purge_expired(self) -> None:
        now = time.time()
        with self._lock:
            for name in [n for n, t in self._expires.items() if t <= now]:
                self.unload(name)

    def loaded_snapshot(self) -> list[dict[str, Any]]:
        """Copies of the /api/ps entries, expired ones removed."""
        self._purge_expired()
        with self._lock:
            return [dict(e) for e in self.loaded.values()]

    def expiry_of(self, name: str) -> float:
        """Epoch seconds when a loaded model expires (inf-like for keep_alive < 0)."""
        return self._expires.get(name, 0.0)

    @property
    def queued(self) -> int:
        """Requests waiting now: for a decode slot, or for a model another request is loading."""
        with self._slot_cv:
            return len(self._queue) + max(0, self._loading - 1)

    def wait_for_queue(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least `count` requests wait (for a slot or a load); False on timeout."""
        with self._slot_cv:
            return self._slot_cv.wait_for(lambda: len(self._queue) + max(0, self._loading - 1) >= count, timeout)
