"""The header names the server by its backend's display name."""

from __future__ import annotations

from app.core.models import RunningModel
from app.core.server.state import ServerState, ServerStatus
import pytest

from app.ui.app.header import Header


def test_the_header_names_the_backend_it_was_given(qtbot):
    header = Header("llama-server")
    qtbot.addWidget(header)
    assert header.version_label.text() == "llama-server —"
    header.set_status(ServerStatus(ServerState.RUNNING_MANAGED, version="b6000"))
    assert header.version_label.text() == "llama-server b6000"
    header.set_status(ServerStatus(ServerState.STOPPED))
    assert header.version_label.text() == "llama-server —"


def test_a_one_model_server_is_shown_serving_its_file_not_as_no_model_loaded(qtbot):
    header = Header("llama-server")
    qtbot.addWidget(header)
    header.set_status(ServerStatus(ServerState.RUNNING_MANAGED, version="b6000",
                                   serving="/models/Qwen3-14B-Q4_K_M.gguf"))
    header.set_running_models([])  # before its list of loaded models came
    assert header.models_label.full_text() == "serving Qwen3-14B-Q4_K_M.gguf"
    assert header.models_label.toolTip() == "/models/Qwen3-14B-Q4_K_M.gguf"
    path = "/models/Qwen3-14B-Q4_K_M.gguf"  # listed as loaded, without the sizes it does not report
    header.set_running_models([RunningModel(path, path, None, None, context_length=8192)])
    assert header.models_label.full_text() == "serving Qwen3-14B-Q4_K_M.gguf · ctx 8192"
    header.set_status(ServerStatus(ServerState.STOPPED))
    assert header.models_label.full_text() == "no model loaded"


@pytest.mark.engine
def test_the_supervisor_says_which_file_the_real_engine_serves(qtbot, llama_server_binary, bundled_model, tmp_path):
    import asyncio

    from app.backends.llama_server.engine import embedded_settings
    from app.backends.llama_server.supervisor import make_supervisor

    settings = embedded_settings().replace(num_parallel=1, context_length=512)

    async def start_and_stop():
        sup = make_supervisor(settings, on_status=lambda _s: None, on_log=lambda _l: None, runtime_dir=tmp_path)
        try:
            return await asyncio.wait_for(sup.start(), 300)
        finally:
            await sup.stop()
            await sup.close()

    status = asyncio.run(start_and_stop())
    assert status.state is ServerState.RUNNING_MANAGED and status.serving == str(bundled_model), status
