"""A settings sweep: its axes, its points, what was measured at each, and the run as a whole.

On a server ollama-deck manages, every server axis (parallel, KV-cache type, context length,
flash attention) restarts the server per point; on a server it only attached to, those cannot
change, so only the client side (concurrency, the workload) varies.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from collections.abc import Mapping, Sequence

from app.core.bench.contention import Contention
from app.core.bench.outcome import SPOILED_BY, FailureKind, PointStatus
from app.core.memory.verdict import Verdict
from app.core.bench.stats import LatencyTargets, PointStats, RequestRecord, summarize
from app.core.bench.workload import LoadPlan
from app.core.saved_format import SavedFormat
from app.core.bench.balance import Balance
from app.core.server.settings import ServerSettings, validate
from app.core.watch.events import EventKind, WatchEvent

SERVER_AXES = ("parallel", "kv_cache_types", "context_lengths", "flash_attention")
MAX_POINTS = 200


class SweepPlanError(ValueError):
    """A sweep that cannot be planned; the message says what to change."""


@dataclass(frozen=True)
class SweepAxes:
    """The values to try. None keeps the base setting; `concurrency` None means "equal to the
    point's parallel" (on an attached server, whose parallel is unknown: 1)."""

    parallel: tuple[int, ...] | None = (1, 2, 4, 8)
    concurrency: tuple[int, ...] | None = None
    kv_cache_types: tuple[str, ...] | None = None
    context_lengths: tuple[int | None, ...] | None = None
    flash_attention: tuple[str, ...] | None = None

    def varies_server(self, base: ServerSettings) -> bool:
        """True when a point would need other server settings than `base`."""
        pairs = ((self.parallel, base.num_parallel), (self.kv_cache_types, base.kv_cache_type),
                 (self.context_lengths, base.context_length), (self.flash_attention, base.flash_attention))
        return any(values is not None and set(values) != {current} for values, current in pairs)

    def to_json(self) -> dict[str, Any]:
        """Plain dict (lists, None kept)."""
        return {name: None if getattr(self, name) is None else list(getattr(self, name))
                for name in ("parallel", "concurrency", "kv_cache_types", "context_lengths", "flash_attention")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepAxes:
        """Inverse of to_json."""
        return cls(**{k: None if data.get(k) is None else tuple(data[k])
                      for k in ("parallel", "concurrency", "kv_cache_types", "context_lengths", "flash_attention")})


def varied_setting_parts(s: ServerSettings, varying: Sequence[str]) -> list[str]:
    """Short words for the server settings a sweep varies besides parallel, e.g. ["KV q8_0", "ctx 8192"]."""
    parts = []
    if "kv_cache_types" in varying:
        parts.append(f"KV {s.kv_cache_type}")
    if "context_lengths" in varying:
        parts.append(f"ctx {s.context_length or 'default'}")
    if "flash_attention" in varying:
        parts.append(f"FA {s.flash_attention}")
    return parts


@dataclass(frozen=True)
class SweepPoint:
    """One setting to measure: the full server settings and the client concurrency."""

    index: int
    settings: ServerSettings
    concurrency: int
    server_known: bool = True  # False on an attached server: its settings are not ours to know
    default: bool = False  # the server's own default tuning (SweepSpec.default_settings), measured for comparison

    @property
    def parallel(self) -> int | None:
        """Parallel slots at this point (None when the server's own is unknown)."""
        return self.settings.num_parallel if self.server_known else None

    def label(self, varying: Sequence[str] = ("parallel", "concurrency")) -> str:
        """Short text naming what varies, e.g. "parallel 4 · q8_0 · 8 clients"."""
        s = self.settings
        parts = []
        if "parallel" in varying and self.server_known:
            parts.append(f"parallel {s.num_parallel}")
        parts.extend(varied_setting_parts(s, varying))
        if "concurrency" in varying or not parts:
            parts.append("no client cap" if self.concurrency == 0
                         else f"{self.concurrency} client{'s' if self.concurrency != 1 else ''}")
        if self.default:
            parts.append("server default")
        return " · ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the history."""
        data = {"index": self.index, "settings": self.settings.to_json(), "concurrency": self.concurrency,
                "server_known": self.server_known}
        if self.default:  # only then: points of runs without a default point are saved as they always were
            data["default"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], saved: SavedFormat) -> SweepPoint:
        """Inverse of to_json; `saved` names what earlier documents left unsaid (see ServerSettings.from_json)."""
        settings, _problems = ServerSettings.from_json(data.get("settings") or {}, saved)
        return cls(int(data.get("index", 0)), settings, int(data.get("concurrency", 1)),
                   bool(data.get("server_known", True)), bool(data.get("default", False)))


