"""The fit panel on its own: a machine without a GPU priced against its RAM, the host-memory line and
its out-of-memory verdict, and the llama-server command Ollama will run for the form's settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.backends.llama_server.planner import LLAMA_SERVER_PLANNER
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.backends.ollama.planner import OLLAMA_PLANNER
from app.backends.ollama.tuning import OLLAMA_TUNING
from app.core.memory.host import HostMemory
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB
from app.ui.pages.server.fit_panel import NO_GPU_CARD, FitPanel
from app.ui.pages.server.fit_widgets import cell_tooltip

ROOT = Path(__file__).resolve().parents[4]
SMOL = shape_from_show(json.loads((ROOT / "tests/data/show_smollm2_135m.json").read_text()), 98_362_745)
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
WAIT_MS = 5_000


@pytest.fixture
def panel(qtbot):
    p = FitPanel(planner=OLLAMA_PLANNER)
    qtbot.addWidget(p)
    p.set_version("0.32.15")
    return p


def _pick(panel: FitPanel, name: str, shape) -> None:
    panel.set_models([name])
    panel.set_model_shape(name, shape)


def test_no_gpu_prices_the_server_on_the_cpu_against_the_computers_ram(qtbot, panel):
    panel.set_gpu(None)  # no NVIDIA GPU can be read here
    panel.card_combo.setCurrentIndex(panel.card_combo.findData(NO_GPU_CARD))
    panel.set_host(HostMemory(16 * GIB, 32 * GIB))
    panel.set_settings(ServerSettings(num_parallel=2))
    _pick(panel, "smollm2", SMOL)
    qtbot.waitUntil(lambda: panel.estimate is not None and panel.estimate.cpu_only and panel.estimate.n_ctx_total == 8192,
                    timeout=WAIT_MS)
    assert panel.gpu_memory() is None and "runs on the CPU" in panel.gpu_label.text()
    assert panel.verdict_label.text().startswith("Fits —") and "100% CPU" in panel.verdict_label.text()
    assert panel.host_label.text().startswith("Host RAM: 0.3 GiB needed of 16.0 GiB available")
    command = panel.command_label.text()
    assert panel.command_label.isVisibleTo(panel)
    assert "-c 8192 -np 2" in command and "--load-mode none" in command and "-b 1024 -ub 1024" in command
    assert "GiB of RAM" in panel.heat_title.text()


def test_too_little_ram_says_the_computer_runs_out_of_memory(qtbot, panel):
    panel.set_gpu(None)
    panel.card_combo.setCurrentIndex(panel.card_combo.findData(NO_GPU_CARD))
    panel.set_host(HostMemory(200 * MIB, 4 * GIB))
    panel.set_settings(ServerSettings(num_parallel=4))
    _pick(panel, "smollm2", SMOL)
    qtbot.waitUntil(lambda: panel.estimate is not None and panel.estimate.verdict == "wont_load", timeout=WAIT_MS)
    assert panel.host_label.text().endswith("— the computer runs out of memory.")
    assert "The computer runs out of memory" in panel.explanation.text()
    assert panel.verdict_label.text().startswith("Won't load")


def test_on_a_big_gpu_the_command_has_ollamas_automatic_batch_and_the_training_context(qtbot, panel):
    panel.set_gpu(143771 * MIB, 0)
    panel.set_host(HostMemory(100 * GIB, 128 * GIB))
    panel.set_settings(ServerSettings())
    _pick(panel, "qwen3:14b", QWEN)
    qtbot.waitUntil(lambda: panel.estimate is not None and not panel.estimate.cpu_only, timeout=WAIT_MS)
    command = panel.command_label.text()
    assert "-c 40960 -np 1" in command and "-b 2048 -ub 2048" in command
    assert "clamped to the model's 40960" in command
    assert panel.host_label.text().startswith("Host RAM:") and panel.host_label.text().endswith("available.")
    assert panel.estimate.total_gpu_bytes / MIB == pytest.approx(15882, rel=0.01)


def test_an_ollama_before_0_30_gets_no_llama_server_command(qtbot, panel):
    panel.set_version("0.12.6")
    panel.set_gpu(24 * GIB, 0)
    _pick(panel, "qwen3:14b", QWEN)
    qtbot.waitUntil(lambda: panel.estimate is not None, timeout=WAIT_MS)
    assert not panel.command_label.isVisibleTo(panel) and panel.command_label.text() == ""
    assert "not known here" in panel.host_label.text()


def test_a_llama_server_without_a_context_is_priced_with_the_models_own_in_each_slot(qtbot):
    # llama-server without -c gives each slot the model's training context (--fit sizes the cache for it);
    # Ollama's default by VRAM (262144 on this card, clamped to 40960 per slot) is not its rule
    p = FitPanel(mapping=LLAMA_SERVER_TUNING, planner=LLAMA_SERVER_PLANNER)
    qtbot.addWidget(p)
    p.set_version("b6123-abc1234")
    p.set_gpu(143771 * MIB, 0)
    p.set_settings(ServerSettings(num_parallel=2, backend="llama_server"))
    _pick(p, "qwen3", QWEN)
    qtbot.waitUntil(lambda: p.estimate is not None, timeout=WAIT_MS)
    assert p.estimate.n_ctx_total == 81920
    assert p.heatmap._current == (2, 40960)
    assert not p.command_label.isVisibleTo(p) and p.command_label.text() == ""  # its command is the form's


def _panel_for(qtbot, mapping, planner) -> FitPanel:
    p = FitPanel(mapping=mapping, planner=planner)
    qtbot.addWidget(p)
    p.set_version("0.32.15")
    p.set_gpu(24 * GIB, 0)
    p.set_settings(ServerSettings(num_parallel=1, context_length=4096))
    _pick(p, "qwen3", QWEN)
    qtbot.waitUntil(lambda: p.estimate is not None and p.heatmap.cell_at(1, 4096) is not None, timeout=WAIT_MS)
    return p


def test_the_heatmap_stars_the_default_context_of_the_backend_in_use(qtbot):
    ollama = _panel_for(qtbot, OLLAMA_TUNING, OLLAMA_PLANNER)
    assert ollama.heatmap._highlight_context == 32768  # Ollama's tier for a 24 GiB card
    assert "★ Ollama's default context on this card (32k)" in ollama.heat_note.text()

    llama = _panel_for(qtbot, LLAMA_SERVER_TUNING, LLAMA_SERVER_PLANNER)  # no default by VRAM: the model's own
    assert llama.heatmap._highlight_context is None
    assert "★" not in llama.heat_note.text() and "Ollama" not in llama.heat_note.text()


def test_greyed_columns_say_they_are_above_the_models_training_context(qtbot):
    panel = _panel_for(qtbot, LLAMA_SERVER_TUNING, LLAMA_SERVER_PLANNER)
    assert QWEN.context_length == 40960
    cell = panel.heatmap.cell_at(1, 65536)
    assert cell.verdict == "invalid"
    assert "grey: above the model's training context (40,960 tokens)" in panel.heat_note.text()
    assert "above the model's training context" in panel.keys_label.text()
    assert cell_tooltip(cell, "on the GPU") == (
        "1 parallel × 65,536 tokens: not offered — above the model's training context (40,960 tokens).")
    assert "Click" in cell_tooltip(panel.heatmap.cell_at(1, 4096), "on the GPU")


def test_without_a_gpu_the_panel_prices_this_computers_ram_by_default(qtbot):
    p = FitPanel(mapping=OLLAMA_TUNING, planner=OLLAMA_PLANNER)
    qtbot.addWidget(p)
    p.set_gpu(None)  # no NVIDIA GPU can be read here
    p.set_host(HostMemory(16 * GIB, 32 * GIB))
    _pick(p, "smollm2", SMOL)
    qtbot.waitUntil(lambda: p.estimate is not None, timeout=WAIT_MS)
    assert p.card_combo.currentData() == NO_GPU_CARD and p.gpu_memory() is None and p.estimate.cpu_only
    assert p.title.text() == "RAM price of these settings" and p.price_title == "RAM price"
    with qtbot.waitSignal(p.title_changed) as changed:
        p.card_combo.setCurrentIndex(p.card_combo.findData(24))  # planning for a card elsewhere
    assert changed.args == ["VRAM price"] and p.title.text() == "VRAM price of these settings"
    qtbot.waitUntil(lambda: p.estimate is not None and not p.estimate.cpu_only, timeout=WAIT_MS)


def test_without_a_gpu_free_ram_is_unknown_until_this_computers_memory_is_read(qtbot):
    p = FitPanel(mapping=OLLAMA_TUNING, planner=OLLAMA_PLANNER)
    qtbot.addWidget(p)
    p.set_gpu(None)
    _pick(p, "smollm2", SMOL)
    qtbot.waitUntil(lambda: p.estimate is not None, timeout=WAIT_MS)
    assert p.estimate.cpu_only
    assert p.legend_values["free"].text() == p.legend_values["others"].text() == "—"  # not "0.0 GiB"
    assert p.legend_values["weights"].text().endswith("GiB")  # what the load needs is known all the same
    p.set_host(HostMemory(16 * GIB, 32 * GIB))
    qtbot.waitUntil(lambda: p.legend_values["free"].text() != "—", timeout=WAIT_MS)
    assert p.legend_values["others"].text() == "16.0 GiB"  # 32 GiB total, 16 available


def test_the_drivers_reserve_is_its_own_part_of_the_breakdown(qtbot, panel):
    panel.set_gpu(143771 * MIB, 118_593 * MIB, 614 * MIB)  # an H200 with all but a 24 GiB card's worth taken
    panel.set_host(HostMemory(100 * GIB, 128 * GIB))
    panel.set_settings(ServerSettings(num_parallel=4))
    _pick(panel, "qwen3:14b", QWEN)
    qtbot.waitUntil(lambda: panel.estimate is not None and not panel.estimate.cpu_only, timeout=WAIT_MS)
    gpu = panel.gpu_memory()
    assert gpu is not None and gpu.reserved_bytes == 614 * MIB and gpu.free_bytes == 24_564 * MIB
    assert panel.estimate.reserved_bytes == 614 * MIB and panel.estimate.free_bytes == 24_564 * MIB
    assert panel.legend_values["reserved"].text() == "0.6 GiB"
    assert panel.legend_values["others"].text() == "115.8 GiB"
    assert "the driver reserves 0.6 GiB" in panel.gpu_label.text()
