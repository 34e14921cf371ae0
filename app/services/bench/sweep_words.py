"""The sweep's words for points it did not measure: ruled out by the estimate, or failed at load."""

from __future__ import annotations

from app.core.bench.outcome import CRASHED_AT_LOAD, REASONS, FailureKind
from app.core.memory.estimator import VramEstimate
from app.core.memory.verdict import Verdict
from app.core.units import GIB

# Ollama ≥ 0.30's error when the kernel's out-of-memory killer ended the llama-server it started
# ("llama-server process has terminated: signal: killed").
KILLED_WORDS = "signal: killed"


def skip_reason(estimate: VramEstimate) -> tuple[FailureKind, str]:
    """The failure and short words for a point the estimate rules out."""
    if estimate.verdict is Verdict.SPILLS:
        return (FailureKind.PREDICTED_SPILL,
                f"predicted to spill to CPU ({estimate.layers_on_gpu}/{estimate.layers_total} layers on GPU)")
    if estimate.host_verdict is Verdict.WONT_LOAD and estimate.host_available_bytes is not None:
        return (FailureKind.PREDICTED_OUT_OF_MEMORY,
                f"predicted to run the computer out of memory ({estimate.host_bytes / GIB:.1f} GiB of RAM needed, "
                f"{estimate.host_available_bytes / GIB:.1f} GiB available)")
    need, have = estimate.total_gpu_bytes / GIB, estimate.available_bytes / GIB
    return FailureKind.PREDICTED_WONT_LOAD, f"predicted not to load ({need:.1f} GiB needed, {have:.1f} GiB free)"


def load_failure(message: str, crashed: str) -> tuple[FailureKind, str, str]:
    """(failure, reason, detail) for a model that did not load: the server crashed, the kernel killed the
    model's runner for memory, or the server's own words."""
    if crashed:
        return FailureKind.CRASHED, CRASHED_AT_LOAD, crashed
    if KILLED_WORDS in message:
        return (FailureKind.HOST_OUT_OF_MEMORY, REASONS[FailureKind.HOST_OUT_OF_MEMORY],
                f"{message} — the kernel killed llama-server, most likely because its CPU side (weights and KV "
                "cache of the layers left on the CPU) outgrew the computer's RAM.")
    return FailureKind.LOAD_ERROR, REASONS[FailureKind.LOAD_ERROR], message


__all__ = ["KILLED_WORDS", "load_failure", "skip_reason"]
