"""Whether something else competed for the device a sweep point was measured on, and what.

A point's numbers are the server's only when the server had its device to itself: a build or a
game taking the CPU (the engine computes there on a machine without a GPU) or the GPU meanwhile
makes a point slower for reasons that are not its setting, and a sweep then compares noise. What
was measured over the point's window (see app/adapters/telemetry/contention.py for how):

- CPU, for a server computing there (no GPU: the embedded engine here): core-seconds used by every
  process outside the server's tree and outside the app's own process (the load generator lives
  there, as does a test runner), from the system's counters, as a share of the machine's cores; and
  how much of the machine stood idle.
- GPU, for a server computing there: NVML's per-process SM utilisation over the window for
  processes that are not the server's, where the driver reports it.

A contended point is not stable, and the recommendation leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

# CPU: others are competing when they used at least this share of the machine's cores ...
# Measured with benchmarks/bench_contention.py (5 windows of 4 s each, the measuring process spinning
# as a test runner does, a stand-in server spinning one process per core as an inference server's threads do):
# on a quiet 16-core machine the processes outside the server and the measuring one took 0.0-0.6 % of
# it (under a tenth of a core: on 2 cores that background would be at most 5 %); with the cores
# saturated, what others took is what the server lost (one competitor on 16 cores: others 5.9 %, the
# server 93.9 -> 88.2 %; sixteen: others 48.9 %, the server 47.7 %). 10 % is twice the worst quiet
# background on 2 cores, and flags a point whose server lost a tenth of the machine to others.
CPU_OTHERS_SHARE_MIN = 0.10
# ... and the machine had less than this share of its cores idle: with cores to spare, what others
# took was not taken from the server (the same run: a 4-thread server on 16 cores beside one competitor
# kept its 25.0 % with 62 % of the machine idle).
CPU_IDLE_SHARE_MAX = 0.25
# GPU: other processes' mean SM utilisation (percent of the GPU's time) that counts as competing, the
# same tenth as on the CPU (not measured against a second GPU program here).
GPU_OTHERS_PCT_MIN = 10.0


class ContentionKind(str, Enum):
    """What a point's measurement shared its device with."""

    UNMEASURED = "unmeasured"  # no reading: the server's processes unknown, no probe, or an older history
    NONE = "none"  # measured, and nothing else competed
    CPU = "cpu"  # other processes took the CPU meanwhile
    GPU = "gpu"  # other processes computed on the GPU meanwhile


@dataclass(frozen=True)
class Competitor:
    """One process outside the server that used the device over the window."""

    name: str
    pid: int
    share: float  # CPU: of the machine's cores (0-1); GPU: its mean SM utilisation (0-1)


@dataclass(frozen=True)
class CpuUse:
    """CPU time over one window, in core-seconds (the system's counters and the processes' own)."""

    window_s: float
    cores: int
    busy_s: float  # every process and the kernel, from the system-wide counters
    server_s: float  # the server's process tree
    own_s: float  # the app's own process (load generator, GUI, a test runner)
    competitors: tuple[Competitor, ...] = ()  # the biggest other users, biggest first

    @property
    def capacity_s(self) -> float:
        """Core-seconds the machine had over the window."""
        return max(self.window_s * self.cores, 1e-9)

    @property
    def others_share(self) -> float:
        """What processes outside the server and the app used, as a share of the machine (0-1)."""
        return min(1.0, max(0.0, self.busy_s - self.server_s - self.own_s) / self.capacity_s)

    @property
    def idle_share(self) -> float:
        """The share of the machine nobody used (0-1)."""
        return min(1.0, max(0.0, 1.0 - self.busy_s / self.capacity_s))

    @property
    def server_share(self) -> float:
        """What the server's tree used, as a share of the machine (0-1)."""
        return min(1.0, self.server_s / self.capacity_s)


@dataclass(frozen=True)
class GpuUse:
    """Per-process GPU utilisation over one window, as NVML reports it."""

    server_seen: bool  # the server's processes computed on (or hold memory on) the GPU
    others_pct: float  # other processes' mean SM utilisation, summed (percent)
    competitors: tuple[Competitor, ...] = ()  # biggest first


