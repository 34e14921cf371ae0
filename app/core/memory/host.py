"""Host memory (RAM) of a load: what llama.cpp's server keeps on the CPU side, against what the machine has.

With no GPU everything is there; with a partial offload the layers llama.cpp's --fit left on the
CPU bring their weights and KV cache. When that outgrows the available memory the kernel kills
the server process ("signal: killed"), so the verdict says the computer runs out of memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.core.memory.verdict import Verdict
from app.core.model_shape import ModelShape
from app.core.units import GIB, MIB

# llama.cpp's --fit keeps this much system memory free as it does per GPU ("will leave … >= 1024
# MiB of system memory"); below it a load is tight.
HOST_FIT_MARGIN_BYTES = GIB
# The llama.cpp server's own resident memory besides its buffers (libraries, heap): its RSS less the
# buffers it logged was 20 MiB with SmolLM2-135M on the CPU (the CPU estimate measured against a real server,
# benchmarks/vram/README.md).
CPU_RUNTIME_OVERHEAD_BYTES = 20 * MIB


@dataclass(frozen=True)
class HostMemory:
    """The machine's RAM as the estimate sees it (bytes): what is available now, and the total."""

    available_bytes: int
    total_bytes: int = 0


def output_buffer_bytes(shape: ModelShape, parallel: int) -> int:
    """llama.cpp's host output buffer: one f32 row of logits per slot ("CPU output buffer size")."""
    return 4 * shape.n_vocab * max(1, parallel)


def cpu_weights_bytes(shape: ModelShape) -> int:
    """Weights of the whole model in host memory, as the CPU backend loads them ("CPU model buffer size")."""
    w = shape.weights
    # a tied output head is the input table itself, which the CPU holds once
    head = w.output_bytes - (w.token_embd_bytes if shape.tied_embeddings else 0)
    return w.token_embd_bytes + sum(w.layer_bytes) + w.projector_bytes + max(0, head)


def host_verdict(need_bytes: int, host: HostMemory | None) -> Verdict | None:
    """fits | tight | wont_load for host memory alone (None when the host is unknown)."""
    if host is None:
        return None
    if need_bytes > host.available_bytes:
        return Verdict.WONT_LOAD
    return Verdict.TIGHT if host.available_bytes - need_bytes < HOST_FIT_MARGIN_BYTES else Verdict.FITS


def _g(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def out_of_memory_text(need_bytes: int, host: HostMemory, weights_cpu: int, kv_cpu: int, on_gpu: str) -> str:
    """The sentence for a load whose CPU side does not fit the computer's memory."""
    return (f"The computer runs out of memory: {on_gpu}the CPU side needs {_g(need_bytes)} of RAM (weights "
            f"{_g(weights_cpu)}, KV cache {_g(kv_cpu)}) but only {_g(host.available_bytes)} is available, so "
            f"the kernel kills the server while it loads (\"signal: killed\"). Lower the context or parallel "
            f"requests, or quantize the KV cache.")


def cpu_only_text(verdict: Verdict, need_bytes: int, host: HostMemory | None, weights: int, kv: int, compute: int) -> str:
    """The sentence for a server without a GPU: it runs on the CPU, priced against the host's RAM."""
    parts = f"weights {_g(weights)}, KV {_g(kv)}, compute {_g(compute)}"
    if host is None:
        return (f"Runs on the CPU (no GPU): needs {_g(need_bytes)} of RAM ({parts}); the host's free memory "
                f"is unknown, so it is not checked.")
    if verdict is Verdict.WONT_LOAD:
        return out_of_memory_text(need_bytes, host, weights, kv, "")
    spare = host.available_bytes - need_bytes
    if verdict is Verdict.TIGHT:
        return (f"Tight: runs on the CPU (no GPU) in {_g(need_bytes)} of RAM ({parts}) of {_g(host.available_bytes)} "
                f"available, leaving {_g(spare)}; another program can push the computer out of memory.")
    return (f"Fits: runs on the CPU (no GPU) in {_g(need_bytes)} of RAM ({parts}) of "
            f"{_g(host.available_bytes)} available, {_g(spare)} to spare.")




def host_memory_from(ram_total_mib: float, ram_used_mib: float, server_rss_mib: float = float("nan")) -> HostMemory:
    """The RAM a new load can have, from one host reading (MiB): what is available now plus what the
    running server holds, since a restart gives that back."""
    available = max(0.0, ram_total_mib - ram_used_mib)
    if not math.isnan(server_rss_mib) and server_rss_mib > 0:  # NaN without a server
        available = min(ram_total_mib, available + server_rss_mib)
    return HostMemory(int(available * MIB), int(ram_total_mib * MIB))


__all__ = ["CPU_RUNTIME_OVERHEAD_BYTES", "HOST_FIT_MARGIN_BYTES", "HostMemory", "cpu_only_text", "cpu_weights_bytes",
           "host_memory_from", "host_verdict", "out_of_memory_text", "output_buffer_bytes"]
