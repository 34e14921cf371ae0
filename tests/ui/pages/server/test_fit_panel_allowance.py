"""The fit panel prices this machine's GPU with the runtime allowance learnt there, and says which figure it
used and where it came from: the default until a load teaches it, then the learnt one, as soon as a load fed
from a worker thread (the log follower's, the sampler's) has taught it; a card chosen for another machine is
priced with the default. The learner reads the H200's recorded load (benchmarks/vram/h200_llama_server_run2.json)
through llama-server's own log reader."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from app.adapters.storage.allowance_store import AllowanceStore
from app.backends.llama_server.log_signals import LlamaServerLogSignals
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.show import shape_from_show
from app.core.memory.allowance import AllowanceSource
from app.core.memory.allowance_learning import LearnedAllowance
from app.core.server.settings import ServerSettings
from app.core.telemetry import GpuInfo, GpuSample
from app.core.units import MIB
from app.services.runtime_learner import RuntimeLearner
from app.ui.pages.server.fit_panel import FitPanel

ROOT = Path(__file__).resolve().parents[4]
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
ROW = json.loads((ROOT / "benchmarks/vram/h200_llama_server_run2.json").read_text())["rows"][0]
H200 = GpuInfo("NVIDIA H200", "580.159.04", 143771.0)
WAIT_MS = 5_000


def load_lines() -> list[str]:
    return [f"load_tensors:        CUDA0 model buffer size = {ROW['cuda0_model']:8.2f} MiB",
            f"llama_kv_cache:      CUDA0 KV buffer size = {ROW['cuda0_kv']:8.2f} MiB",
            f"sched_reserve:      CUDA0 compute buffer size = {ROW['cuda0_compute']:8.2f} MiB",
            "srv    load_model: initializing, n_slots = 1, n_ctx_slot = 4096, kv_unified = 'false'"]


def teach_from_a_worker(learner: RuntimeLearner) -> None:
    """A load as the app's threads see it: its log lines, then a sampler reading, off the GUI thread."""
    def work() -> None:
        learner.follow(LlamaServerLogSignals())
        for line in load_lines():
            learner.feed_log(line)
        learner.feed_gpu(GpuSample(t=1.0, memory_used_mib=ROW["process_mib"] + 615, memory_total_mib=H200.memory_total_mib,
                                   server_memory_mib=ROW["process_mib"], utilization_pct=0.0, power_w=90.0,
                                   temperature_c=35.0))
    worker = threading.Thread(target=work, name="sampler")
    worker.start()
    worker.join(10)


@pytest.fixture
def learnt(tmp_path: Path) -> RuntimeLearner:
    return RuntimeLearner(AllowanceStore(tmp_path), H200)


def test_the_default_until_a_load_teaches_then_the_learnt_figure_with_its_source(qtbot, learnt) -> None:
    panel = FitPanel(planner=OLLAMA_PLANNER, learner=learnt)
    qtbot.addWidget(panel)
    panel.set_version("0.32.15")
    panel.set_gpu(int(H200.memory_total_mib * MIB), 0)
    panel.set_settings(ServerSettings(context_length=4096))
    panel.set_models(["qwen3:14b"])
    panel.set_model_shape("qwen3:14b", QWEN)
    qtbot.waitUntil(lambda: panel.estimate is not None and not panel.estimate.cpu_only, timeout=WAIT_MS)
    before = panel.estimate
    assert before.allowance.source is AllowanceSource.DEFAULT and before.overhead_bytes == 450 * MIB
    assert "CUDA runtime: 450 MiB, the default for a consumer card" in panel.gpu_label.text()
    assert panel.legend_values["overhead"].text() == "450 MiB default"
    assert "450 MiB, the default" in panel.legend_values["overhead"].toolTip()

    teach_from_a_worker(learnt)

    qtbot.waitUntil(lambda: panel.estimate is not None and panel.estimate.allowance.source is AllowanceSource.LEARNED,
                    timeout=WAIT_MS)
    after = panel.estimate
    assert after.overhead_bytes / MIB == pytest.approx(588.24, abs=0.01)
    assert after.total_gpu_bytes - before.total_gpu_bytes == after.overhead_bytes - 450 * MIB
    assert "CUDA runtime: 588 MiB, learnt on NVIDIA H200 (driver 580.159.04) from 1 load" in panel.gpu_label.text()
    assert "588 MiB, learnt on NVIDIA H200" in panel.legend_values["overhead"].toolTip()
    assert panel.legend_values["overhead"].text() == "588 MiB learnt"


def test_a_kept_figure_prices_from_the_start_and_a_chosen_card_gets_the_default(qtbot, tmp_path) -> None:
    AllowanceStore(tmp_path).save([LearnedAllowance(H200.name, H200.driver, (592 * MIB,), 4, "2026-12-02T15:00:00")])
    panel = FitPanel(planner=OLLAMA_PLANNER, learner=RuntimeLearner(AllowanceStore(tmp_path), H200))
    qtbot.addWidget(panel)
    panel.set_gpu(int(H200.memory_total_mib * MIB), 0)
    panel.set_settings(ServerSettings(context_length=4096))
    panel.set_models(["qwen3:14b"])
    panel.set_model_shape("qwen3:14b", QWEN)
    qtbot.waitUntil(lambda: panel.estimate is not None and not panel.estimate.cpu_only, timeout=WAIT_MS)
    assert panel.estimate.allowance.source is AllowanceSource.LEARNED and panel.estimate.overhead_bytes == 592 * MIB
    assert "592 MiB, learnt on NVIDIA H200 (driver 580.159.04) from 4 loads" in panel.gpu_label.text()

    panel.set_gpu(None)  # no GPU readable any more: a card chosen on the right, for another machine
    panel.card_combo.setCurrentIndex(panel.card_combo.findData(24))
    qtbot.waitUntil(lambda: panel.estimate is not None and panel.estimate.allowance.source is AllowanceSource.DEFAULT,
                    timeout=WAIT_MS)
    assert "CUDA runtime: 450 MiB, the default" in panel.gpu_label.text()
