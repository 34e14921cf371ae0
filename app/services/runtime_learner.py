"""Learns the runtime allowance of this GPU model and driver from the loads the app sees, and keeps it.

Fed what the app already reads — the server's log (through the backend's LogSignalReader: the buffers a load
logged, where it started and ended), the GPU driver's samples (the server's process-tree memory) and the
server's loaded models — it takes each load's allowance as the smallest process reading after the load was
ready (its slots initialised or its load finished, after the compute buffers) and before the next load began,
less the sum of the buffers the load logged on the GPU. It refuses what is no allowance: a load with no GPU
buffer (a CPU build, the embedded engine), one whose buffers span more than one GPU (which GPU the reading is of
cannot be told), a reading while more than one model is loaded (another process's runtime and buffers are in
the reading), a negative figure or one over 4 GiB. Where the server reports its loaded models (fed here), a load's
readings count only once a report after the load said one model was loaded (a server that keeps an earlier
model loaded beside the new one runs two engines, and its unloads are not logged); until then they wait. Layers on the CPU change nothing: only GPU buffers count.

Each card's figure is the median of its recent loads (app.core.memory.allowance_learning); a card is its GPU
model and driver version, from the GPU backend's GpuInfo. The figures are kept through an AllowanceBook (the
state folder's runtime_allowance.json); one that cannot be read or written is reported and the default priced.

Qt-free and thread-safe: the feeds may come from any thread (the log follower, the sampler, the loop), and
listeners are called on the feeding thread, outside the lock."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from app.core.memory.allowance import DEFAULT_ALLOWANCE, RuntimeAllowance
from app.core.memory.allowance_learning import LearnedAllowance, allowance_from
from app.core.models import RunningModel
from app.core.ports.log_signals import LogSignalReader
from app.core.telemetry import GpuInfo, GpuSample
from app.core.units import MIB
from app.core.watch.signals import BufferLogged, EngineExited, LaunchSeen, LoadFinished, LogSignal

log = logging.getLogger(__name__)

Listener = Callable[[RuntimeAllowance], None]
from app.services.listeners import Listeners


class AllowanceBook(Protocol):
    """Where the learnt allowances are kept (app.adapters.storage.allowance_store.AllowanceStore)."""

    problem: str

    def load(self) -> list[LearnedAllowance]:
        """Every card's allowance kept ([] when none or unreadable: `problem` says why)."""
        ...

    def save(self, cards: list[LearnedAllowance]) -> bool:
        """Keep every card's allowance; False when it could not be written (`problem` says why)."""
        ...


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class _Load:
    """One load as its log tells it: the buffers it logged, whether it is ready, its smallest reading since."""

    def __init__(self) -> None:
        self.gpu_bytes: dict[int, int] = {}  # device index -> bytes of its buffers
        self.non_model = False  # a buffer other than the model's was logged (the next model buffer: a new load)
        self.computed = False  # its compute buffers were logged
        self.ready = False  # the load finished: readings from now on are of it
        self.learnt = False  # a figure of this load is kept (a lower reading replaces it)
        self.best: int | None = None  # the smallest figure taken so far
        self.alone = False  # a report of the loaded models after it was ready listed one model at most
        self.waiting: int | None = None  # the smallest figure read before that report


