"""Turn predicted memory into a verdict, the process list's PROCESSOR text and one plain sentence."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from app.core.units import GIB

if TYPE_CHECKING:
    from app.core.memory.estimator import OwnEstimate, VramEstimate

# A setting is "tight" when less than this stays free at the peak: 1 GiB, or 5 % of the card.
TIGHT_MIN_BYTES = GIB
TIGHT_FRACTION = 0.05



class Verdict(StrEnum):
    """Whether a load fits; the value is the word the histories and exports save."""

    FITS = "fits"
    TIGHT = "tight"
    SPILLS = "spills"
    WONT_LOAD = "wont_load"
    UNKNOWN = "unknown"  # a model without a verdict (no GPU known, or metadata the estimator cannot read)
    INVALID = "invalid"  # a heat-map cell the model does not allow (above its training context, impossible)


# What the estimator can say of a load, best first.
VERDICTS = (Verdict.FITS, Verdict.TIGHT, Verdict.SPILLS, Verdict.WONT_LOAD)
# What every page and the command line call each verdict, in the README's words.
VERDICT_LABELS = {Verdict.FITS: "Fits", Verdict.TIGHT: "Tight", Verdict.SPILLS: "Spills to the CPU",
                  Verdict.WONT_LOAD: "Won't load", Verdict.UNKNOWN: "Unknown"}


def verdict_label(verdict: Verdict) -> str:
    """The verdict in a word or two, as shown to people (Verdict.WONT_LOAD -> "Won't load")."""
    return VERDICT_LABELS.get(verdict, verdict.value)


def saved_verdict(value: object) -> Verdict | None:
    """A verdict as a history or export saved it ("fits", ...); None for none or a word it does not know."""
    try:
        return Verdict(value) if isinstance(value, str) else None
    except ValueError:
        return None


def ps_processor(size: int, size_vram: int) -> str:
    """PROCESSOR column exactly as the server's process list prints it from the loaded model's size and size
    on the GPU."""
    if size_vram == 0:
        return "100% CPU"
    if size_vram == size:
        return "100% GPU"
    if size_vram > size or size == 0:
        return "Unknown"
    cpu = round((size - size_vram) / size * 100)
    return f"{cpu}%/{100 - cpu}% CPU/GPU"


def processor_string(legacy: OwnEstimate | None, n_gpu: int, layers_total: int,
                     gpu_buffers: int, cpu_buffers: int) -> str:
    """Predicted PROCESSOR text: a server that places layers by its own estimate reports that estimate,
    others the real buffers."""
    if legacy is not None:
        return ps_processor(legacy.total_bytes, legacy.vram_bytes)
    if n_gpu <= 0:
        return "100% CPU"
    if n_gpu >= layers_total:
        return "100% GPU"  # a full offload is reported as 100% GPU though the input table is in RAM
    return ps_processor(gpu_buffers + cpu_buffers, gpu_buffers)


def tight_threshold(gpu_total: int) -> int:
    """Headroom (bytes) below which a setting counts as tight on a card of gpu_total bytes."""
    return max(TIGHT_MIN_BYTES, int(TIGHT_FRACTION * gpu_total))


def verdict_for(n_gpu: int, layers_total: int, total_gpu: int, peak_gpu: int, available: int,
                gpu_total: int) -> Verdict:
    """fits, tight, spills or wont_load for a placement (bytes throughout)."""
    if n_gpu > 0 and total_gpu > available:
        return Verdict.WONT_LOAD
    if n_gpu < layers_total:
        return Verdict.SPILLS
    if available - peak_gpu < tight_threshold(gpu_total):
        return Verdict.TIGHT
    return Verdict.FITS


def _g(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def explain(est: VramEstimate, num_ctx: int, flash_attention: bool) -> str:
    """One sentence with the numbers behind the verdict."""
    parts = (f"weights {_g(est.weights_gpu_bytes)}, KV {_g(est.kv_gpu_bytes)}, "
             f"compute {_g(est.compute_bytes)}, runtime {_g(est.overhead_bytes)}")
    free = _g(est.available_bytes)
    if est.verdict is Verdict.WONT_LOAD:
        return (f"Won't load: this placement ({est.layers_on_gpu}/{est.layers_total} layers) needs "
                f"{_g(est.total_gpu_bytes)} on the GPU ({parts}) but only {free} is free.")
    if est.verdict is Verdict.SPILLS:
        on_cpu = est.layers_total - est.layers_on_gpu
        slower = f"{on_cpu} layers run on the CPU, so generation gets several times slower"
        if est.forced_layers:
            return f"Spills: num_gpu puts {est.layers_on_gpu} of {est.layers_total} layers on the GPU; {slower}."
        if est.legacy is not None and est.full_offload_gpu_bytes <= est.available_bytes:
            return (f"Spills: {est.legacy.estimate_name} ({_g(est.legacy.total_bytes)}) does not fit in {free} free, "
                    f"so it offloads only {est.layers_on_gpu} of {est.layers_total} layers although all of them would "
                    f"need {_g(est.full_offload_gpu_bytes)}; {slower}. {est.legacy.advice}".rstrip())
        full_compute = est.compute_flash_on_bytes if flash_attention else est.compute_flash_off_bytes
        grown = (f" With layers on the CPU the GPU compute buffer grows from {_g(full_compute)} to "
                 f"{_g(est.compute_bytes)}: each prompt batch runs a CPU layer on the GPU and copies its weights "
                 f"and KV cache there." if est.compute_bytes - full_compute >= GIB // 10 else "")
        return (f"Spills: only {est.layers_on_gpu} of {est.layers_total} layers fit in {free} free (all on the "
                f"GPU needs {_g(est.full_offload_gpu_bytes)}); {slower}.{grown} Lower the context or parallel "
                f"requests, or quantize the KV cache.")
    if est.verdict is Verdict.TIGHT and est.total_gpu_bytes <= est.available_bytes < est.peak_gpu_bytes:
        why = "without flash attention" if not flash_attention else "while it is processed"
        return (f"Tight: loads in {_g(est.total_gpu_bytes)} of {free} free ({parts}), but a prompt filling "
                f"the {num_ctx}-token context needs {_g(est.peak_gpu_bytes)} {why} — it loads fine and can "
                f"die on the first long document.")
    if est.verdict is Verdict.TIGHT:
        return (f"Tight: needs {_g(est.peak_gpu_bytes)} at peak of {free} free ({parts}), leaving "
                f"{_g(est.headroom_bytes)}; another app or a desktop change can push it over.")
    return (f"Fits: {_g(est.peak_gpu_bytes)} at peak of {free} free ({parts}), "
            f"{_g(est.headroom_bytes)} to spare.")


def risky_apply_words(est: VramEstimate, model: str, server_name: str) -> tuple[str, str]:
    """The title and sentence that ask before applying settings predicted to spill or not to load;
    `server_name` is the backend's own name for its server."""
    if est.verdict is Verdict.WONT_LOAD:
        return ("These settings will not load",
                f"{model} needs {_g(est.total_gpu_bytes)} on a GPU with {_g(est.available_bytes)} available, so "
                "loading it will fail with an out-of-memory error.")
    on_cpu = est.layers_total - est.layers_on_gpu
    who = server_name[:1].upper() + server_name[1:] if server_name.startswith("the ") else server_name
    return ("These settings spill to the CPU",
            f"{who} will put {on_cpu} of {est.layers_total} layers of {model} on the CPU ({est.processor}), "
            "and generation gets several times slower.")
