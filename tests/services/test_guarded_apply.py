"""Guarded apply against a real stand-in `ollama serve`: keep what works, roll back what broke."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from app.adapters.storage.apply_history import ApplyHistory
from app.services.guarded_apply import GuardedApplier
from app.backends.llama_server.client import LlamaServerClient
from app.backends.ollama.client import OllamaClient
from app.core.memory.estimator import GpuMemory
from app.backends.ollama.show import shape_from_show
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.pricing import price
from app.core.units import GIB
from app.core.server.state import ServerState, ServerStatus
from app.core.server.settings import ServerSettings
from tests.fakes.llama_server.replay import Replay, replaying
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from tests.fakes.ollama.server_fixtures import free_port

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL = "qwen3:14b"
GOOD = dict(context_length=4096, num_parallel=1, flash_attention="on")


@pytest.fixture(scope="module")
def shape():
    return shape_from_show(json.loads((DATA / "show_qwen3_14b.json").read_text()), 9_276_198_565)


@pytest.fixture
def applier_factory(make_supervisor, tmp_path):
    def make(**env_free_kwargs):
        harness = make_supervisor(ServerSettings(port=free_port(), **GOOD))
        status = harness.run(harness.supervisor.start())
        assert status.state is ServerState.RUNNING_MANAGED, status.message
        history = ApplyHistory(tmp_path / "history.sqlite3")
        gpu = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")
        return harness, GuardedApplier(harness.supervisor, OllamaClient, gpu, record=history.add), history
    return make


def test_out_of_memory_load_rolls_back_to_last_good(applier_factory, monkeypatch, shape):
    monkeypatch.setenv("FAKE_OLLAMA_OOM_ABOVE_MIB", "12000")
    harness, applier, history = applier_factory()
    good = harness.supervisor.settings
    risky = good.replace(num_parallel=4, context_length=16384)
    predicted = price(risky, shape, GpuMemory(24 * GIB), "0.12.6", planner=OLLAMA_PLANNER)
    report = harness.run(applier.apply(risky, good, MODEL, predicted), timeout=30)

    assert report.judgement.rollback
    assert "ran out of memory" in report.judgement.reason and "cudaMalloc failed" in report.judgement.reason
    assert report.restored == good
    assert report.rollback_ok and harness.supervisor.status.state is ServerState.RUNNING_MANAGED
    assert harness.supervisor.settings == good
    harness.logs.wait_for("OLLAMA_NUM_PARALLEL:4")  # the risky settings really were tried
    [record] = history.recent()
    assert record["kept"] is False and record["predicted_vram_bytes"] == predicted.total_gpu_bytes
    assert record["tried"]["num_parallel"] == 4 and record["restored"]["num_parallel"] == 1


def test_unexpected_cpu_spill_rolls_back(applier_factory, monkeypatch, shape):
    monkeypatch.setenv("FAKE_OLLAMA_GPU_MIB", "12000")
    harness, applier, history = applier_factory()
    good = harness.supervisor.settings
    bigger = good.replace(num_parallel=4, context_length=8192)
    predicted = price(bigger, shape, GpuMemory(24 * GIB), "0.12.6", planner=OLLAMA_PLANNER)
    assert predicted.verdict == "fits"  # on a 24 GiB card; the stand-in only has 12000 MiB
    report = harness.run(applier.apply(bigger, good, MODEL, predicted), timeout=30)

    assert report.judgement.rollback
    assert "on the CPU" in report.judgement.reason and report.judgement.reason.startswith("Ollama put ")
    assert report.observation.ps_size_vram_bytes < report.observation.ps_size_bytes
    assert harness.supervisor.settings == good
    assert history.recent()[0]["kept"] is False


def test_working_settings_are_kept_with_predicted_and_measured(applier_factory, shape):
    harness, applier, history = applier_factory()
    good = harness.supervisor.settings
    better = good.replace(num_parallel=2, context_length=8192)
    predicted = price(better, shape, GpuMemory(24 * GIB), "0.12.6", planner=OLLAMA_PLANNER)
    report = harness.run(applier.apply(better, good, MODEL, predicted), timeout=30)

    assert report.judgement.keep and report.restored is None
    assert harness.supervisor.settings == better
    assert report.observation.ps_context_length == 8192
    assert "predicted" in report.judgement.reason and "measured" in report.judgement.reason
    record = history.recent()[0]
    assert record["kept"] is True and record["measured_vram_bytes"] == report.observation.ps_size_vram_bytes


def test_history_survives_reopening(tmp_path):
    path = tmp_path / "h.sqlite3"
    first = ApplyHistory(path)
    first.add({"at": 1.0, "kept": True, "reason": "ok", "predicted_vram_bytes": 1, "measured_vram_bytes": 2})
    again = ApplyHistory(path)
    assert again.recent()[0]["reason"] == "ok"


class _ThreadNoting(ScriptedGpuBackend):
    """A scripted GPU that notes which thread read it."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def sample(self, t, server_pids):
        self.threads.append(threading.get_ident())
        return super().sample(t, server_pids)


def test_the_record_is_written_and_the_gpu_read_off_the_loop_thread(make_supervisor, tmp_path):
    harness = make_supervisor(ServerSettings(port=free_port(), **GOOD))
    assert harness.run(harness.supervisor.start()).state is ServerState.RUNNING_MANAGED
    history = ApplyHistory(tmp_path / "history.sqlite3")
    writers: list[int] = []

    def record(entry):
        writers.append(threading.get_ident())
        return history.add(entry)  # the real SQLite write

    gpu = _ThreadNoting()
    applier = GuardedApplier(harness.supervisor, OllamaClient, gpu, record=record)

    async def loop_thread() -> int:
        return threading.get_ident()

    loop_ident = harness.run(loop_thread())
    good = harness.supervisor.settings
    report = harness.run(applier.apply(good.replace(num_parallel=2), good, MODEL, None), timeout=30)
    assert report.judgement.keep
    assert len(writers) == 1 and writers[0] != loop_ident
    assert gpu.threads and loop_ident not in gpu.threads
    assert history.recent()[0]["tried"]["num_parallel"] == 2


class _RestartsInPlace:
    """The supervisor's side of a server that is already up at the settings' address: each restart comes
    back running (the restart itself is the supervisors' own tests' business, not this one's)."""

    program = "llama-server"

    def __init__(self) -> None:
        self.status = ServerStatus(ServerState.RUNNING_MANAGED)
        self.restarted: list[ServerSettings] = []

    async def restart(self, settings: ServerSettings) -> ServerStatus:
        self.restarted.append(settings)
        return self.status

    def server_pids(self) -> list[int]:
        return []


def test_a_served_model_the_server_does_not_list_is_loaded_all_the_same():
    # llama-server's API, as the real one answered it: it serves one model (/props, /v1/models) and, unlike
    # Ollama's /api/ps, says nothing of where its memory sits: the model is listed without sizes.
    async def go():
        async with replaying(Replay()) as url:
            async with LlamaServerClient(url) as client:
                served = (await client.tags())[0].name
                listed = await client.ps()
                assert [m.name for m in listed] == [served] and listed[0].size_vram_bytes is None
            settings = ServerSettings(port=urlsplit(url).port)
            supervisor = _RestartsInPlace()
            applier = GuardedApplier(supervisor, LlamaServerClient, ScriptedGpuBackend(available=False))
            return served, await applier.apply(settings.replace(num_parallel=2), settings, served, None)

    served, report = asyncio.run(go())
    assert report.judgement.keep and report.observation.model_loaded
    assert "no model was loaded" not in report.judgement.reason
    assert report.judgement.reason.startswith(f"{served} is loaded with the new settings")
