"""NvmlBackend against pynvml with its device functions replaced by an RTX 4090 stand-in.

The stand-in keeps pynvml's real structs, process objects and NVMLError classes, so the
backend sees exactly the types and exceptions the real bindings produce.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os

import pynvml
import pytest

from app.adapters.telemetry import nvml as nvml_mod
from app.adapters.telemetry.nvml import NullGpuBackend, NvmlBackend, make_gpu_backend
from app.core.units import MIB

NO_SUCH_PID = 4_194_304 + 17  # above Linux's PID_MAX_LIMIT: no namespace can hold it


def nvml_error(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)


def proc(pid: int, used_bytes: int | None) -> pynvml.nvmlFriendlyObject:
    fields = {"pid": pid, "usedGpuMemory": used_bytes, "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF}
    return pynvml.nvmlFriendlyObject(fields)


class FakeNvml:
    """The driver side of NVML for one RTX 4090; fields are set by each test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.init_error: int | None = None
        self.count = 1
        self.name: str | bytes = "NVIDIA GeForce RTX 4090"
        self.driver: str | bytes = "570.133.07"
        self.total = 24564 * MIB
        self.used = 620 * MIB  # as memory info v1 says it: total - free, the driver's reserve included
        self.reserved: int | None = None  # the driver's reserve, as v2 says it; None: a driver without v2
        self.v2_error: int | None = None  # an NVML error code memory info v2 alone raises (v1 still answers)
        self.util = 3
        self.power_mw = 24_500
        self.temp = 38
        self.reasons = 0x1  # clock-event reasons bitmask (GpuIdle)
        self.sm_clock = 210
        self.compute: list = []
        self.graphics: list = []
        self.process_samples: list = []  # c_nvmlProcessUtilizationSample_t, as the driver keeps them
        self.errors: dict[str, int] = {}  # function name -> NVML error code it raises
        self.inits = 0
        self.shutdowns = 0
        self.calls: list[str] = []
        for name in (
            "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
            "nvmlDeviceGetName", "nvmlSystemGetDriverVersion", "nvmlDeviceGetUUID",
            "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage",
            "nvmlDeviceGetTemperature", "nvmlDeviceGetComputeRunningProcesses",
            "nvmlDeviceGetGraphicsRunningProcesses", "nvmlDeviceGetProcessUtilization",
            "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlDeviceGetClockInfo",
        ):
            monkeypatch.setattr(pynvml, name, self._wrap(name))

    def _wrap(self, name: str):
        impl = getattr(self, "_" + name)

        def call(*args):
            self.calls.append(name)
            if name in self.errors:
                raise nvml_error(self.errors[name])
            return impl(*args)

        call.__name__ = name
        return call

    def lose_gpu(self) -> None:
        for name in ("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetPowerUsage",
                     "nvmlDeviceGetTemperature", "nvmlDeviceGetComputeRunningProcesses",
                     "nvmlDeviceGetGraphicsRunningProcesses"):
            self.errors[name] = pynvml.NVML_ERROR_GPU_IS_LOST

    def _nvmlInit(self):
        self.inits += 1
        if self.init_error is not None:
            raise nvml_error(self.init_error)

    def _nvmlShutdown(self):
        self.shutdowns += 1

    def _nvmlDeviceGetCount(self):
        return self.count

    def _nvmlDeviceGetHandleByIndex(self, index):
        if index >= self.count:
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return ctypes.c_void_p(0x4090)

    def _nvmlDeviceGetName(self, handle):
        return self.name

    def _nvmlSystemGetDriverVersion(self):
        return self.driver

    def _nvmlDeviceGetUUID(self, handle):
        return "GPU-5c3e1d7a-4090-0000-0000-000000000000"

    def _nvmlDeviceGetMemoryInfo(self, handle, version=None):
        free = self.total - self.used
        if not version:
            return pynvml.c_nvmlMemory_t(total=self.total, free=free, used=self.used)
        if self.reserved is None:  # what the bindings raise where the driver has no nvmlDeviceGetMemoryInfo_v2
            raise nvml_error(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        if self.v2_error is not None:
            raise nvml_error(self.v2_error)
        if version != pynvml.nvmlMemory_v2:
            raise nvml_error(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return pynvml.c_nvmlMemory_v2_t(version=version, total=self.total, reserved=self.reserved, free=free,
                                        used=self.used - self.reserved)

    def _nvmlDeviceGetUtilizationRates(self, handle):
        return pynvml.c_nvmlUtilization_t(gpu=self.util, memory=1)

    def _nvmlDeviceGetPowerUsage(self, handle):
        return self.power_mw

    def _nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self.temp

    def _nvmlDeviceGetComputeRunningProcesses(self, handle):
        return list(self.compute)

    def _nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        return list(self.graphics)

    def _nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def _nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self.reasons

    def _nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == pynvml.NVML_CLOCK_SM
        return self.sm_clock

    def _nvmlDeviceGetProcessUtilization(self, handle, last_seen_us):
        newer = [x for x in self.process_samples if x.timeStamp > last_seen_us]
        if not newer:  # the driver's answer when no process used the GPU since then
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND)
        return newer


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    return FakeNvml(monkeypatch)


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


@pytest.mark.skipif(_driver_present(), reason="this machine has an NVIDIA driver")
def test_real_pynvml_without_driver_gives_a_null_backend_with_reason():
    backend = make_gpu_backend()
    assert isinstance(backend, NullGpuBackend)
    assert not backend.available
    assert backend.unavailable_reason == (
        "No NVIDIA driver found (libnvidia-ml.so could not be loaded) — GPU graphs are off; everything else works."
    )
    assert backend.info() is None
    assert backend.sample(1.0, [123]) is None
    backend.close()


def test_package_missing(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(nvml_mod, "pynvml", None)
    backend = make_gpu_backend()
    assert isinstance(backend, NullGpuBackend)
    assert backend.unavailable_reason.startswith("nvidia-ml-py is not installed")
    assert backend.sample(0.0, []) is None


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "No NVIDIA driver found (libnvidia-ml.so could not be loaded)"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "NVIDIA driver is installed but not loaded"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVIDIA driver and kernel module versions differ"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "No permission to read the NVIDIA GPU"),
        (pynvml.NVML_ERROR_UNKNOWN, "NVIDIA driver could not be initialised (Unknown Error)"),
    ],
)
def test_init_errors_become_reasons(fake_nvml: FakeNvml, code: int, expected: str):
    fake_nvml.init_error = code
    backend = make_gpu_backend()
    assert isinstance(backend, NullGpuBackend)
    assert backend.unavailable_reason.startswith(expected)
    assert backend.unavailable_reason.endswith("GPU graphs are off; everything else works.")
    assert fake_nvml.shutdowns == 0  # nothing was opened