@dataclass(frozen=True)
class Contention:
    """The verdict on one point's window, with the numbers behind it."""

    kind: ContentionKind = ContentionKind.UNMEASURED
    window_s: float | None = None
    cpu_others_pct: float | None = None  # of the machine's cores
    cpu_idle_pct: float | None = None
    cpu_server_pct: float | None = None
    cores: int | None = None
    gpu_others_pct: float | None = None  # mean SM utilisation of other processes
    top_name: str = ""  # the biggest competitor on the judged device
    top_pid: int | None = None
    top_pct: float | None = None
    why_unmeasured: str = ""

    @property
    def contended(self) -> bool:
        """True when something else competed for the device."""
        return self.kind in (ContentionKind.CPU, ContentionKind.GPU)

    @property
    def top_text(self) -> str:
        """The biggest competitor, e.g. "stress (pid 4242)"; "" when none was named."""
        if not self.top_name and self.top_pid is None:
            return ""
        return f"{self.top_name or 'process'} (pid {self.top_pid})" if self.top_pid is not None else self.top_name

    def short_text(self) -> str:
        """A few words for a table cell: "CPU contended 31 %" (others' share), "" when not contended."""
        if self.kind is ContentionKind.CPU and self.cpu_others_pct is not None:
            return f"CPU contended {self.cpu_others_pct:.0f} %"
        if self.kind is ContentionKind.GPU and self.gpu_others_pct is not None:
            return f"GPU contended {self.gpu_others_pct:.0f} %"
        return ""

    def text(self) -> str:
        """One sentence with the numbers, for a reason, a tooltip or a report."""
        if self.kind is ContentionKind.UNMEASURED:
            return f"Competition for the device was not measured{': ' + self.why_unmeasured if self.why_unmeasured else ''}."
        top = f"; the biggest was {self.top_text} with {self.top_pct:.0f} %" if self.top_text and self.top_pct is not None else ""
        if self.kind is ContentionKind.CPU:
            return (f"Other processes used {self.cpu_others_pct:.0f} % of the {self.cores} CPU cores while this point "
                    f"was measured ({self.cpu_idle_pct:.0f} % idle, the server {self.cpu_server_pct:.0f} %){top}: its "
                    "numbers are not the server's alone.")
        if self.kind is ContentionKind.GPU:
            return (f"Other processes kept the GPU {self.gpu_others_pct:.0f} % busy while this point was measured{top}: "
                    "its numbers are not the server's alone.")
        parts = []
        if self.cpu_others_pct is not None:
            parts.append(f"other processes used {self.cpu_others_pct:.0f} % of the {self.cores} CPU cores")
        if self.gpu_others_pct is not None:
            parts.append(f"{self.gpu_others_pct:.0f} % of the GPU")
        return ("Nothing competed for the device" + (f" ({', '.join(parts)})" if parts else "") + ".")

    def to_json(self) -> dict[str, Any]:
        """Plain dict (the kind as its value)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["kind"] = self.kind.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Contention:
        """Inverse of to_json; a missing or unknown kind reads as not measured (histories from before)."""
        if not isinstance(data, dict):
            return cls()
        try:
            kind = ContentionKind(data.get("kind", ContentionKind.UNMEASURED.value))
        except ValueError:
            kind = ContentionKind.UNMEASURED
        values: dict[str, Any] = {}
        for name in ("window_s", "cpu_others_pct", "cpu_idle_pct", "cpu_server_pct", "gpu_others_pct", "top_pct"):
            value = data.get(name)
            values[name] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        for name in ("cores", "top_pid"):
            value = data.get(name)
            values[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
        for name in ("top_name", "why_unmeasured"):
            values[name] = str(data.get(name) or "")
        return cls(kind=kind, **values)


def unmeasured(why: str) -> Contention:
    """A point whose competition could not be measured, and why."""
    return Contention(why_unmeasured=why)


def _pct(share: float) -> float:
    return round(share * 100.0, 1)


def judge(cpu: CpuUse | None, gpu: GpuUse | None, on_gpu: bool = False) -> Contention:
    """The verdict on one window for the device the server computes on: on the GPU (on_gpu), other
    processes' SM utilisation; on the CPU, what others took of a machine with no cores to spare. The
    other device's figures ride along; UNMEASURED when the device's own readings are missing."""
    cpu_fields: dict[str, Any] = {}
    if cpu is not None:
        cpu_fields = {"window_s": round(cpu.window_s, 2), "cpu_others_pct": _pct(cpu.others_share),
                      "cpu_idle_pct": _pct(cpu.idle_share), "cpu_server_pct": _pct(cpu.server_share),
                      "cores": cpu.cores}
    gpu_pct = round(gpu.others_pct, 1) if gpu is not None and gpu.server_seen else None
    if on_gpu:
        if gpu_pct is None or gpu is None:
            why = ("the driver does not attribute GPU use to processes here" if gpu is None
                   else "the driver does not list the server's processes on the GPU")
            return Contention(ContentionKind.UNMEASURED, why_unmeasured=why, **cpu_fields)
        if gpu.others_pct >= GPU_OTHERS_PCT_MIN:
            return Contention(ContentionKind.GPU, gpu_others_pct=gpu_pct, **_top(gpu.competitors), **cpu_fields)
        return Contention(ContentionKind.NONE, gpu_others_pct=gpu_pct, **cpu_fields)
    if cpu is None:
        return unmeasured("no CPU readings")
    if cpu.others_share >= CPU_OTHERS_SHARE_MIN and cpu.idle_share <= CPU_IDLE_SHARE_MAX:
        return Contention(ContentionKind.CPU, gpu_others_pct=gpu_pct, **_top(cpu.competitors), **cpu_fields)
    return Contention(ContentionKind.NONE, gpu_others_pct=gpu_pct, **cpu_fields)


def _top(competitors: tuple[Competitor, ...]) -> dict[str, Any]:
    top = competitors[0] if competitors else None
    return {"top_name": top.name if top else "", "top_pid": top.pid if top else None,
            "top_pct": _pct(top.share) if top else None}


__all__ = ["CPU_IDLE_SHARE_MAX", "CPU_OTHERS_SHARE_MIN", "Competitor", "Contention", "ContentionKind", "CpuUse",
           "GPU_OTHERS_PCT_MIN", "GpuUse", "judge", "unmeasured"]
