"""Guarded apply on the real Ollama 0.32.15: new settings restart the server, the check after it reads
what the server really did (/api/ps, and the llama-server command line in its log), and settings the
real server rejects are rolled back with its own words."""

from __future__ import annotations

import re
import shlex

import pytest

from app.adapters.storage.apply_history import ApplyHistory
from app.backends.ollama.client import OllamaClient
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.core.memory.pricing import price
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.services.guarded_apply import GuardedApplier
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.scripted_gpu import ScriptedGpuBackend
from tests.ollama_real_fixtures import MODEL_NAME

pytestmark = pytest.mark.ollama_real
KV_NEEDS_FLASH = "quantized V cache requires flash_attn to be enabled"


def llama_server_flags(log_lines: list[str]) -> dict[str, str]:
    """The flags of the last `starting llama-server` command line Ollama logged (flag -> value, '' for none)."""
    commands = [line for line in log_lines if 'msg="starting llama-server"' in line]
    assert commands, "Ollama logged no llama-server command line"
    found = re.search(r'cmd="((?:[^"\\]|\\.)*)"', commands[-1])
    assert found, commands[-1]
    words = shlex.split(found.group(1))
    flags: dict[str, str] = {}
    for index, word in enumerate(words):
        if word.startswith("-"):
            following = words[index + 1] if index + 1 < len(words) else ""
            flags[word] = "" if following.startswith("--") else following
    return flags


@pytest.fixture
def managed(real_supervisor, tmp_path):
    """A managed real server with parallel 1 and a 1024-token context, and a guarded applier for it."""
    def make(**settings):
        harness = real_supervisor(ServerSettings(port=free_port(), **settings))
        status = harness.run(harness.supervisor.start(), timeout=90)
        assert status.state is ServerState.RUNNING_MANAGED, status.message
        history = ApplyHistory(tmp_path / "apply-checks.sqlite3")
        gpu = ScriptedGpuBackend(available=False, reason="no NVIDIA driver")  # this machine has none
        return harness, GuardedApplier(harness.supervisor, OllamaClient, gpu, record=history.add), history
    return make


def priced_without_a_gpu(harness, settings):
    """The estimate the Server page passes to the apply on this machine: the model's shape from the real
    server (show and its size on disk, as the GUI reads them), priced for no GPU."""
    async def shape():
        async with OllamaClient(harness.supervisor.settings.base_url) as client:
            details = await client.show(f"{MODEL_NAME}:latest", verbose=True)
            sizes = {m.name: m.size_bytes for m in await client.tags()}
        return details.facts.shape(sizes[f"{MODEL_NAME}:latest"])

    return price(settings, harness.run(shape(), timeout=60), None, harness.supervisor.status.version, planner=OLLAMA_PLANNER)


def test_apply_restarts_with_the_new_settings_and_checks_them_on_the_real_server(managed):
    harness, applier, history = managed(num_parallel=1, context_length=1024)
    good = harness.supervisor.settings
    new = good.replace(num_parallel=2, context_length=2048)
    predicted = priced_without_a_gpu(harness, new)
    before = len(harness.logs.lines)
    report = harness.run(applier.apply(new, good, MODEL_NAME, predicted), timeout=180)

    assert harness.supervisor.status.state is ServerState.RUNNING_MANAGED
    assert report.observation.server_running and report.observation.load_error is None
    assert report.observation.ps_context_length == 2048  # per slot, as /api/ps reports it
    assert report.observation.ps_size_bytes and report.observation.ps_size_vram_bytes == 0  # no GPU: all on the CPU
    flags = llama_server_flags(harness.logs.lines[before:])
    assert flags["-np"] == "2" and flags["-c"] == str(2 * 2048)  # the runner's context is per slot x parallel
    assert "OLLAMA_NUM_PARALLEL:2" in harness.logs.wait_for('msg="server config"', after=before)
    # A machine without a GPU runs everything on the CPU, as priced; that is no spill, so the settings stay.
    assert report.judgement.keep, report.judgement.reason
    assert harness.supervisor.settings == new
    assert history.recent()[0]["kept"] is True


def test_a_quantized_kv_cache_without_flash_attention_is_rejected_by_the_server_and_rolled_back(managed):
    harness, applier, history = managed(num_parallel=1, context_length=1024)
    good = harness.supervisor.settings
    rejected = good.replace(kv_cache_type="q8_0", flash_attention="off")
    before = len(harness.logs.lines)
    report = harness.run(applier.apply(rejected, good, MODEL_NAME, None), timeout=180)

    flags = llama_server_flags(harness.logs.lines[before:])
    assert (flags["--cache-type-k"], flags["--cache-type-v"], flags["--flash-attn"]) == ("q8_0", "q8_0", "off")
    assert report.observation.load_error is not None
    assert report.observation.load_error.startswith("llama-server process has terminated: exit status 1")
    assert KV_NEEDS_FLASH in report.observation.load_error

    # The server itself keeps running, yet every request fails: the settings must not stay.
    async def chat_status() -> str:
        async with OllamaClient(harness.supervisor.settings.base_url) as client:
            await client.load(MODEL_NAME)
            return "loaded"

    assert report.judgement.rollback, report.judgement.reason
    assert KV_NEEDS_FLASH in report.judgement.reason
    assert report.restored == good and report.rollback_ok
    assert harness.supervisor.settings == good
    assert harness.run(chat_status(), timeout=90) == "loaded"  # the restored settings load again
    assert history.recent()[0]["kept"] is False