@dataclass(frozen=True)
class SweepPlan:
    """The points in run order, which axes vary, and notes for the user (skipped combinations)."""

    points: tuple[SweepPoint, ...]
    varying: tuple[str, ...]
    notes: tuple[str, ...] = ()


def plan_sweep(base: ServerSettings, axes: SweepAxes, managed: bool,
               default: ServerSettings | None = None) -> SweepPlan:
    """The points of the sweep, server axes outermost so each server setting starts once. With `default` (the
    server's own default tuning, managed sweeps only) the point with those settings is marked default, or, when
    none has them, one is measured first.

    Raises SweepPlanError when the plan is impossible: server axes on an attached server, or
    every combination invalid."""
    if not managed and axes.varies_server(base):
        raise SweepPlanError(
            "This server was not started by ollama-deck, so its settings (parallel, KV cache, context, "
            "flash attention) cannot change per point: only client concurrency can vary. Start the server "
            "from ollama-deck (Server page) to sweep server settings.")
    parallels = axes.parallel if managed and axes.parallel else (base.num_parallel,)
    kvs = axes.kv_cache_types or (base.kv_cache_type,)
    ctxs = axes.context_lengths or (base.context_length,)
    fas = axes.flash_attention or (base.flash_attention,)
    if any(p < 1 for p in parallels) or (axes.concurrency and any(c < 0 for c in axes.concurrency)):
        raise SweepPlanError("Parallel values must be at least 1, and concurrency at least 1 (0: no cap, open loop).")
    points: list[SweepPoint] = []
    notes: list[str] = []
    for kv, ctx, fa, parallel in itertools.product(_unique(kvs), _unique(ctxs), _unique(fas), _unique(parallels)):
        settings = base.replace(num_parallel=parallel, kv_cache_type=kv, context_length=ctx, flash_attention=fa)
        problems = validate(settings).errors
        if problems:
            notes.append(f"Left out parallel {parallel}, KV {kv}, ctx {ctx or 'default'}, FA {fa}: "
                         + " ".join(problems.values()))
            continue
        clients = axes.concurrency or ((parallel,) if managed else (1,))
        for c in _unique(clients):
            points.append(SweepPoint(len(points), settings, c, server_known=managed))
    if not points:
        raise SweepPlanError("No combination of these values is a valid setting. " + " ".join(notes))
    if default is not None:
        if not managed:
            raise SweepPlanError("This server was not started by ollama-deck, so it cannot be restarted on its "
                                 "default settings for a comparison.")
        points = _with_default(points, default, axes)
    if len(points) > MAX_POINTS:
        raise SweepPlanError(f"{len(points)} points are too many for one sweep (at most {MAX_POINTS}); "
                             "use fewer values per axis.")
    varying = [name for name, values in (("parallel", parallels if managed else None), ("kv_cache_types", kvs),
                                          ("context_lengths", ctxs), ("flash_attention", fas))
               if values is not None and len(set(values)) > 1]
    # Clients tied to parallel (the default on a managed server) say nothing of their own.
    if (axes.concurrency is not None and len(set(axes.concurrency)) > 1) or not varying:
        varying.append("concurrency")
    return SweepPlan(tuple(points), tuple(varying), tuple(notes))


def _with_default(points: list[SweepPoint], default: ServerSettings, axes: SweepAxes) -> list[SweepPoint]:
    """The points with the one on the default settings marked, or a default point first (numbered 0)."""
    same = next((p for p in points if p.settings == default), None)
    if same is not None:
        return [replace(p, default=True) if p is same else p for p in points]
    problems = validate(default).errors
    if problems:
        raise SweepPlanError("The server's default settings are not a valid setting here: "
                             + " ".join(problems.values()))
    clients = axes.concurrency[0] if axes.concurrency else default.num_parallel
    first = SweepPoint(0, default, clients, server_known=True, default=True)
    return [first] + [replace(p, index=p.index + 1) for p in points]


