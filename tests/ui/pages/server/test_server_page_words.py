"""The Server page speaks in the words of the backend it drives: the risky-apply question names that
backend's server, never another's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.client import LlamaServerClient
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING
from app.core.model_shape import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB
from app.ui.app.server_controller import ServerController
from app.ui.pages.server.page import ServerPage

ROOT = Path(__file__).resolve().parents[4]
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
WAIT_MS = 5_000


@pytest.fixture
def llama_page(qtbot):
    settings = ServerSettings(num_parallel=1, context_length=4096)
    with LoopThread() as loop:
        controller = ServerController(loop, None, LlamaServerClient, lambda _s: None)
        page = ServerPage(controller, settings, mapping=LLAMA_SERVER_TUNING)
        qtbot.addWidget(page)
        yield page
        controller.shutdown()


def test_the_spill_question_names_the_backends_own_server(qtbot, llama_page):
    page = llama_page
    page.fit_panel.set_gpu(12 * GIB)
    page.fit_panel.set_models(["qwen3-14b-Q4_K_M.gguf"])
    page.fit_panel.set_model_shape("qwen3-14b-Q4_K_M.gguf", QWEN)
    page.fit_panel.set_settings(ServerSettings(num_parallel=4, context_length=16384))
    qtbot.waitUntil(lambda: page.fit_panel.estimate is not None and page.fit_panel.estimate.verdict == "spills",
                    timeout=WAIT_MS)
    page._confirm_risky(page.form.settings(), page.fit_panel.estimate)
    text = page.confirm_dialog.text()
    est = page.fit_panel.estimate
    assert text.startswith(f"llama-server will put {est.layers_total - est.layers_on_gpu} of {est.layers_total} "
                           "layers of qwen3-14b-Q4_K_M.gguf on the CPU")
    assert "Ollama" not in text and "Ollama" not in page.confirm_dialog.windowTitle()
    page.confirm_dialog.reject()