def test_driver_without_gpu(fake_nvml: FakeNvml):
    fake_nvml.count = 0
    backend = make_gpu_backend()
    assert backend.unavailable_reason.startswith("NVIDIA driver found but no GPU")
    assert fake_nvml.shutdowns == 1  # NVML was opened, so it is closed again


def test_index_beyond_the_gpus(fake_nvml: FakeNvml):
    backend = make_gpu_backend(index=2)
    assert backend.unavailable_reason.startswith("GPU 2 not found: the driver sees 1 GPU(s)")


def test_reads_a_4090_in_user_units(fake_nvml: FakeNvml):
    fake_nvml.used = 15_000 * MIB
    fake_nvml.util = 97
    fake_nvml.power_mw = 351_250
    fake_nvml.temp = 66
    backend = make_gpu_backend()
    assert isinstance(backend, NvmlBackend)
    info = backend.info()
    assert (info.name, info.driver, info.memory_total_mib) == ("NVIDIA GeForce RTX 4090", "570.133.07", 24564.0)
    s = backend.sample(12.5, [])
    assert s.t == 12.5
    assert (s.memory_used_mib, s.memory_total_mib) == (15_000.0, 24564.0)
    assert (s.utilization_pct, s.power_w, s.temperature_c) == (97.0, 351.25, 66.0)
    assert math.isnan(s.server_memory_mib)  # no server: nothing to attribute
    backend.close()
    assert fake_nvml.shutdowns == 1


def test_initialises_lazily_and_once(fake_nvml: FakeNvml):
    backend = NvmlBackend()
    assert fake_nvml.inits == 0
    for i in range(5):
        backend.sample(float(i), [])
    assert backend.available and backend.unavailable_reason == ""
    assert fake_nvml.inits == 1


def test_old_bindings_returning_bytes(fake_nvml: FakeNvml):
    fake_nvml.name = b"NVIDIA GeForce RTX 4090"
    fake_nvml.driver = b"535.183.01"
    info = make_gpu_backend().info()
    assert (info.name, info.driver) == ("NVIDIA GeForce RTX 4090", "535.183.01")


