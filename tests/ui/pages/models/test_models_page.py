"""The Models page driven like a user would, against the stand-in Ollama on a real socket."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from PySide6.QtCore import Qt

from app.adapters.aio import LoopThread
from app.backends.ollama.client import OllamaClient, load_client
from app.backends.ollama.spec import OLLAMA
from app.backends.ollama.supervisor import ServerSupervisor
from app.core.ports.backend import BackendSpec, Capabilities
from app.core.server.settings import ServerSettings
from app.core.telemetry import GpuInfo
from app.services.runtime_learner import RuntimeLearner
from app.ui.server.controller import ServerController
from app.core.server.url import settings_for_url
from app.ui.pages.models.page import ModelsPage
from tests.fakes.ollama.fake_ollama import FakeOllama
from tests.fakes.scripted_gpu import gpu_with
from tests.ui.page_context import page_context_on
from app.core.units import GIB

WAIT_MS = 10_000
RTX_4090 = GpuInfo("NVIDIA GeForce RTX 4090", "550.54.14", 24564.0)


@dataclass
class Models:
    fake: FakeOllama
    page: ModelsPage
    loop: LoopThread
    controller: ServerController

    def requests(self, path: str) -> list:
        return [r for r in self.fake.requests if r.path == path]


@pytest.fixture
def models(qtbot, make_fake_ollama):
    made = []

    def make(gpu: GpuInfo | None = RTX_4090, settings: ServerSettings | None = None, backend: BackendSpec = OLLAMA,
             learner: RuntimeLearner | None = None, **fake_kwargs) -> Models:
        fake = make_fake_ollama(**fake_kwargs)
        loop = LoopThread(name="test-models-loop")
        controller = ServerController(loop, None, OllamaClient, lambda _s: None)
        controller.attach_supervisor(ServerSupervisor(settings_for_url(settings or ServerSettings(), fake.url),
                                                      on_status=controller.on_status, on_log=controller.on_log))
        page = ModelsPage(page_context_on(loop, backend=backend, server=controller,
                                          gpu=gpu_with(gpu, "" if gpu else "No NVIDIA driver found"),
                                          runtime_allowance=learner))
        qtbot.addWidget(page)
        page.resize(1270, 850)
        page.show()
        made.append((page, controller, loop))
        controller.probe()
        qtbot.waitUntil(lambda: len(page.verdicts) == len(fake.models), timeout=WAIT_MS)
        return Models(fake, page, loop, controller)

    yield make
    for page, controller, loop in made:
        page.shutdown()
        controller.shutdown()
        loop.stop()


# A server that serves what it was started with: it lists and loads models but cannot fetch or make them.
NO_STORE = BackendSpec(
    name="no-store", display_name="A fixed-model server",
    capabilities=Capabilities(lists_loaded=True, load_unload=True, delete=False),
    catalog=OllamaClient, console=OllamaClient, load_client=load_client, server=ServerSupervisor, model_rules=OLLAMA.model_rules, tuning=OLLAMA.tuning,
    reply_words=OLLAMA.reply_words,
    missing_reasons={"pull": "This server serves the model files it was started with; it cannot download models.",
                     "create": "This server cannot make model variants; pass the settings on its command line."})


def test_pull_and_create_are_offered_where_the_backend_can(qtbot, models):
    m = models(backend=OLLAMA)
    assert not m.page.pull_unavailable.isVisible() and not m.page.create_unavailable.isVisible()
    assert m.page.pull_panel.isEnabled() and m.page.pull_panel.pull_button.isEnabled()
    assert m.page.create_panel.isEnabled()
    m.page.table.select_name("qwen3:14b")
    assert m.page.variant_button.isEnabled() and m.page.delete_button.isEnabled()


def test_pull_and_create_are_disabled_with_the_reason_where_the_backend_cannot(qtbot, models):
    m = models(backend=NO_STORE)
    assert m.page.pull_unavailable.isVisible() and m.page.create_unavailable.isVisible()
    assert "cannot download models" in m.page.pull_unavailable.text()
    assert "cannot make model variants" in m.page.create_unavailable.text()
    assert not m.page.pull_panel.pull_button.isEnabled() and not m.page.pull_panel.name_edit.isEnabled()
    assert not m.page.create_panel.create_button.isEnabled()
    m.page.table.select_name("qwen3:14b")
    assert not m.page.variant_button.isEnabled() and "cannot make model variants" in m.page.variant_button.toolTip()
    # Delete is missing too, with the generic reason naming the backend; loading still works.
    assert not m.page.delete_button.isEnabled() and "A fixed-model server" in m.page.delete_button.toolTip()
    assert m.page.preload_button.isEnabled()
    # What can never work is not shown: the forms and buttons are hidden, their reasons stay in view.
    assert not m.page.pull_panel.isVisible() and not m.page.create_panel.isVisible()
    assert not m.page.delete_button.isVisible() and not m.page.variant_button.isVisible()
    assert m.page.preload_button.isVisible()
    assert m.page.not_offered_label.isVisible() and "A fixed-model server" in m.page.not_offered_label.text()


def test_local_models_with_their_details_and_fit_on_a_4090(qtbot, models):
    m = models(settings=ServerSettings(context_length=32768))
    table = m.page.table
    assert table.names == ["qwen3:14b", "qwen3:0.6b", "llama3.2:3b", "gemma3:4b"]
    assert [table.cell_text("qwen3:14b", col) for col in ("Family", "Parameters", "Quantization", "Size")] == [
        "qwen3", "14.8B", "Q4_K_M", "9.3 GB"]
    assert table.cell_text("qwen3:14b", "Modified").endswith("ago")
    assert table.cell_text("qwen3:14b", "Fit") == "● Fits @ 32,768"
    assert "RTX 4090, 24.0 GiB" in m.page.context_label.text() and "context 32,768 × 1 parallel" in \
        m.page.context_label.text()
    table.select_name("qwen3:14b")
    assert m.page.verdict_label.text().count("Fits") >= 1 and "OLLAMA_CONTEXT_LENGTH" in m.page.verdict_label.text()


def test_four_long_slots_do_not_fit_and_a_changed_setting_is_repriced(qtbot, models):
    m = models(settings=ServerSettings(context_length=32768, num_parallel=4))
    fit = m.page.table.cell_text("qwen3:14b", "Fit")
    assert "Spills" in fit or "Won't load" in fit
    m.page.set_gpu(None, "The GPU stopped answering")
    qtbot.waitUntil(lambda: m.page.table.cell_text("qwen3:14b", "Fit").startswith("? Unknown"), timeout=WAIT_MS)
    assert "GPU unknown — no fit verdicts" in m.page.context_label.text()


def test_without_a_gpu_it_says_so_instead_of_a_verdict(qtbot, models):
    m = models(gpu=None)
    assert m.page.table.cell_text("qwen3:14b", "Fit") == "? Unknown @ 4,096"
    assert "No NVIDIA driver found" in m.page.context_label.text()
    m.page.table.select_name("qwen3:14b")
    assert "GPU unknown (No NVIDIA driver found)" in m.page.verdict_label.text()


def test_preload_then_unload_shows_the_loaded_split(qtbot, models):
    m = models(gpu_memory_bytes=8 * GIB)  # the fake places what does not fit on the CPU
    m.page.table.select_name("qwen3:14b")
    assert m.page.preload_button.isEnabled() and not m.page.unload_button.isEnabled()
    qtbot.mouseClick(m.page.preload_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: m.page.table.cell_text("qwen3:14b", "Loaded") != "", timeout=WAIT_MS)
    loaded = m.page.table.cell_text("qwen3:14b", "Loaded")
    assert "GiB VRAM + " in loaded and "GiB CPU" in loaded and "CPU/GPU" in loaded
    assert "ctx 4,096" in loaded and "unloads in 4 min" in loaded
    assert m.page.unload_button.isEnabled()
    qtbot.mouseClick(m.page.unload_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: m.page.table.cell_text("qwen3:14b", "Loaded") == "", timeout=WAIT_MS)
    assert m.requests("/api/generate")[-1].json == {"model": "qwen3:14b", "keep_alive": 0, "stream": False}
    assert m.fake.loaded == {}


def test_pull_shows_progress_per_layer_and_overall_then_lists_the_model(qtbot, models):
    m = models(pull_s=0.8)
    fractions = []
    m.page.session.pull_progress.connect(lambda _name, snap: fractions.append(snap.fraction))
    panel = m.page.pull_panel
    panel.name_edit.setText("qwen3:14b-q8_0")
    with qtbot.waitSignal(m.page.session.pull_finished, timeout=WAIT_MS):
        qtbot.mouseClick(panel.pull_button, Qt.MouseButton.LeftButton)
        assert panel.cancel_button.isEnabled() and not panel.pull_button.isEnabled()
    assert any(0 < f < 1 for f in fractions) and fractions[-1] == 1.0
    assert panel.bar.value() == 1000 and "ready" in panel.status.text()
    assert panel.layers.rowCount() == 5
    assert panel.layers.item(0, 2).text() == "15.7 GB" and panel.layers.item(0, 3).text() == "100"
    qtbot.waitUntil(lambda: "qwen3:14b-q8_0" in m.page.table.names, timeout=WAIT_MS)
    assert m.page.table.cell_text("qwen3:14b-q8_0", "Quantization") == "Q8_0"


def test_a_cancelled_pull_stops_at_once_and_adds_nothing(qtbot, models):
    m = models(pull_s=20.0)
    panel = m.page.pull_panel
    panel.name_edit.setText("qwen3:8b")
    with qtbot.waitSignal(m.page.session.pull_progress, timeout=WAIT_MS):
        qtbot.mouseClick(panel.pull_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
    assert panel.pull_button.isEnabled() and "Cancelled" in panel.status.text()
    record = m.requests("/api/pull")[-1]
    assert record.finished.wait(5) and record.outcome == "client_gone"
    assert m.fake.find_model("qwen3:8b") is None


def test_an_unknown_tag_says_what_to_do(qtbot, models):
    m = models()
    panel = m.page.pull_panel
    panel.name_edit.setText("qwen3:14b-fp8")
    assert panel.advice.severity == "warning" and "Ollama has no FP8" in panel.advice.message
    assert "q8_0 ≈ 15.7 GB" in panel.advice.message  # priced from the local qwen3:14b
    with qtbot.waitSignal(m.page.session.pull_failed, timeout=WAIT_MS):
        qtbot.mouseClick(panel.pull_button, Qt.MouseButton.LeftButton)
    assert "file does not exist" in panel.message.message
    assert "no 'qwen3:14b-fp8' in the registry" in panel.message.message
    assert panel.pull_button.isEnabled()


def test_delete_asks_first(qtbot, models):
    m = models()
    asked = []
    m.page.confirm = lambda title, text: asked.append(text) or False
    m.page.table.select_name("gemma3:4b")
    qtbot.mouseClick(m.page.delete_button, Qt.MouseButton.LeftButton)
    assert "gemma3:4b (3.3 GB)" in asked[0] and m.requests("/api/delete") == []
    m.page.confirm = lambda title, text: True
    qtbot.mouseClick(m.page.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "gemma3:4b" not in m.page.table.names, timeout=WAIT_MS)
    assert m.fake.find_model("gemma3:4b") is None and "Deleted gemma3:4b" in m.page.message.message


def test_create_a_tuned_variant_through_the_form(qtbot, models):
    m = models()
    m.page.table.select_name("qwen3:14b")
    qtbot.mouseClick(m.page.variant_button, Qt.MouseButton.LeftButton)
    form = m.page.create_panel
    assert form.base.currentText() == "qwen3:14b"
    form.name.setText("qwen3-14b-16k")
    form.num_ctx.setValue(16384)
    form.num_batch.setValue(512)
    expected = {"model": "qwen3-14b-16k", "from": "qwen3:14b", "parameters": {"num_ctx": 16384, "num_batch": 512}}
    assert form.preview.text() == f"POST /api/create {json.dumps(expected)}"
    with qtbot.waitSignal(m.page.session.create_finished, timeout=WAIT_MS):
        qtbot.mouseClick(form.create_button, Qt.MouseButton.LeftButton)
    assert "Created qwen3-14b-16k" in form.status.text()
    body = m.requests("/api/create")[-1].json
    assert {k: body[k] for k in expected} == expected and body["stream"] is True
    qtbot.waitUntil(lambda: "qwen3-14b-16k:latest" in m.page.verdicts, timeout=WAIT_MS)
    # The variant is priced at its own num_ctx.
    assert m.page.table.cell_text("qwen3-14b-16k:latest", "Fit").endswith("@ 16,384")


def test_the_form_explains_fp8_and_the_articles_batch_size(qtbot, models):
    m = models()
    form = m.page.create_panel
    form.set_base("qwen3:14b")
    form.num_batch.setValue(8)
    assert form.messages["num_batch"].severity == "warning"
    assert "not concurrency" in form.messages["num_batch"].message and form.create_button.isEnabled()
    form.num_ctx.setValue(131072)
    assert "clamps num_ctx 131072 to 40960" in form.messages["num_ctx"].message
    form.quantize.setCurrentText("fp8")
    assert form.messages["quantize"].severity == "error" and "Ollama has no FP8" in form.messages["quantize"].message
    assert not form.create_button.isEnabled()
    form.quantize.setCurrentText("q8_0")
    assert "only from an F16 or F32 model" in form.messages["quantize"].message


def test_a_refused_create_keeps_ollamas_message(qtbot, models):
    m = models()
    form = m.page.create_panel
    form.base.setCurrentText("qwen3:99b")
    form.name.setText("nope")
    with qtbot.waitSignal(m.page.session.create_failed, timeout=WAIT_MS):
        qtbot.mouseClick(form.create_button, Qt.MouseButton.LeftButton)
    assert "file does not exist" in form.result.message and form.create_button.isEnabled()


def test_a_pull_or_delete_reaches_the_consoles_model_picker_at_once(qtbot, models):
    from app.core.throughput import TokenMeter
    from app.ui.pages.prompt.page import ConsolePage

    m = models(pull_s=0.2)
    console = ConsolePage(page_context_on(m.loop, server=m.controller, meter=TokenMeter()))
    qtbot.addWidget(console)
    console.refresh_models()  # as when the page was first shown
    picker = console.controls.model_combo
    qtbot.waitUntil(lambda: picker.count() == len(m.fake.models), timeout=WAIT_MS)
    names = lambda: [picker.itemData(i) for i in range(picker.count())]  # noqa: E731
    assert "qwen3:14b-q8_0" not in names()
    panel = m.page.pull_panel
    panel.name_edit.setText("qwen3:14b-q8_0")
    qtbot.mouseClick(panel.pull_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "qwen3:14b-q8_0" in names(), timeout=WAIT_MS)  # the console was never shown again
    m.page.confirm = lambda *_a: True
    m.page.table.select_name("gemma3:4b")
    qtbot.mouseClick(m.page.delete_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "gemma3:4b" not in names(), timeout=WAIT_MS)
    console.shutdown()


def test_while_the_server_is_held_by_a_sweep_models_are_not_loaded_unloaded_or_deleted(qtbot, models):
    m = models()
    m.page.table.select_name("qwen3:14b")
    assert m.page.preload_button.isEnabled() and m.page.delete_button.isEnabled()
    m.controller.hold("A benchmark sweep is running.")
    assert not m.page.preload_button.isEnabled() and not m.page.delete_button.isEnabled()
    assert m.page.variant_button.isEnabled()  # creating a variant only writes to the store
    assert m.page.held_label.isVisible() and "A benchmark sweep is running." in m.page.held_label.text()
    m.controller.release()
    assert m.page.preload_button.isEnabled() and not m.page.held_label.isVisible()


def test_the_model_llama_server_serves_shows_as_loaded(qtbot):
    import asyncio
    import concurrent.futures

    from app.backends.llama_server.client import LlamaServerClient
    from app.backends.llama_server.spec import LLAMA_SERVER
    from tests.fakes.llama_server.replay import Replay, recorded, replaying

    served = json.loads(recorded("props.json"))["model_path"]
    with LoopThread(name="test-models-llama") as loop:
        address: concurrent.futures.Future[str] = concurrent.futures.Future()

        async def serve() -> None:
            async with replaying(Replay()) as url:
                address.set_result(url)
                await asyncio.Event().wait()  # until cancelled

        serving = loop.submit(serve())
        url = address.result(timeout=10)
        controller = ServerController(loop, None, LlamaServerClient, lambda _s: None)
        controller.attach_supervisor(ServerSupervisor(settings_for_url(ServerSettings(), url),
                                                      on_status=controller.on_status, on_log=controller.on_log))
        page = ModelsPage(page_context_on(loop, backend=LLAMA_SERVER, server=controller, gpu=gpu_with(RTX_4090)))
        qtbot.addWidget(page)
        try:
            page.refresh()
            qtbot.waitUntil(lambda: served in page.table.names, timeout=WAIT_MS)
            assert page.table.cell_text(served, "Loaded") == "loaded · ctx 1,024"  # its one model, 1024 per slot
        finally:
            page.shutdown()
            controller.shutdown()
            serving.cancel()


def test_the_unset_context_is_named_in_the_backends_words(qtbot, models):
    from app.backends.llama_server.spec import LLAMA_SERVER

    m = models()  # Ollama: its default by VRAM
    assert "context default (Ollama picks by VRAM) × 1 parallel" in m.page.context_label.text()
    m.page.backend = LLAMA_SERVER  # the same page words on llama-server
    m.page._show_context()
    assert "context default (the model's own) × 1 parallel" in m.page.context_label.text()
    assert "Ollama" not in m.page.context_label.text()


def test_a_model_whose_metadata_cannot_be_read_says_why_in_its_row(qtbot, models):
    m = models()
    why = "/models/b.gguf is damaged: its metadata nests arrays more than 8 deep, which no GGUF writer does"
    m.page.session.details_failed.emit("gemma3:4b", why)  # as the session reports a file it cannot read
    qtbot.waitUntil(lambda: m.page.table.cell_text("gemma3:4b", "Fit").startswith("?"), timeout=WAIT_MS)
    m.page.table.select_name("gemma3:4b")
    text = m.page.verdict_label.text()
    assert "Its metadata cannot be read" in text and "nests arrays more than 8 deep" in text
    assert m.page.table.cell_text("qwen3:14b", "Fit").startswith("●")  # the others keep their verdicts


def test_the_verdicts_price_the_runtime_learnt_on_this_gpu_and_say_so(qtbot, models, tmp_path):
    from app.adapters.storage.allowance_store import AllowanceStore
    from app.core.memory.allowance import AllowanceSource
    from app.core.memory.allowance_learning import LearnedAllowance
    from app.core.units import MIB

    store = AllowanceStore(tmp_path)
    store.save([LearnedAllowance(RTX_4090.name, RTX_4090.driver, (430 * MIB,), 2, "2026-12-02T15:00:00+00:00"),
                LearnedAllowance(RTX_4090.name, "535.00", (999 * MIB,), 1, "2026-11-02T15:00:00+00:00")])
    m = models(settings=ServerSettings(context_length=32768), learner=RuntimeLearner(store, RTX_4090))
    qtbot.waitUntil(lambda: m.page.verdicts["qwen3:14b"].estimate is not None, timeout=WAIT_MS)
    estimate = m.page.verdicts["qwen3:14b"].estimate
    assert estimate.allowance.source is AllowanceSource.LEARNED and estimate.overhead_bytes == 430 * MIB
    assert "CUDA runtime: 430 MiB, learnt on NVIDIA GeForce RTX 4090 (driver 550.54.14) from 2 loads" in \
        m.page.context_label.text()
    # a card chosen for another machine (no driver: not this GPU) is priced with the default
    m.page.set_gpu(GpuInfo("a 24 GiB card (chosen on the Server page; no NVIDIA GPU here)", "", 24576.0))
    qtbot.waitUntil(lambda: m.page.verdicts["qwen3:14b"].estimate.overhead_bytes == 450 * MIB, timeout=WAIT_MS)
    assert "450 MiB, the default for a consumer card" in m.page.context_label.text()
