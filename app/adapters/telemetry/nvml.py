"""NVIDIA GPU readings through NVML (the nvidia-ml-py package, imported as pynvml).

Every NVML call goes through one choke point, `NvmlBackend._query`, which turns the driver's
"not supported / no permission / unknown" answers into explicit defaults (NaN) and a lost GPU
into a backend that stops sampling with a reason. Nothing here raises into the caller.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any
from collections.abc import Callable, Sequence

from app.core.telemetry import GpuBackend, GpuInfo, GpuProcessUse, GpuSample, GpuSlowdown
from app.core.units import MIB

try:  # the package is a hard dependency, but a broken install must not take the app down
    import pynvml
except ImportError:  # pragma: no cover - exercised by monkeypatching pynvml to None
    pynvml = None

log = logging.getLogger(__name__)

NAN = math.nan
_NO_ANSWER = object()  # _query's "no special answer for NotFound"
_NO_FUNCTION = object()  # _query's answer where the driver lacks the function (FunctionNotFound)
_FAILED = object()  # a call that gave no answer

# NVML's clock-event reasons (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*: the same bits).
# Idle (0x1), the user's application clocks (0x2), sync boost (0x10) and display clocks (0x100) are the
# card doing as told, not slowdowns.
_SLOWDOWN_BITS: tuple[tuple[int, GpuSlowdown], ...] = (
    (0x0000000000000004, GpuSlowdown.POWER_CAP),  # SwPowerCap
    (0x0000000000000008, GpuSlowdown.HW_SLOWDOWN),  # HwSlowdown
    (0x0000000000000020, GpuSlowdown.THERMAL),  # SwThermalSlowdown
    (0x0000000000000040, GpuSlowdown.THERMAL),  # HwThermalSlowdown
    (0x0000000000000080, GpuSlowdown.POWER_BRAKE),  # HwPowerBrakeSlowdown
)
# The newer name first; drivers before it (and older bindings) know only the "throttle" one.
_REASON_FUNCTIONS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


def slowdowns_of(mask: int) -> frozenset[GpuSlowdown]:
    """The slowdowns a clock-event reasons bitmask names."""
    return frozenset(kind for bit, kind in _SLOWDOWN_BITS if mask & bit)

_EVERYTHING_ELSE_WORKS = " — GPU graphs are off; everything else works."
REASON_NO_PACKAGE = (
    "nvidia-ml-py is not installed (pip install nvidia-ml-py)" + _EVERYTHING_ELSE_WORKS
)
REASON_NO_LIBRARY = (
    "No NVIDIA driver found (libnvidia-ml.so could not be loaded)" + _EVERYTHING_ELSE_WORKS
)
REASON_DRIVER_NOT_LOADED = (
    "NVIDIA driver is installed but not loaded (check `nvidia-smi`; a reboot after a driver "
    "install usually fixes it)" + _EVERYTHING_ELSE_WORKS
)
REASON_VERSION_MISMATCH = (
    "NVIDIA driver and kernel module versions differ (reboot after the driver update)"
    + _EVERYTHING_ELSE_WORKS
)
REASON_NO_PERMISSION = (
    "No permission to read the NVIDIA GPU (NVML refused access)" + _EVERYTHING_ELSE_WORKS
)
REASON_NO_GPU = "NVIDIA driver found but no GPU" + _EVERYTHING_ELSE_WORKS


def gpu_lost_reason(gpu_name: str, detail: str) -> str:
    """The user-facing text for a GPU that stopped answering mid-run."""
    return (
        f"GPU lost: the driver no longer reaches {gpu_name or 'the GPU'} ({detail}). "
        "GPU graphs stopped; everything else works. Check `nvidia-smi`; a reboot usually helps."
    )


def _error_classes(*names: str) -> tuple[type[BaseException], ...]:
    """The pynvml exception classes that exist in the installed version, by name."""
    return tuple(getattr(pynvml, n) for n in names if hasattr(pynvml, n))


def _text(value: Any) -> str:
    """NVML strings arrive as bytes in older bindings and str in newer ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NullGpuBackend:
    """A GPU backend with no GPU: every reading is None and `unavailable_reason` says why."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    @property
    def available(self) -> bool:
        """Always False."""
        return False

    @property
    def unavailable_reason(self) -> str:
        """Why there are no GPU readings, in user words."""
        return self._reason

    def info(self) -> GpuInfo | None:
        """Always None."""
        return None

    def sample(self, t: float, server_pids: Sequence[int]) -> GpuSample | None:
        """Always None."""
        return None

    def process_use(self, since_s: float) -> Sequence[GpuProcessUse] | None:
        """Always None."""
        return None

    def close(self) -> None:
        """Nothing to release."""


class NvmlBackend:
    """Readings of one NVIDIA GPU. NVML is initialised once, on first use, from any thread."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self._lock = threading.Lock()
        self._initialised = False
        self._nvml_open = False
        self._handle: Any = None
        self._info: GpuInfo | None = None
        self._reason = ""
        self._lost = False
        self._warned: set[str] = set()
        self._reason_functions = list(_REASON_FUNCTIONS)
        self._memory_v2: int | None = _memory_v2_version()

    # --- GpuBackend -----------------------------------------------------------------------
    @property
    def available(self) -> bool:
        """True while the GPU answers; never raises."""
        self._ensure_init()
        return self._info is not None and not self._lost

    @property
    def unavailable_reason(self) -> str:
        """Why there are no readings (empty while available)."""
        self._ensure_init()
        return self._reason

    def info(self) -> GpuInfo | None:
        """Name, driver and total memory (MiB); kept after a loss, None if never reachable."""
        self._ensure_init()
        return self._info

    def sample(self, t: float, server_pids: Sequence[int]) -> GpuSample | None:
        """One reading at time t (seconds); memory in MiB, power in W, temperature in °C."""
        if not self.available:  # first: it opens NVML on the first call
            return None
        info = self._info
        if info is None:
            return None
        h = self._handle
        total, used, reserved = self._memory(h, info.memory_total_mib)
        util = self._query(pynvml.nvmlDeviceGetUtilizationRates, h, default=None)
        power_mw = self._query(pynvml.nvmlDeviceGetPowerUsage, h)
        temp_c = self._query(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU)
        server = self._server_memory_mib(server_pids)
        reasons = self._clock_reasons(h)
        sm_mhz = self._query(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM)
        if self._lost:
            return None
        return GpuSample(
            t=t,
            memory_used_mib=used,
            memory_total_mib=total,
            server_memory_mib=server,
            utilization_pct=float(util.gpu) if util is not None else NAN,
            power_w=float(power_mw) / 1000.0,
            temperature_c=float(temp_c),
            slowdowns=slowdowns_of(reasons) if reasons is not None else frozenset(),
            sm_clock_mhz=float(sm_mhz),
            memory_reserved_mib=reserved,
        )

    def process_use(self, since_s: float) -> Sequence[GpuProcessUse] | None:
        """Per-process SM utilisation since wall time since_s (nvmlDeviceGetProcessUtilization, mean of
        the samples the driver kept per pid) with the memory each compute process holds; None where the
        driver does not report it or reports pids from another pid namespace (a container)."""
        if not self.available:
            return None
        h = self._handle
        fn = getattr(pynvml, "nvmlDeviceGetProcessUtilization", None)
        # NVML answers NotFound when no process ran on the GPU since the timestamp: no use, not N/A.
        samples = self._query(fn, h, max(0, int(since_s * 1_000_000)), default=None,
                              not_found=[]) if fn is not None else None
        if samples is None:
            return None
        per_pid: dict[int, list[float]] = {}
        for sample in samples:
            if sample.timeStamp / 1_000_000 >= since_s:
                per_pid.setdefault(int(sample.pid), []).append(float(sample.smUtil))
        memory: dict[int, float] = {}
        procs = self._query(pynvml.nvmlDeviceGetComputeRunningProcesses, h, default=None)
        for proc in procs or []:
            used = getattr(proc, "usedGpuMemory", None)
            memory[int(proc.pid)] = NAN if used is None else used / MIB
        pids = set(per_pid) | set(memory)
        if pids and not any(_pid_visible(pid) for pid in pids):
            return None  # host pids seen from a container: whose they are cannot be told here
        return [GpuProcessUse(pid, sum(per_pid[pid]) / len(per_pid[pid]) if per_pid.get(pid) else NAN,
                              memory.get(pid, NAN)) for pid in sorted(pids)]

    def close(self) -> None:
        """Shut NVML down; later calls report the backend as unavailable."""
        with self._lock:
            if self._nvml_open:
                try:
                    pynvml.nvmlShutdown()
                except Exception:  # noqa: BLE001 - closing must not fail the caller
                    log.debug("nvmlShutdown failed", exc_info=True)
                self._nvml_open = False
            self._initialised = True
            self._info = None
            if not self._reason:
                self._reason = "GPU readings were closed" + _EVERYTHING_ELSE_WORKS

    # --- the choke point ------------------------------------------------------------------
    def _query(self, fn: Callable[..., Any], *args: Any, default: Any = NAN, not_found: Any = _NO_ANSWER,
               no_function: Any = _NO_ANSWER) -> Any:
        """Call one NVML function; N/A-style errors give `default` (NotFound gives `not_found` where
        given: for some calls it means "nothing", not "not supported"; FunctionNotFound gives `no_function`
        where given), a lost GPU marks us lost."""
        if self._lost:
            return default
        try:
            return fn(*args)
        except _error_classes(
            "NVMLError_GpuIsLost",
            "NVMLError_GpuNotFound",
            "NVMLError_ResetRequired",
            "NVMLError_DriverNotLoaded",
            "NVMLError_Uninitialized",
        ) as err:
            self._mark_lost(_text(err))
            return default
        except pynvml.NVMLError as err:
            if not_found is not _NO_ANSWER and isinstance(err, _error_classes("NVMLError_NotFound")):
                return not_found
            if no_function is not _NO_ANSWER and isinstance(err, _error_classes("NVMLError_FunctionNotFound")):
                return no_function
            # NotSupported (GeForce cards lack some counters), NoPermission, FunctionNotFound
            # (older drivers), Timeout, Unknown: this field is N/A, the rest still read.
            name = getattr(fn, "__name__", repr(fn))
            if name not in self._warned:
                self._warned.add(name)
                log.info("NVML %s unavailable on GPU %d: %s", name, self.index, _text(err))
            return default

    def _mark_lost(self, detail: str) -> None:
        if not self._lost:
            name = self._info.name if self._info else ""
            self._lost = True
            self._reason = gpu_lost_reason(name, detail)
            log.warning("NVIDIA GPU %d lost: %s", self.index, detail)

    # --- internals ------------------------------------------------------------------------
    def _memory(self, handle: Any, known_total_mib: float) -> tuple[float, float, float]:
        """(total, used, reserved) MiB. Memory info v2 splits the driver's reserve out of "used" (nvidia-smi's
        figures); where the driver or the bindings lack v2, v1's used = total - free holds the reserve and the
        reserve is NaN (not known apart). A lost GPU gives NaN used."""
        if self._memory_v2 is not None:
            try:
                mem = self._query(pynvml.nvmlDeviceGetMemoryInfo, handle, self._memory_v2, default=_FAILED,
                                  no_function=_FAILED)
            except TypeError:  # bindings whose call takes no version argument
                mem = _FAILED
            if mem is not _FAILED:
                return mem.total / MIB, mem.used / MIB, mem.reserved / MIB
            if self._lost:
                return known_total_mib, NAN, NAN
            # the driver lacks the v2 call (or refuses it): v1 from now on
            log.info("NVML memory info v2 unavailable on GPU %d: the driver's reserve is counted as used", self.index)
            self._memory_v2 = None
        mem = self._query(pynvml.nvmlDeviceGetMemoryInfo, handle, default=None)
        if mem is None:
            return known_total_mib, NAN, NAN
        return mem.total / MIB, mem.used / MIB, NAN  # v1: used = total - free

    def _clock_reasons(self, handle: Any) -> int | None:
        """Why the clocks are where they are (NVML's bitmask); None where the driver does not say."""
        while self._reason_functions:
            fn = getattr(pynvml, self._reason_functions[0], None)
            value: Any = _NO_FUNCTION
            if fn is not None:
                value = self._query(fn, handle, default=None, no_function=_NO_FUNCTION)
            if value is _NO_FUNCTION:
                self._reason_functions.pop(0)  # this driver or binding knows only the older name
                continue
            return None if value is None else int(value)
        return None

    def _ensure_init(self) -> None:
        if self._initialised:
            return
        with self._lock:
            if self._initialised:
                return
            try:
                self._reason = self._open()
            except Exception as err:  # noqa: BLE001 - availability checks never raise
                log.exception("NVML initialisation failed")
                self._reason = f"NVIDIA GPU readings failed to start ({err})" + _EVERYTHING_ELSE_WORKS
                self._info = None
            self._initialised = True

    def _open(self) -> str:
        """Initialise NVML and read the static facts; returns a reason when unavailable."""
        if pynvml is None:
            return REASON_NO_PACKAGE
        try:
            pynvml.nvmlInit()
        except _error_classes("NVMLError_LibraryNotFound"):
            return REASON_NO_LIBRARY
        except _error_classes("NVMLError_DriverNotLoaded"):
            return REASON_DRIVER_NOT_LOADED
        except _error_classes("NVMLError_LibRmVersionMismatch"):
            return REASON_VERSION_MISMATCH
        except _error_classes("NVMLError_NoPermission"):
            return REASON_NO_PERMISSION
        except pynvml.NVMLError as err:
            return f"NVIDIA driver could not be initialised ({_text(err)})" + _EVERYTHING_ELSE_WORKS
        self._nvml_open = True
        try:
            count = int(pynvml.nvmlDeviceGetCount())
            if count == 0:
                return REASON_NO_GPU
            if not 0 <= self.index < count:
                return f"GPU {self.index} not found: the driver sees {count} GPU(s)" + _EVERYTHING_ELSE_WORKS
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            name = _text(pynvml.nvmlDeviceGetName(self._handle))
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
            total_mib = pynvml.nvmlDeviceGetMemoryInfo(self._handle).total / MIB
        except _error_classes("NVMLError_GpuIsLost", "NVMLError_GpuNotFound") as err:
            return gpu_lost_reason("", _text(err))
        except pynvml.NVMLError as err:
            return f"NVIDIA GPU {self.index} could not be read ({_text(err)})" + _EVERYTHING_ELSE_WORKS
        uuid = _text(self._query(pynvml.nvmlDeviceGetUUID, self._handle, default=""))
        self._info = GpuInfo(name=name, driver=driver, memory_total_mib=total_mib, index=self.index, uuid=uuid)
        return ""

    def _server_memory_mib(self, server_pids: Sequence[int]) -> float:
        """GPU memory (MiB) held by the server's processes; NaN when NVML cannot attribute it."""
        if not server_pids:
            return NAN
        wanted = set(server_pids)
        listed: list[Any] = []
        lists_read = 0
        for fn_name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            fn = getattr(pynvml, fn_name, None)
            procs = self._query(fn, self._handle, default=None) if fn is not None else None
            if procs is not None:
                lists_read += 1
                listed.extend(procs)
        if lists_read == 0:
            return NAN
        # A process that does compute and graphics appears in both lists with the same
        # memory: count each pid once. None is NVML's N/A (Windows WDDM, some containers).
        per_pid: dict[int, list[float]] = {}
        for p in listed:
            if p.pid in wanted:
                used = getattr(p, "usedGpuMemory", None)
                per_pid.setdefault(p.pid, []).append(NAN if used is None else used / MIB)
        if not per_pid and listed and not any(_pid_visible(p.pid) for p in listed):
            # Inside a container NVML reports host pids, which never match ours: unknown, not 0.
            return NAN
        total = 0.0
        for values in per_pid.values():
            known = [v for v in values if not math.isnan(v)]
            total += max(known) if known else NAN
        return total


def _memory_v2_version() -> int | None:
    """The struct version for nvmlDeviceGetMemoryInfo_v2 where the installed bindings know it, else None."""
    version = getattr(pynvml, "nvmlMemory_v2", None) if pynvml is not None else None
    return version if isinstance(version, int) else None


def _pid_visible(pid: int) -> bool:
    """Whether a process id exists in this process's pid namespace (True where unknowable)."""
    if not os.path.isdir("/proc"):
        return True
    return os.path.exists(f"/proc/{pid}")


def make_gpu_backend(index: int = 0) -> GpuBackend:
    """An NVML backend for GPU `index` when one answers, else a NullGpuBackend saying why."""
    backend = NvmlBackend(index)
    if backend.available:
        return backend
    reason = backend.unavailable_reason
    backend.close()
    return NullGpuBackend(reason)
