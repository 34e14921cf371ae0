"""Record NVML readings on a machine with an NVIDIA GPU, as the app's NVML backend reads them.

Each sample holds the raw answers of the NVML calls app.adapters.telemetry.nvml makes (memory info v1 and v2,
utilisation, power, temperature, the clock-event reasons bitmask, the SM clock, the compute processes with
their memory), so a scripted pynvml can replay them exactly. Needs nvidia-ml-py and, for `load` and
`others`, torch with CUDA. Changes none of the card's settings.

Usage:
  python record_gpu.py load --out F.json [--seconds 60]     idle, a heavy bf16 matrix load, idle
  python record_gpu.py others --out F.json --server-pid PID another process takes memory until little is free
  python record_gpu.py watch --out F.json --seconds S --server-pid PID   plain readings (a server running)
  python record_gpu.py hog --gib N --hold S                 (child) hold N GiB for S seconds
  python record_gpu.py matmul --seconds S                   (child) bf16 matrix products for S seconds
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

import pynvml

MIB = 1024 * 1024


def reasons_fn():
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        fn = getattr(pynvml, name, None)
        if fn is not None:
            return name, fn
    raise SystemExit("no clock-event reasons function in this pynvml")


def one(h, rname, rfn, roles):
    def q(fn, *a):
        try:
            return fn(*a)
        except pynvml.NVMLError as err:
            return {"nvml_error": str(err)}
    mem = q(pynvml.nvmlDeviceGetMemoryInfo, h)
    mem2 = q(pynvml.nvmlDeviceGetMemoryInfo, h, pynvml.nvmlMemory_v2)  # the driver's reserve apart from used
    util = q(pynvml.nvmlDeviceGetUtilizationRates, h)
    procs = q(pynvml.nvmlDeviceGetComputeRunningProcesses, h)
    gprocs = q(pynvml.nvmlDeviceGetGraphicsRunningProcesses, h)
    return {
        "wall": time.time(),
        "memory": {"total": mem.total, "free": mem.free, "used": mem.used} if not isinstance(mem, dict) else mem,
        "memory_v2": {"total": mem2.total, "reserved": mem2.reserved, "free": mem2.free, "used": mem2.used}
        if not isinstance(mem2, dict) else mem2,
        "utilization": {"gpu": util.gpu, "memory": util.memory} if not isinstance(util, dict) else util,
        "power_mw": q(pynvml.nvmlDeviceGetPowerUsage, h),
        "power_limit_mw": q(pynvml.nvmlDeviceGetEnforcedPowerLimit, h),
        "temperature_c": q(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
        "clocks_event_reasons": q(rfn, h),
        "sm_clock_mhz": q(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
        "compute_processes": [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in procs]
        if isinstance(procs, list) else procs,
        "graphics_processes": [{"pid": p.pid, "usedGpuMemory": p.usedGpuMemory} for p in gprocs]
        if isinstance(gprocs, list) else gprocs,
        "roles": dict(roles),
    }


class Recorder:
    def __init__(self, period: float = 0.25) -> None:
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.rname, self.rfn = reasons_fn()
        self.period = period
        self.samples: list[dict] = []
        self.marks: list[dict] = []
        self.roles: dict[str, int] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(one(self.h, self.rname, self.rfn, self.roles))
            self._stop.wait(self.period)

    def mark(self, what: str) -> None:
        self.marks.append({"wall": time.time(), "what": what})
        print(time.strftime("%H:%M:%S"), what, flush=True)

    def __enter__(self) -> Recorder:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def save(self, path: str, how: str) -> None:
        h = self.h
        meta = {"gpu": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion(),
                "nvml_version": pynvml.nvmlSystemGetNVMLVersion(), "reasons_function": self.rname,
                "pynvml": getattr(pynvml, "__version__", ""), "period_s": self.period, "how": how,
                "argv": sys.argv}
        with open(path, "w") as f:
            json.dump({"meta": meta, "marks": self.marks, "samples": self.samples}, f, indent=1, default=str)


def child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, *args])


def wait_for(pred, deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what")
    ap.add_argument("--out")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--gib", type=float, default=0)
    ap.add_argument("--hold", type=float, default=10)
    ap.add_argument("--server-pid", type=int, default=0)
    a = ap.parse_args()
    if a.what == "matmul":
        import torch
        x = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(16384, 16384, device="cuda", dtype=torch.bfloat16)
        end = time.monotonic() + a.seconds
        while time.monotonic() < end:
            for _ in range(8):
                z = x @ y
            torch.cuda.synchronize()
        del z
        return
    if a.what == "hog":
        import torch
        free, total = torch.cuda.mem_get_info()
        want = a.gib * 1024 ** 3 if a.gib > 0 else free - 0.03 * total  # leave about 3 % free
        held, chunk = [], 2 * 1024 ** 3
        while sum(t.numel() for t in held) + chunk <= want:
            held.append(torch.empty(chunk, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        print(f"hog holds {sum(t.numel() for t in held) / 1024 ** 3:.0f} GiB", flush=True)
        time.sleep(a.hold)
        return
    if a.what == "load":
        with Recorder() as r:
            r.mark("idle")
            time.sleep(5)
            p = child("matmul", "--seconds", str(a.seconds))
            r.roles["load"] = p.pid
            r.mark(f"matmul load pid {p.pid} for {a.seconds:.0f} s")
            p.wait()
            r.roles.pop("load", None)
            r.mark("idle after load")
            time.sleep(6)
        r.save(a.out, "bf16 16384x16384 matrix products in a child process, between idle stretches")
        return
    if a.what == "others":
        with Recorder() as r:
            server = a.server_pid
            srv = None
            if not server:
                srv = child("hog", "--gib", "2", "--hold", "40")
                server = srv.pid
            r.roles["server"] = server
            r.mark(f"server pid {server}")
            time.sleep(4)
            hog = child("hog", "--hold", "10")
            r.roles["other"] = hog.pid
            r.mark(f"other process pid {hog.pid} takes memory until about 3 % is free")
            hog.wait()
            r.roles.pop("other", None)
            r.mark("other process ended")
            time.sleep(4)
            if srv is not None:
                srv.kill()
        r.save(a.out, "a 'server' process holds memory; another process takes nearly all the rest, holds it, ends")
        return
    if a.what == "watch":
        with Recorder() as r:
            r.roles["server"] = a.server_pid
            r.mark(f"server pid {a.server_pid}")
            time.sleep(a.seconds)
        r.save(a.out, "plain readings while a server runs")
        return
    raise SystemExit(f"unknown: {a.what}")


if __name__ == "__main__":
    main()
