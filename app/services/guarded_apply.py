"""Apply settings to a managed server, check what really happened, and roll back if it broke."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from app.core.server.apply_check import ApplyJudgement, ApplyObservation, judge
from app.core.errors import ServerError, OutOfMemory, is_oom_message
from app.core.memory.estimator import VramEstimate
from app.core.ports.catalog import CatalogFactory
from app.core.ports.server import ServerControl
from app.core.server.state import ServerState
from app.core.server.settings import ServerSettings
from app.core.telemetry import GpuBackend


@dataclass(frozen=True)
class ApplyReport:
    """What one guarded apply did: the settings tried, the judgement, and whether it rolled back."""

    tried: ServerSettings
    restored: ServerSettings | None  # the last good settings, when a rollback happened
    judgement: ApplyJudgement
    observation: ApplyObservation
    predicted: VramEstimate | None
    rollback_ok: bool = True  # False when even the restored settings did not come back up
    at: float = 0.0  # time.time()

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready record for history: settings, prediction, measurement, outcome."""
        p = self.predicted
        return {
            "at": self.at,
            "tried": self.tried.to_json(),
            "restored": self.restored.to_json() if self.restored else None,
            "kept": self.judgement.keep,
            "reason": self.judgement.reason,
            "predicted_vram_bytes": self.judgement.predicted_vram_bytes,
            "predicted_verdict": p.verdict if p else None,
            "measured_vram_bytes": self.judgement.measured_vram_bytes,
            "observation": {k: (None if isinstance(v, float) and math.isnan(v) else v)
                            for k, v in dataclasses.asdict(self.observation).items()},
            "rollback_ok": self.rollback_ok,
        }


class GuardedApplier:
    """Restart with new settings, load the model with a tiny request, read the loaded models and NVML, judge.

    Runs on the asyncio loop thread. It only restarts servers the supervisor manages. The record
    (SQLite) and the NVML reading run in worker threads: the loop never waits on the disk or the driver."""

    def __init__(self, supervisor: ServerControl, client_factory: CatalogFactory, gpu: GpuBackend,
                 record: Callable[[dict[str, Any]], object] | None = None, load_timeout_s: float = 300.0) -> None:
        self._supervisor = supervisor
        self._client_factory = client_factory
        self._gpu = gpu
        self._record = record
        self._load_timeout_s = load_timeout_s

    async def apply(self, new: ServerSettings, last_good: ServerSettings, model: str | None,
                    predicted: VramEstimate | None) -> ApplyReport:
        """Apply `new`; on a crash, an OOM or an unexpected CPU spill, restore `last_good`."""
        obs = await self._try(new, model)
        judgement = judge(predicted, obs, self._supervisor.program)
        restored = None
        rollback_ok = True
        if judgement.rollback:
            restored = last_good
            status = await self._supervisor.restart(last_good)
            rollback_ok = status.state is ServerState.RUNNING_MANAGED
        report = ApplyReport(new, restored, judgement, obs, predicted, rollback_ok, time.time())
        if self._record is not None:
            await asyncio.to_thread(self._record, report.to_record())
        return report

    async def _try(self, settings: ServerSettings, model: str | None) -> ApplyObservation:
        status = await self._supervisor.restart(settings)
        if status.state is not ServerState.RUNNING_MANAGED:
            return ApplyObservation(server_running=False, server_message=status.message, model=model)
        if not model:
            return ApplyObservation(server_running=True)
        async with self._client_factory(settings.base_url) as client:
            try:
                await client.load(model)
            except ServerError as exc:
                # A load that kills the server shows up as a crash; check before blaming the model.
                running = self._supervisor.status.state is ServerState.RUNNING_MANAGED
                oom = isinstance(exc, OutOfMemory) or is_oom_message(exc.message)
                return ApplyObservation(server_running=running or oom, server_message=self._supervisor.status.message,
                                        model=model, load_error=exc.message, load_error_is_oom=oom)
            # Loaded: the server answered for it. Not every server lists it with its memory split in ps()
            # (llama-server lists nothing), so being loaded is not read from that list.
            # /api/ps names a model in full ("smollm2:latest") however it was asked for ("smollm2").
            full = model if ":" in model.rsplit("/", 1)[-1] else f"{model}:latest"
            loaded = [m for m in await client.ps() if m.name in (model, full) or m.model in (model, full)]
        sample = (await asyncio.to_thread(self._gpu.sample, time.monotonic(), list(self._supervisor.server_pids()))
                  if self._gpu.available else None)
        entry = loaded[0] if loaded else None
        return ApplyObservation(
            server_running=True, model=model, model_loaded=True,
            ps_size_bytes=entry.size_bytes if entry else None,
            ps_size_vram_bytes=entry.size_vram_bytes if entry else None,
            ps_context_length=entry.context_length if entry else None,
            gpu_used_mib=sample.memory_used_mib if sample else math.nan,
            server_gpu_mib=sample.server_memory_mib if sample else math.nan,
        )
