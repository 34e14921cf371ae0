"""The GPU seam lives beside its snapshot types in app.core.telemetry; re-exported here with the other ports."""

from app.core.telemetry import GpuBackend, GpuInfo, GpuSample

__all__ = ["GpuBackend", "GpuInfo", "GpuSample"]
