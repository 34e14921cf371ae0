"""One price everywhere: `estimate` (its real entry point, --json), the Server page's fit panel (a real widget)
and the sweep's pricing give the same bytes for the same setting, model, GPU and server version — on Ollama
0.32.15 (the stand-in `ollama`, which reports that version and serves qwen3:14b's real show reply) and on the
real llama-server with the bundled SmolLM2 — with the server's own context and batch and with them given."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import app.services.bench.sweep_runner as sweep_runner
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.backends.ollama.client import OllamaClient, load_client
from app.backends.ollama.show import facts_from_show
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.bench.stats import LatencyTargets
from app.core.bench.sweep import SweepAxes, SweepSpec
from app.core.bench.workload import BenchPrompt, LoadPlan
from app.core.memory.pricing import Priced, price_load
from app.core.model_shape import ModelShape
from app.core.ports.catalog import CatalogFactory
from app.core.ports.planner import LoadPlanner
from app.core.server.mapping import TuningMapping
from app.core.server.settings import ServerSettings
from app.core.server.state import ServerState
from app.core.telemetry import GpuInfo
from app.core.units import MIB
from app.ui.pages.server.fit_panel import FitPanel
from tests.backends.llama_server.test_supervisor import make_llama  # noqa: F401 - the fixture
from tests.fakes.ollama.server_fixtures import free_port
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend

ROOT = Path(__file__).resolve().parents[2]
FAST = {"FAKE_OLLAMA_TOKENS_PER_S": "1000", "FAKE_OLLAMA_PROMPT_TOKENS_PER_S": "100000",
        "FAKE_OLLAMA_ANSWER_TOKENS": "4"}
WAIT_MS = 10_000
SWEEP_S = 300.0
COMPARED = ("total_gpu_bytes", "peak_gpu_bytes", "layers_on_gpu", "compute_bytes", "kv_bytes", "overhead_bytes",
            "verdict")


def card(total_mib: float) -> ScriptedGpuBackend:
    """A card of total_mib on which another process holds 600 MiB and the server nothing yet."""
    info = GpuInfo("NVIDIA test card", "570.133.07", total_mib, index=0, uuid="GPU-0000")
    return ScriptedGpuBackend(info, script=[GpuReading(600.0, 0.0, 30.0, 40.0, server_memory_mib=0.0)])


def cli(args: list[str]) -> dict[str, Any]:
    """`estimate ... --json` run as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "app", "estimate", *args, "--json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def panel_price(qtbot, mapping: TuningMapping, planner: LoadPlanner, version: str, total_mib: float,
                settings: ServerSettings, shape: ModelShape) -> dict[str, Any]:
    """The fit panel's estimate for these settings on the card (600 MiB used by others)."""
    panel = FitPanel(mapping=mapping, planner=planner)
    qtbot.addWidget(panel)
    panel.set_version(version)
    panel.set_gpu(int(total_mib * MIB), 600 * MIB)
    panel.set_settings(settings)
    panel.set_models(["m"])
    panel.set_model_shape("m", shape)
    qtbot.waitUntil(lambda: panel.estimate is not None, timeout=WAIT_MS)
    est = panel.estimate
    assert est is not None
    return {key: getattr(est, key) for key in COMPARED}


def spy_on_the_sweep(monkeypatch: pytest.MonkeyPatch) -> list[Priced]:
    """Every price the sweep takes for a point, as it takes it (the real price_load, recorded)."""
    seen: list[Priced] = []

    def recorded(*args: Any, **kwargs: Any) -> Priced:
        priced = price_load(*args, **kwargs)
        seen.append(priced)
        return priced

    monkeypatch.setattr(sweep_runner, "price_load", recorded)
    return seen


def sweep_prices(h, catalog: CatalogFactory, loader: Any, planner: LoadPlanner, gpu: ScriptedGpuBackend,
                 base: ServerSettings, model: str, seen: list[Priced]) -> list[Priced]:
    """Run a one-point sweep of `base` and return the price it took for the point."""
    plan = LoadPlan(model=model, prompts=(BenchPrompt("p", "hello"),), requests=1, num_predict=4, think=False,
                    warmup_requests=0)
    spec = SweepSpec(base, SweepAxes(parallel=(base.num_parallel,)), plan, LatencyTargets(60_000, 10_000))
    runner = sweep_runner.SweepRunner(h.supervisor, catalog, loader, gpu=gpu, server_pids=h.supervisor.server_pids,
                                      sample_interval_s=0.05, planner=planner)
    seen.clear()
    h.run(runner.run(spec), timeout=SWEEP_S)
    assert len(seen) == 1, seen
    return list(seen)


def by_key(est: Any) -> dict[str, Any]:
    return {key: getattr(est, key) for key in COMPARED}


def from_json(out: dict[str, Any]) -> dict[str, Any]:
    return {key: out[key] for key in COMPARED}


async def shape_of(catalog: CatalogFactory, url: str, name: str) -> tuple[ModelShape, str]:
    """The model's shape as the Server page reads it (show + the size in the model list) and the version."""
    async with catalog(url) as client:
        version = await client.version()
        details = await client.show(name, verbose=True)
        local = await client.tags()
    size = next(m.size_bytes for m in local if name in (m.name, m.model))
    return details.facts.shape(size), version


OLLAMA_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"num_parallel": 1}, ["--parallel", "1"]),  # Ollama's default context and automatic batch
    ({"num_parallel": 4, "context_length": 8192}, ["--parallel", "4", "--ctx", "8192"]),
]


