"""What the composition root gives every page: one typed context, so that pages get the backend's spec,
the server's view-model and the stores, probes and runners they use without picking or building any."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.core.memory.host import HostMemory
from app.core.ports.backend import BackendSpec
from app.core.ports.contention import ContentionProbeFactory
from app.core.ports.stores import BenchHistoryStore, PresetStorage
from app.core.ports.tasks import CoroutineRunner
from app.core.saved_format import SavedFormat
from app.core.server_telemetry import ServerTelemetryRing
from app.core.telemetry import GpuBackend
from app.core.telemetry_buffers import TelemetryBuffers
from app.core.throughput import TokenMeter
from app.ui.server.controller import ServerController
from app.services.runtime_learner import RuntimeLearner
from app.services.watchdog import Watchdog


def _no_host_memory() -> HostMemory | None:
    return None


@dataclass(frozen=True, kw_only=True)
class PageContext:
    """Everything a page may use; each page takes `Page(context, parent=None)` and reads what it needs."""

    # The server kind: its capabilities, settings mapping, words (reply_words, display_name) and seam factories.
    backend: BackendSpec
    # The server's view-model: lifecycle, status, loaded models, model lookups.
    server: ServerController
    # Runs the pages' coroutines (the app's asyncio loop thread).
    loop: CoroutineRunner
    # The GPU's facts and readings (a null backend, with its reason, where there is none).
    gpu: GpuBackend
    # Writes a file atomically (exports): the old file stays whole if writing fails.
    write_file: Callable[[Path, bytes], None]
    # What people call each server kind a saved run may name (the backends' display names); a kind it does not
    # know is shown as stored.
    server_labels: Mapping[str, str]
    # The names of the saved documents' format (the run JSON the Benchmark page exports).
    saved_format: SavedFormat
    # The sampler's history of GPU and host readings (empty until it samples).
    samples: TelemetryBuffers = field(default_factory=TelemetryBuffers)
    # The server's own report (slots, queue, counters); None where the backend has none.
    server_ring: ServerTelemetryRing | None = None
    # Tokens/s of the app's own requests (the dashboard's throughput), fed by the Prompt and Benchmark pages.
    meter: TokenMeter | None = None
    # The prompt presets; None keeps the built-ins for the session.
    presets: PresetStorage | None = None
    # The benchmark history (SQLite); the Benchmark page needs one.
    history: BenchHistoryStore | None = None
    # The RAM a sweep point can have, for pricing (read in a worker thread).
    host_memory: Callable[[], HostMemory | None] = _no_host_memory
    # What else used the device over each sweep point's window; None: not measured.
    contention: ContentionProbeFactory | None = None
    # What the server does without saying so (events with evidence); the composition root feeds it the
    # server's log, status, slots, loaded models and GPU readings, and pages feed it their replies.
    watchdog: Watchdog | None = None
    # The runtime allowance learnt per GPU model and driver from the loads the app sees (fed by the composition
    # root where it feeds the watchdog); pages price their GPU with it. None: the default figure is priced.
    runtime_allowance: RuntimeLearner | None = None

    @property
    def server_name(self) -> str:
        """The server's name for people, e.g. "llama-server"."""
        return self.backend.display_name


__all__ = ["PageContext"]