class RuntimeLearner:
    """Learns and keeps the runtime allowance per GPU model and driver; see the module's docstring."""

    def __init__(self, book: AllowanceBook | None, gpu: GpuInfo | None, *,
                 now_iso: Callable[[], str] = _now_iso) -> None:
        """`book` keeps the figures (None: learnt for this session only); `gpu` is the card the samples are of
        (None: no GPU here, nothing is learnt)."""
        self._book = book
        self._gpu = gpu
        self._now_iso = now_iso
        self._lock = threading.Lock()
        self._listeners: Listeners[RuntimeAllowance] = Listeners("runtime allowance")
        self._cards: dict[tuple[str, str], LearnedAllowance] = {}
        if book is not None:
            try:
                self._cards = {card.key: card for card in book.load()}
            except Exception:  # noqa: BLE001 - a broken store never takes the app down: the default is priced
                log.exception("the learnt runtime allowances could not be read")
        self._reader: LogSignalReader | None = None
        self._load: _Load | None = None
        self._models_loaded = 0
        self._reports_loaded = False  # the server's loaded models were fed: a load's readings wait for a report

    # -- reading back ------------------------------------------------------------------------------------------
    @property
    def problem(self) -> str:
        """What went wrong keeping the figures ('' when nothing did)."""
        return self._book.problem if self._book is not None else ""

    def allowance(self, gpu: GpuInfo | None = None) -> RuntimeAllowance:
        """The figure to price a process on `gpu` (default: the card fed) with: learnt there, else the default."""
        card = gpu if gpu is not None else self._gpu
        if card is None:
            return DEFAULT_ALLOWANCE
        with self._lock:
            learnt = self._cards.get((card.name, card.driver))
        return learnt.allowance() if learnt is not None else DEFAULT_ALLOWANCE

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call `listener` with the card's figure each time it changes; returns the unsubscribe function."""
        return self._listeners.subscribe(listener)

    # -- feeds -------------------------------------------------------------------------------------------------
    def follow(self, reader: LogSignalReader | None) -> None:
        """Another server (or the same one started again) is followed, its log read by `reader` (None: its log
        is not read here, only signals fed): the load under way is forgotten."""
        with self._lock:
            self._reader = reader
            self._load = None
            self._models_loaded = 0

    def feed_log(self, line: str) -> None:
        """One line of the followed server's log, in the order logged."""
        reader = self._reader
        if reader is None:
            return
        try:
            signals = list(reader.read(line))
        except Exception:  # noqa: BLE001 - a reader never takes the log's follower down
            return
        for signal in signals:
            self.feed_signal(signal)

    def feed_signal(self, signal: LogSignal) -> None:
        """One signal read from the server's log."""
        with self._lock:
            self._on_signal(signal)

    def feed_loaded(self, models: Sequence[RunningModel]) -> None:
        """The server's loaded models now (more than one: readings are of several processes, none is taken)."""
        changed: RuntimeAllowance | None = None
        with self._lock:
            self._models_loaded = len(models)
            self._reports_loaded = True
            load = self._load
            if load is not None and load.ready:
                if len(models) > 1:
                    load.alone, load.waiting = False, None
                elif not load.alone:
                    load.alone = True
                    waiting, load.waiting = load.waiting, None
                    if waiting is not None:
                        changed = self._take(load, waiting)
        if changed is not None:
            self._tell(changed)

    def feed_gpu(self, sample: GpuSample) -> None:
        """One reading of the GPU: the server's process-tree memory, taken once its load is ready."""
        changed: RuntimeAllowance | None = None
        with self._lock:
            load, gpu = self._load, self._gpu
            if gpu is None or load is None or not load.ready or self._models_loaded > 1:
                return
            memory = sample.server_memory_mib
            if math.isnan(memory) or len(load.gpu_bytes) != 1:
                return
            size = allowance_from(round(memory * MIB), sum(load.gpu_bytes.values()))
            if size is None:
                return
            if self._reports_loaded and not load.alone:  # not yet known to be the only engine: wait for a report
                load.waiting = size if load.waiting is None else min(load.waiting, size)
                return
            changed = self._take(load, size)
        if changed is not None:
            self._tell(changed)

    # -- internals (under the lock) ---------------------------------------------------------------------------
    def _on_signal(self, signal: LogSignal) -> None:
        if isinstance(signal, BufferLogged):
            load = self._load
            if load is None or (signal.kind == "model" and (load.non_model or load.ready)):
                self._load = load = _Load()
            if signal.kind != "model":
                load.non_model = True
            if signal.kind == "compute":
                load.computed = True
            if signal.device is not None:
                load.gpu_bytes[signal.device] = load.gpu_bytes.get(signal.device, 0) + signal.size_bytes
        elif isinstance(signal, LaunchSeen) and signal.model:
            self._load = None  # the server starts an engine for a load: the one before is over
        elif isinstance(signal, LaunchSeen | LoadFinished):
            if self._load is not None and self._load.computed:
                self._load.ready = True
        elif isinstance(signal, EngineExited):
            self._load = None  # the engine that loaded it is gone (a server listening again is no such sign: the
            # llama-server listens just after its load, and a new load's buffers start a new one anyway)

    def _take(self, load: _Load, size: int) -> RuntimeAllowance | None:
        """The load's figure read lower than before kept (None: not lower, nothing changed)."""
        if self._gpu is None or (load.best is not None and size >= load.best):
            return None
        load.best = size
        return self._keep(self._gpu, load, size)

    def _keep(self, gpu: GpuInfo, load: _Load, size: int) -> RuntimeAllowance:
        key = (gpu.name, gpu.driver)
        card = self._cards.get(key)
        at = self._now_iso()
        if card is None:
            card = LearnedAllowance.first(gpu.name, gpu.driver, size, at)
        elif load.learnt:
            card = card.with_newest(size, at)
        else:
            card = card.with_load(size, at)
        load.learnt = True
        self._cards[key] = card
        if self._book is not None:
            try:
                self._book.save(list(self._cards.values()))
            except Exception:  # noqa: BLE001 - the figure is used for this session even when it cannot be kept
                log.exception("the learnt runtime allowance could not be kept")
        log.info("runtime allowance on %s (driver %s): %.0f MiB from this load, %.0f MiB priced", gpu.name,
                 gpu.driver, size / MIB, card.size_bytes / MIB)
        return card.allowance()

    def _tell(self, allowance: RuntimeAllowance) -> None:
        self._listeners.tell((allowance,))


__all__ = ["AllowanceBook", "RuntimeLearner"]