def test_unsupported_fields_are_nan_and_logged_once(fake_nvml: FakeNvml, caplog: pytest.LogCaptureFixture):
    fake_nvml.errors["nvmlDeviceGetPowerUsage"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake_nvml.errors["nvmlDeviceGetTemperature"] = pynvml.NVML_ERROR_NO_PERMISSION
    fake_nvml.errors["nvmlDeviceGetUtilizationRates"] = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    backend = make_gpu_backend()
    with caplog.at_level(logging.INFO, logger="app.adapters.telemetry.nvml"):
        first = backend.sample(1.0, [])
        second = backend.sample(2.0, [])
    for s in (first, second):
        assert math.isnan(s.power_w) and math.isnan(s.temperature_c) and math.isnan(s.utilization_pct)
        assert s.memory_used_mib == 620.0
    assert backend.available
    assert sum("nvmlDeviceGetPowerUsage" in r.getMessage() for r in caplog.records) == 1


def test_server_memory_sums_the_tree_and_counts_each_pid_once(fake_nvml: FakeNvml):
    me = os.getpid()
    fake_nvml.compute = [proc(501, 9_000 * MIB), proc(502, 5_350 * MIB), proc(me, 300 * MIB)]
    fake_nvml.graphics = [proc(502, 5_350 * MIB)]  # a process in both lists
    s = make_gpu_backend().sample(1.0, [500, 501, 502])
    assert s.server_memory_mib == pytest.approx(14_350.0)


def test_server_without_gpu_memory_reads_zero(fake_nvml: FakeNvml):
    fake_nvml.compute = [proc(os.getpid(), 300 * MIB)]  # someone else, visible here
    assert make_gpu_backend().sample(1.0, [NO_SUCH_PID - 1]).server_memory_mib == 0.0


def test_unattributable_process_memory_is_nan(fake_nvml: FakeNvml):
    fake_nvml.compute = [proc(501, None)]  # NVML's N/A (WDDM, some containers)
    backend = make_gpu_backend()
    assert math.isnan(backend.sample(1.0, [501]).server_memory_mib)
    fake_nvml.graphics = [proc(501, 1_024 * MIB)]  # known in the other list
    assert backend.sample(2.0, [501]).server_memory_mib == 1024.0


def test_host_pids_from_a_container_are_unknown_not_zero(fake_nvml: FakeNvml):
    fake_nvml.compute = [proc(NO_SUCH_PID, 9_000 * MIB)]
    assert math.isnan(make_gpu_backend().sample(1.0, [77]).server_memory_mib)


def test_process_lists_unsupported_is_nan(fake_nvml: FakeNvml):
    fake_nvml.errors["nvmlDeviceGetComputeRunningProcesses"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake_nvml.errors["nvmlDeviceGetGraphicsRunningProcesses"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    assert math.isnan(make_gpu_backend().sample(1.0, [501]).server_memory_mib)


def test_gpu_lost_mid_run(fake_nvml: FakeNvml, caplog: pytest.LogCaptureFixture):
    backend = make_gpu_backend()
    assert backend.sample(1.0, []) is not None
    fake_nvml.lose_gpu()
    with caplog.at_level(logging.WARNING, logger="app.adapters.telemetry.nvml"):
        assert backend.sample(2.0, [501]) is None
    assert not backend.available
    assert backend.unavailable_reason.startswith(
        "GPU lost: the driver no longer reaches NVIDIA GeForce RTX 4090 (GPU is lost)."
    )
    assert backend.info().name == "NVIDIA GeForce RTX 4090"  # what it was stays known
    calls_before = len(fake_nvml.calls)
    assert backend.sample(3.0, [501]) is None
    assert len(fake_nvml.calls) == calls_before  # a lost GPU is not polled again
    assert len([r for r in caplog.records if "lost" in r.getMessage()]) == 1


def test_unexpected_failure_in_init_is_a_reason_not_an_exception(fake_nvml: FakeNvml, monkeypatch: pytest.MonkeyPatch):
    def broken(handle):
        raise OSError("ctypes blew up")

    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", broken)
    backend = make_gpu_backend()
    assert isinstance(backend, NullGpuBackend)
    assert "NVIDIA GPU readings failed to start (ctypes blew up)" in backend.unavailable_reason


def util_sample(pid: int, at_s: float, sm: int) -> pynvml.c_nvmlProcessUtilizationSample_t:
    return pynvml.c_nvmlProcessUtilizationSample_t(pid=pid, timeStamp=int(at_s * 1_000_000), smUtil=sm, memUtil=0,
                                                   encUtil=0, decUtil=0)


def test_process_use_averages_each_pids_samples_since_the_window_began(fake_nvml: FakeNvml):
    server, other = os.getpid(), 1  # pids that exist here, as NVML's do outside a container
    fake_nvml.process_samples = [util_sample(other, 999.0, 100),  # before the window: not counted
                                 util_sample(server, 1001.0, 60), util_sample(server, 1002.0, 80),
                                 util_sample(other, 1001.5, 30), util_sample(other, 1002.5, 50)]
    fake_nvml.compute = [proc(server, 9_000 * MIB), proc(other, 2_000 * MIB)]
    uses = {u.pid: u for u in make_gpu_backend().process_use(1000.0)}
    assert uses[server].sm_util_pct == 70.0 and uses[server].memory_mib == 9_000.0
    assert uses[other].sm_util_pct == 40.0 and uses[other].memory_mib == 2_000.0


def test_process_use_without_samples_is_no_use_and_unsupported_is_unknown(fake_nvml: FakeNvml):
    fake_nvml.compute = [proc(os.getpid(), 300 * MIB)]
    uses = make_gpu_backend().process_use(1000.0)  # the driver answers NotFound: nobody computed since then
    assert uses is not None and len(uses) == 1 and math.isnan(uses[0].sm_util_pct)
    fake_nvml.errors["nvmlDeviceGetProcessUtilization"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    assert make_gpu_backend().process_use(1000.0) is None


def test_process_use_with_host_pids_from_a_container_is_unknown(fake_nvml: FakeNvml):
    fake_nvml.process_samples = [util_sample(NO_SUCH_PID, 1001.0, 90)]
    assert make_gpu_backend().process_use(1000.0) is None
    assert NullGpuBackend("no GPU").process_use(1000.0) is None