@pytest.mark.parametrize(("fields", "flags"), OLLAMA_CASES)
def test_ollama_0_32_15_estimate_fit_panel_and_sweep_price_the_same_bytes(
        make_supervisor, monkeypatch: pytest.MonkeyPatch, qtbot, fields: dict[str, Any], flags: list[str]) -> None:
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)
    total = 24564.0
    base = ServerSettings(port=free_port()).replace(**fields)
    h = make_supervisor(base)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    shape, version = h.run(shape_of(OllamaClient, base.base_url, "qwen3:14b"))
    assert version == "0.32.15"
    seen = spy_on_the_sweep(monkeypatch)
    swept = sweep_prices(h, OllamaClient, load_client, OLLAMA_PLANNER, card(total), base, "qwen3:14b", seen)[0]
    assert h.supervisor.status.state is ServerState.RUNNING_MANAGED  # the sweep put the server back
    out = cli(["--model", "qwen3:14b", "--url", base.base_url, "--gpu-total-mib", str(total), "--gpu-used-mib", "600",
               *flags])
    panel = panel_price(qtbot, OLLAMA_TUNING, OLLAMA_PLANNER, version, total, base, shape)
    assert from_json(out) == panel == by_key(swept.estimate)
    # the launch priced is the one Ollama makes: the same context and batch, its automatic batch where none is set
    assert (out["plan"]["num_ctx"], out["plan"]["num_batch"]) == (swept.plan.num_ctx, swept.plan.num_batch)
    def command(lines: list[str] | tuple[str, ...]) -> list[str]:
        return [line for line in lines if not line.startswith("#")]  # the words on the sources may differ

    assert command(out["plan"]["launch_lines"]) == command(swept.plan.launch_lines) and swept.plan.launch_lines
    if "context_length" not in fields:
        assert out["plan"]["batch_source"].startswith("Ollama's automatic batch") and out["plan"]["num_batch"] > 512


LLAMA_CASES: list[tuple[dict[str, Any], list[str], float]] = [
    # no -c: each slot the training context; the second card is too small for it, so --fit cuts it
    ({"num_parallel": 4, "context_length": None}, ["--parallel", "4"], 24564.0),
    ({"num_parallel": 4, "context_length": None}, ["--parallel", "4"], 2900.0),
    ({"num_parallel": 2, "context_length": 1024, "batch_size": 256, "micro_batch_size": 128},
     ["--parallel", "2", "--ctx", "1024", "--batch", "256", "--ubatch", "128"], 24564.0),
]


@pytest.mark.engine
@pytest.mark.parametrize(("fields", "flags", "total"), LLAMA_CASES)
def test_llama_server_estimate_fit_panel_and_sweep_price_the_same_bytes(
        make_llama: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, qtbot,  # noqa: F811
        fields: dict[str, Any], flags: list[str], total: float, bundled_model: Path) -> None:
    h = make_llama(**fields)
    assert h.run(h.supervisor.start()).state is ServerState.RUNNING_MANAGED
    base = h.supervisor.settings
    shape, version = h.run(shape_of(LLAMA_SERVER.catalog, base.base_url, str(bundled_model)))
    seen = spy_on_the_sweep(monkeypatch)
    swept = sweep_prices(h, LLAMA_SERVER.catalog, LLAMA_SERVER.load_client, LLAMA_SERVER.planner, card(total), base,
                         str(bundled_model), seen)[0]
    out = cli(["--backend", "llama_server", "--model", str(bundled_model), "--url", base.base_url,
               "--gpu-total-mib", str(total), "--gpu-used-mib", "600", *flags])
    panel = panel_price(qtbot, LLAMA_SERVER_TUNING, LLAMA_SERVER.planner, version, total, base, shape)
    assert from_json(out) == panel == by_key(swept.estimate)
    assert out["plan"]["num_ctx"] == swept.plan.num_ctx and out["plan"]["num_batch"] == swept.plan.num_batch
    if fields["context_length"] is None and total > 10_000:
        assert swept.plan.num_ctx == shape.context_length  # the training context, in each slot
    elif fields["context_length"] is None:
        assert 4096 <= swept.plan.num_ctx < shape.context_length and "--fit" in out["plan"]["context_source"]


def test_a_models_own_num_ctx_and_num_batch_are_priced_alike_by_estimate_and_the_fit_panel(qtbot,
                                                                                          tmp_path: Path) -> None:
    show = json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text())
    show["parameters"] = "num_ctx 8192\nnum_batch 1024"
    path = tmp_path / "show.json"
    path.write_text(json.dumps(show))
    size = 9_000_210_784
    out = cli(["--show", str(path), "--model-size", str(size), "--ollama-version", "0.32.15", "--parallel", "2",
               "--gpu-total-mib", "24564", "--gpu-used-mib", "600"])
    assert (out["plan"]["num_ctx"], out["plan"]["num_batch"]) == (8192, 1024)
    assert (out["plan"]["context_source"], out["plan"]["batch_source"]) == ("the model's num_ctx", "the model's num_batch")
    facts = facts_from_show(show)
    panel = FitPanel(mapping=OLLAMA_TUNING, planner=OLLAMA_PLANNER)
    qtbot.addWidget(panel)
    panel.set_version("0.32.15")
    panel.set_gpu(24564 * MIB, 600 * MIB)
    panel.set_settings(ServerSettings(num_parallel=2))
    panel.set_models(["m"])
    panel.set_model_params("m", facts.own_context, facts.own_batch)
    panel.set_model_shape("m", facts.shape(size))
    qtbot.waitUntil(lambda: panel.estimate is not None, timeout=WAIT_MS)
    assert from_json(out) == by_key(panel.estimate) and panel.estimate.n_ctx_total == 2 * 8192