def _unique(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def parse_int_list(text: str, what: str = "", low: int = 1, high: int | None = None) -> tuple[int, ...]:
    """"1, 2, 4,8" -> (1, 2, 4, 8); raises SweepPlanError naming `what` (when given) and every value that is
    not a whole number in [low, high], e.g. "'abc' is not a whole number", "99999 is above the maximum 64"."""
    values = []
    problems = []
    for piece in text.replace(";", ",").replace(" ", ",").split(","):
        if not piece.strip():
            continue
        try:
            value = int(piece)
        except ValueError:
            problems.append(f"{piece.strip()!r} is not a whole number")
            continue
        if value < low:
            problems.append(f"{value} is below the minimum {low}")
        elif high is not None and value > high:
            problems.append(f"{value} is above the maximum {high}")
        else:
            values.append(value)
    prefix = f"{what}: " if what else ""
    if problems:
        example = " (write e.g. 1, 2, 4, 8)" if any("not a whole number" in p for p in problems) else ""
        raise SweepPlanError(f"{prefix}{'; '.join(problems)}{example}.")
    if not values:
        raise SweepPlanError(f"{prefix}give at least one value (e.g. 1, 2, 4, 8).")
    return tuple(_unique(values))


class ServerPeakUnknown(StrEnum):
    """Why a point's server peak is not known while the card was read: the card's figure is then no stand-in for
    it (other programs count in it), and the tables say so rather than showing it as the server's."""

    NOT_HERE = "not_here"  # the server's processes are not known here (another user's, a remote one, a proxied URL)
    NOT_ATTRIBUTED = "not_attributed"  # the driver does not report each process's memory (some drivers, containers)
    NOT_RECORDED = "not_recorded"  # kept by an earlier release, which did not record the server's own

    @property
    def words(self) -> str:
        """Why, for people."""
        return _UNKNOWN_WORDS[self]


_UNKNOWN_WORDS = {
    ServerPeakUnknown.NOT_HERE: "its processes are not visible from here: another user's, on another machine or behind a proxy",
    ServerPeakUnknown.NOT_ATTRIBUTED: "the driver does not report each process's memory",
    ServerPeakUnknown.NOT_RECORDED: "not recorded with this run",
}


@dataclass(frozen=True)
class GpuFigures:
    """GPU readings over a point's measured window; None where there were none (no NVML).

    The server's peak is its process tree's own memory as NVML attributes it (what the estimate prices, and what
    the tables call Peak VRAM); the card's is everything on the card, other programs included (nvidia-smi's
    "used"). Where the card was read but the server's own could not be, `server_unknown` says why."""

    card_peak_mib: float | None = None
    card_baseline_mib: float | None = None  # the card's use just before the workload
    util_mean_pct: float | None = None
    power_mean_w: float | None = None
    energy_j: float | None = None
    server_peak_mib: float | None = None
    server_unknown: ServerPeakUnknown | None = None

    @property
    def read(self) -> bool:
        """True when the GPU was read at all over the window."""
        return self.card_peak_mib is not None or self.server_peak_mib is not None

    def to_json(self) -> dict[str, Any]:
        """Plain dict (the reason as its stored name)."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["server_unknown"] = None if self.server_unknown is None else self.server_unknown.value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> GpuFigures:
        """Inverse of to_json; figures saved before the card's and the server's were told apart hold the card's
        as "vram_peak_mib" (and its baseline as "vram_baseline_mib"), and no reason where the server's is missing."""
        data = dict(data or {})
        for old, new in (("vram_peak_mib", "card_peak_mib"), ("vram_baseline_mib", "card_baseline_mib")):
            if old in data and new not in data:
                data[new] = data.pop(old)
        values = {k: _finite_or_none(data.get(k)) for k in cls.__dataclass_fields__ if k != "server_unknown"}
        unknown = None
        try:
            unknown = ServerPeakUnknown(data["server_unknown"]) if data.get("server_unknown") else None
        except ValueError:
            unknown = ServerPeakUnknown.NOT_RECORDED
        if unknown is None and values["server_peak_mib"] is None and values["card_peak_mib"] is not None:
            unknown = ServerPeakUnknown.NOT_RECORDED
        return cls(**values, server_unknown=unknown)


def _finite_or_none(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


@dataclass(frozen=True)
class ServerFigures:
    """What the server itself reported over a point's measured window (its /slots and counters, for a
    backend that has them); None where it did not say. `reason` says why there are none."""

    samples: int = 0  # readings taken in the window
    slots_total: int | None = None
    slots_busy_max: int | None = None  # the most slots seen decoding at once
    slots_busy_mean: float | None = None
    requests_deferred_max: int | None = None  # the most requests seen waiting for a free slot
    # The most requests seen running at once, from the server's own gauge of running requests:
    # what stands for busy slots where a server reports no slots.
    requests_running_max: int | None = None
    kv_fill_max_pct: float | None = None
    generated_tokens: float | None = None  # the server's generated-tokens counter over the window
    prompt_tokens: float | None = None  # prompt tokens it evaluated over the window (cache hits excluded)
    window_s: float | None = None  # from the first reading to the last
    reason: str = ""

    @property
    def generation_tokens_per_s(self) -> float | None:
        """The server's own tokens/s over the window (its counter's increase over the window's time)."""
        if self.generated_tokens is None or not self.window_s or self.window_s <= 0:
            return None
        return self.generated_tokens / self.window_s

    def to_json(self) -> dict[str, Any]:
        """Plain dict; the most requests running is left out where unknown, as documents saved before it have it."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if data["requests_running_max"] is None:
            del data["requests_running_max"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ServerFigures:
        """Inverse of to_json; unknown keys are ignored, a missing dict gives no figures."""
        return cls(**{k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PointResult:
    """What happened at one point; `stats` is None when nothing was measured, `failure` says why it was not
    measured, or not cleanly (None for a point that ran fine)."""

    point: SweepPoint
    status: PointStatus
    reason: str = ""  # short, for the table ("out of memory at load")
    stats: PointStats | None = None
    records: tuple[RequestRecord, ...] = ()
    gpu: GpuFigures = field(default_factory=GpuFigures)
    server: ServerFigures = field(default_factory=ServerFigures)
    contention: Contention = field(default_factory=Contention)  # what else used the device while it was measured
    estimate_verdict: Verdict | None = None  # the estimator's verdict before the point ran
    estimate_peak_mib: float | None = None
    loaded_size_mib: float | None = None  # the server's loaded-model size after the warm-up
    loaded_vram_mib: float | None = None
    context_length: int | None = None  # what the server reported as loaded
    elapsed_s: float = 0.0
    detail: str = ""  # the server's own words behind the reason, for a tooltip or the report
    failure: FailureKind | None = None
    # What the server did without saying so while the point ran (from its start to its end), oldest first.
    events: tuple[WatchEvent, ...] = ()
    # Each backend's share of the work, where the point was measured at a balancer (None: not behind one).
    balance: Balance | None = None

    @property
    def spoiled_by(self) -> tuple[EventKind, ...]:
        """The kinds of the point's events that make its figures not its setting's own (a prompt cut short,
        layers on the CPU, a cold load, ...), each once, in the order first seen; () when none did."""
        return tuple(dict.fromkeys(e.kind for e in self.events if e.spoils_measurement))

    @property
    def spoiled(self) -> bool:
        """True when an event seen while the point ran spoils its measurement: it is not "stable", whatever
        its status, and is never recommended."""
        return bool(self.spoiled_by)

    @property
    def estimate_error_mib(self) -> float | None:
        """The estimate less the server's own peak (MiB; positive: priced high), None where either is unknown."""
        if self.estimate_peak_mib is None or self.gpu.server_peak_mib is None:
            return None
        return self.estimate_peak_mib - self.gpu.server_peak_mib

    @property
    def estimate_error_pct(self) -> float | None:
        """estimate_error_mib as a share of the server's own peak (%), None where it is unknown or 0."""
        error, peak = self.estimate_error_mib, self.gpu.server_peak_mib
        return None if error is None or not peak else error / peak * 100.0

    @property
    def output_tokens_per_s(self) -> float | None:
        """Aggregate output tokens/s, None when not measured."""
        return self.stats.output_tokens_per_s if self.stats and self.stats.requests_ok else None

    @property
    def tokens_per_joule(self) -> float | None:
        """Output tokens per joule of GPU energy over the measured window."""
        if not self.stats or not self.gpu.energy_j or not math.isfinite(self.gpu.energy_j):
            return None
        return self.stats.output_tokens / self.gpu.energy_j

    @property
    def ran(self) -> bool:
        """True when requests were measured (ok or unstable)."""
        return self.status in (PointStatus.OK, PointStatus.UNSTABLE) and self.stats is not None

    def restat(self, targets: LatencyTargets) -> PointResult:
        """The same result with statistics recomputed for other targets (goodput changes)."""
        if not self.records:
            return self
        return replace(self, stats=summarize(self.records, targets))

    def stable_text(self) -> str:
        """The "stable?" column: ✓, or why not."""
        if self.status is PointStatus.OK and self.spoiled:  # judged before its events were read
            return f"⚠ {spoiled_reason(self.spoiled_by)}"
        if self.status is PointStatus.OK:
            return f"✓ {self.reason}" if self.reason else "✓"  # e.g. measured on the CPU of a server without a GPU
        reason = self.reason.replace("out of memory", "OOM")
        if self.status is PointStatus.UNSTABLE:
            contended = self.contention.short_text()
            if contended and contended not in reason:
                reason = f"{reason}; {contended}" if reason else contended
            return f"⚠ {reason}" if reason else "⚠ unstable"
        if self.status is PointStatus.SKIPPED:
            return f"skipped: {reason}" if reason else "skipped"
        if self.status is PointStatus.CANCELLED:
            return "cancelled"
        return f"✖ {reason}" if reason else "✖ failed"


def spoiled_reason(kinds: Sequence[EventKind]) -> str:
    """A spoiled point's reason: "not stable: layers on the CPU, cold load"."""
    return f"{SPOILED_BY}: " + ", ".join(k.label for k in kinds)


@dataclass(frozen=True)
class Fingerprint:
    """What a result depends on: the machine, the server, the model and every setting."""

    gpu_name: str = ""
    gpu_driver: str = ""
    gpu_memory_mib: float | None = None
    server_version: str = ""  # the measuring server's version (saved under its first name, see SavedFormat)
    model: str = ""
    model_digest: str = ""
    model_quantization: str = ""
    model_parameters: str = ""
    managed: bool = True
    base_settings: dict[str, Any] = field(default_factory=dict)
    host: str = ""
    app_version: str = ""
    # Which server measured this (its kind); documents written before servers had kinds name none, and are
    # the saved format's default server's (SavedFormat.default_backend).
    backend_kind: str = ""

    def server_text(self, labels: Mapping[str, str]) -> str:
        """The measuring server for people, with its version (its label, then e.g. "b6123"); `labels` are what
        people call each server kind (see server_label)."""
        return server_text(self.backend_kind, self.server_version, labels)

    def to_json(self, saved: SavedFormat) -> dict[str, Any]:
        """Plain dict, under the keys documents have always had (saved.fingerprint_keys)."""
        return {saved.fingerprint_key(k): getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any], saved: SavedFormat) -> Fingerprint:
        """Inverse of to_json (unknown keys ignored); a document naming no server is saved.default_backend's."""
        found = {k: data[key] for k in cls.__dataclass_fields__ if (key := saved.fingerprint_key(k)) in data}
        return cls(**{"backend_kind": saved.default_backend, **found})


def server_label(kind: str, labels: Mapping[str, str]) -> str:
    """A server kind as people write it, from `labels` (the backends' display names by kind); a kind `labels`
    does not know is shown as stored."""
    return labels.get(kind, kind)


def server_text(kind: str, version: str, labels: Mapping[str, str]) -> str:
    """A server for people: its label (see server_label) and version, e.g. "<server> b6123"."""
    return " ".join(x for x in (server_label(kind, labels), version) if x)


@dataclass(frozen=True)
class SweepSpec:
    """Everything a sweep needs to run: the base settings, the axes, the workload, the targets."""

    base: ServerSettings
    axes: SweepAxes
    workload: LoadPlan  # its concurrency is replaced per point
    targets: LatencyTargets = field(default_factory=LatencyTargets)
    managed: bool = True
    force: bool = False  # run points the estimator predicts will not load
    # The server's own default tuning on the base's other settings, measured as a point to compare the
    # recommendation with (None: no comparison), and those defaults in the server's words.
    default_settings: ServerSettings | None = None
    default_words: tuple[str, ...] = ()

    def plan(self) -> SweepPlan:
        """The points (see plan_sweep)."""
        return plan_sweep(self.base, self.axes, self.managed, self.default_settings)

    def to_json(self) -> dict[str, Any]:
        """Plain dict (the default settings only when there are some: older documents stay as they were)."""
        data = {"base": self.base.to_json(), "axes": self.axes.to_json(), "workload": self.workload.to_json(),
                "targets": self.targets.to_json(), "managed": self.managed, "force": self.force}
        if self.default_settings is not None:
            data["default_settings"] = self.default_settings.to_json()
            data["default_words"] = list(self.default_words)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], saved: SavedFormat) -> SweepSpec:
        """Inverse of to_json; `saved` names what earlier documents left unsaid (see ServerSettings.from_json)."""
        base, _ = ServerSettings.from_json(data.get("base") or {}, saved)
        default = ServerSettings.from_json(data["default_settings"], saved)[0] if data.get("default_settings") else None
        return cls(base, SweepAxes.from_json(data.get("axes") or {}), LoadPlan.from_json(data.get("workload") or {}),
                   LatencyTargets.from_json(data.get("targets") or {}), bool(data.get("managed", True)),
                   bool(data.get("force", False)), default,
                   tuple(str(w) for w in data.get("default_words") or ()))


__all__ = ["Fingerprint", "GpuFigures", "PointResult", "ServerPeakUnknown",
           "SweepAxes", "SweepPlan", "SweepPlanError", "SweepPoint", "SweepSpec",
           "parse_int_list", "plan_sweep", "server_label", "server_text", "spoiled_reason"]
