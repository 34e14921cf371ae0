"""Pytest fixtures (registered in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.fakes.scripted_gpu import ScriptedGpuBackend, serving_script


@pytest.fixture
def scripted_gpu() -> ScriptedGpuBackend:
    """An RTX 4090 as NVML reports it: idle, then Qwen3-14B loads at 20 s and serves in bursts."""
    return ScriptedGpuBackend(script=serving_script())
