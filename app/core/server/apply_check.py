"""After settings are applied: compare what happened with what was predicted, and decide on a rollback."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.memory.estimator import VramEstimate
from app.core.memory.verdict import Verdict
from app.core.units import GIB, MIB

# A server's words when the process it started to run the model exited ("<runner> process has
# terminated: …", whatever it calls the runner).
RUNNER_TERMINATED = "process has terminated"


@dataclass(frozen=True)
class ApplyObservation:
    """What the app saw after restarting with new settings and loading the model."""

    server_running: bool
    server_message: str = ""  # why it is not running (crash text), if so
    model: str | None = None
    model_loaded: bool = False  # the server answered the test load for `model`: it serves it now
    load_error: str | None = None  # the server's message when the test load failed
    load_error_is_oom: bool = False
    ps_size_bytes: int | None = None
    ps_size_vram_bytes: int | None = None
    ps_context_length: int | None = None
    gpu_used_mib: float = math.nan
    server_gpu_mib: float = math.nan


@dataclass(frozen=True)
class ApplyJudgement:
    """The outcome: keep the settings or restore the last good ones, with the reason in words."""

    keep: bool
    reason: str  # one sentence, with numbers
    measured_vram_bytes: int | None
    predicted_vram_bytes: int | None

    @property
    def rollback(self) -> bool:
        return not self.keep


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def measured_vram_bytes(obs: ApplyObservation) -> int | None:
    """The best measurement of the server's GPU memory: NVML's per-process figure, else the server's own report of the loaded model."""
    if not math.isnan(obs.server_gpu_mib):
        return int(obs.server_gpu_mib * MIB)
    return obs.ps_size_vram_bytes


def judge(predicted: VramEstimate | None, obs: ApplyObservation, server: str = "The server") -> ApplyJudgement:
    """Keep or roll back: a crash, an out-of-memory load, or layers on the CPU against a fits verdict roll back.
    `server` is how the reasons name the server (its display name)."""
    measured = measured_vram_bytes(obs)
    pred = predicted.total_gpu_bytes if predicted is not None else None

    def verdict(keep: bool, reason: str) -> ApplyJudgement:
        return ApplyJudgement(keep, reason, measured, pred)

    if not obs.server_running:
        return verdict(False, f"The server did not survive the new settings: {obs.server_message or 'it exited'}.")
    if obs.load_error is not None:
        if obs.load_error_is_oom:
            want = f" (predicted {_gib(pred)} on the GPU)" if pred is not None else ""
            return verdict(False, f"Loading {obs.model} ran out of memory{want}: {obs.load_error}")
        if RUNNER_TERMINATED in obs.load_error:
            # A server that runs the model in a child process it starts with these settings: when that
            # process exits (a quantized KV cache without flash attention), every request fails alike.
            return verdict(False, f"The server runs, but the model runner it started for {obs.model} with these "
                                  f"settings exited, so every request would fail: {obs.load_error}")
        return verdict(True, f"The server runs, but loading {obs.model} failed: {obs.load_error}")
    if not (obs.model_loaded or obs.ps_size_bytes is not None):
        return verdict(True, "The server runs with the new settings; no model was loaded to check memory.")
    if obs.ps_size_bytes is None or obs.ps_size_vram_bytes is None:
        # A server that does not list how its model sits in memory (one that keeps one model loaded and
        # says nothing of its GPU/CPU split): the GPU driver's reading of its processes is the check.
        if measured is None:
            return verdict(True, f"{obs.model} is loaded with the new settings. The server does not report how "
                                 "much of it sits on the GPU, and there is no GPU reading here to check memory.")
        summary = f"{obs.model} loaded: the server's processes use {_gib(measured)} on the GPU"
        if pred is not None:
            error = (measured - pred) / pred * 100 if pred else 0.0
            summary += f"; predicted {_gib(pred)} ({error:+.0f}%)"
        return verdict(True, summary + ".")
    on_cpu = obs.ps_size_bytes - obs.ps_size_vram_bytes
    # priced for a machine without a GPU: all on the CPU is what was predicted, not a spill
    expected_full = predicted is None or (predicted.verdict in (Verdict.FITS, Verdict.TIGHT) and not predicted.cpu_only)
    if on_cpu > 0 and expected_full:
        share = round(on_cpu / obs.ps_size_bytes * 100)
        return verdict(False, (
            f"{server} put {share}% of {obs.model} ({_gib(on_cpu)}) on the CPU although the settings were "
            f"predicted to fit ({_gib(pred) if pred is not None else 'no estimate'}); generation would be "
            "several times slower."))
    summary = f"{obs.model} loaded: {_gib(obs.ps_size_vram_bytes)} on the GPU"
    if on_cpu > 0:
        summary += f", {_gib(on_cpu)} on the CPU as predicted"
    if pred is not None and measured is not None:
        error = (measured - pred) / pred * 100 if pred else 0.0
        summary += f"; predicted {_gib(pred)}, measured {_gib(measured)} ({error:+.0f}%)"
    if obs.ps_context_length:
        summary += f"; context {obs.ps_context_length}"
    return verdict(True, summary + ".")
