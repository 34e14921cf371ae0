"""PresenterView offscreen, real widgets over a PageContext made as the composition root makes it: the figures follow
the director's requests, the sampler's buffers and the estimate; the caption follows the script's steps; every
size follows the view's own, and nothing is cut at 853×480 (a 1280×720 projector at --scale 1.5)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import QLabel

from app.adapters.telemetry.host import HostProbe
from app.adapters.telemetry.nvml import REASON_NO_LIBRARY
from app.adapters.telemetry.sampler import Sampler
from app.backends.llama_server.spec import LLAMA_SERVER
from app.core.demo.live import LiveRequests
from app.core.demo.script import DemoScript, StepFailure, StepResult, StepState, parse_script
from app.core.models import RunningModel
from app.core.server.settings import ServerSettings
from app.core.server_telemetry import ServerSample, ServerTelemetryRing
from app.core.telemetry_buffers import Channel, TelemetryBuffers
from app.core.throughput import TokenMeter
from app.ui.presenter.figure_tile import NO_DATA
from app.ui.presenter.view import KEY_LEGEND, NO_GPU_MEMORY_TITLE, STATE_COLOURS, PresenterView
from app.ui.server.controller import ServerController
from tests.fakes.scripted_gpu import RTX_4090, GpuReading, ScriptedGpuBackend, gpu_with

WAIT_MS = 5000  # a ceiling for a loaded machine: the view redraws four times a second
PROJECTOR_AT_1_5 = (853, 480)  # a 1280×720 projector at --scale 1.5, in logical pixels

SCRIPT = parse_script("""
title = "One GPU, many users"
[[step]]
title = "One user"
says = "One request streams its reply: watch tokens per second and the time to the first token."
action = "prompt"
[[step]]
title = "Eight users now"
says = "Eight people ask at once. The server batches them: the total climbs, each reply slows a little."
action = "burst"
users = 8
[[step]]
title = "Parallel 1 vs 8"
says = "The same eight users, with the server set to 1 and then 8 parallel requests (a guarded restart each)."
action = "parallel"
[[step]]
title = "Thinking vs not"
says = "The same question with thinking and without: what thinking costs in time and tokens."
action = "ab"
[[step]]
title = "The sweep's verdict"
says = "A short sweep of parallel settings under load, and the setting it recommends."
action = "sweep"
""", "test")

BURST = LiveRequests(in_flight=3, sent=8, finished=5, per_request_tps=31.4, ttft_ms=182.0, aggregate_tps=243.7)


def gpu_row(used_mib: float = 15_155.0, util: float = 97.0) -> np.ndarray:
    row = np.full(Channel.COUNT, math.nan)
    row[Channel.GPU_MEM_USED_MIB] = used_mib
    row[Channel.GPU_MEM_TOTAL_MIB] = RTX_4090.memory_total_mib
    row[Channel.GPU_UTIL_PCT] = util
    row[Channel.RAM_USED_MIB] = 5_400.0
    row[Channel.RAM_TOTAL_MIB] = 15_872.0
    return row


def host_row(used_mib: float = 5_427.0) -> np.ndarray:
    row = np.full(Channel.COUNT, math.nan)
    row[Channel.RAM_USED_MIB] = used_mib
    row[Channel.RAM_TOTAL_MIB] = 15_872.0
    return row


@pytest.fixture
def make_view(qtbot, page_context):
    """Factory: a shown PresenterView of `size` over a context made of `parts`; its timers stopped afterwards."""
    made: list[PresenterView] = []

    def build(size: tuple[int, int] = (1280, 720), **parts) -> PresenterView:
        parts.setdefault("gpu", gpu_with(RTX_4090))
        view = PresenterView(page_context(**parts))
        qtbot.addWidget(view)
        made.append(view)
        view.resize(*size)
        view.show()
        qtbot.waitExposed(view)
        return view

    yield build
    for view in made:
        view.shutdown()


def figure(view: PresenterView, key: str) -> tuple[str, str]:
    tile = view.tiles[key]
    return tile.value, tile.unit


def test_figures_follow_the_live_requests_the_samples_and_the_estimate(qtbot, make_view) -> None:
    samples, ring = TelemetryBuffers(interval_s=0.5), ServerTelemetryRing()
    ring.append(ServerSample(at=10.0, slots_total=8, slots_busy=3, requests_processing=3, requests_deferred=0,
                             kv_cache_fill=0.2, prompt_tokens_per_s=None, generation_tokens_per_s=None,
                             prompt_tokens_total=None, predicted_tokens_total=None))
    view = make_view(samples=samples, server_ring=ring)
    samples.append_row(10.0, gpu_row())
    view.set_live(BURST)
    qtbot.waitUntil(lambda: figure(view, "tokens") == ("244", "tok/s"), timeout=WAIT_MS)
    assert figure(view, "per_request") == ("31", "tok/s")
    assert view.tiles["per_request"].detail == "median of 3 streaming"
    assert figure(view, "ttft") == ("182", "ms")
    assert figure(view, "in_flight") == ("3 / 8", "")
    assert view.tiles["in_flight"].detail == "of 8 slots (server's count)"
    assert figure(view, "memory") == ("14.8", "GiB")
    assert view.tiles["memory"].title == "VRAM"
    assert view.tiles["memory"].detail == "of 24.0 GiB · no estimate"
    assert figure(view, "util") == ("97", "%")
    assert view.tiles["util"].detail == "RTX 4090"

    view.set_estimate_mib(15_900.0)  # the fit panel's price shows at once, as a figure and a level on the graph
    assert view.tiles["memory"].detail == "of 24.0 GiB · estimate 15.5 GiB"
    assert view.tiles["memory"].graph.levels[0][0] == pytest.approx(15_900.0 / 1024)

    view.set_live(LiveRequests(in_flight=12, sent=12, per_request_tps=7.25, ttft_ms=1840.0, aggregate_tps=87.0))
    samples.append_row(10.5, gpu_row(used_mib=16_384.0, util=100.0))
    qtbot.waitUntil(lambda: figure(view, "in_flight") == ("12 / 8", ""), timeout=WAIT_MS)
    assert view.tiles["in_flight"].detail == "4 waiting · of 8 slots (server's count)"
    assert figure(view, "tokens") == ("87", "tok/s")
    assert figure(view, "per_request") == ("7.2", "tok/s")
    assert figure(view, "ttft") == ("1.8", "s")
    assert figure(view, "memory") == ("16.0", "GiB")
    assert figure(view, "util") == ("100", "%")
    # The graphs behind the figures: the samples' last minute (GiB, %), and the live figures as they were shown.
    memory = view.tiles["memory"].graph.traces[0]
    assert memory.y.tolist() == pytest.approx([15_155.0 / 1024, 16.0])
    assert memory.x.tolist() == [-0.5, 0.0]
    assert view.tiles["util"].graph.traces[0].y.tolist() == [97.0, 100.0]
    tokens = view.tiles["tokens"].graph.traces[0].y
    qtbot.waitUntil(lambda: 87.0 in view.tiles["tokens"].graph.traces[0].y.tolist(), timeout=WAIT_MS)
    assert 243.7 in tokens.tolist()


def test_slots_come_from_the_settings_where_the_server_reports_none(qtbot, make_view, page_context) -> None:
    view = make_view(backend=LLAMA_SERVER, server=llama_server_controller(page_context, num_parallel=4))
    view.set_live(BURST)
    qtbot.waitUntil(lambda: figure(view, "in_flight") == ("3 / 4", ""), timeout=WAIT_MS)
    assert view.tiles["in_flight"].detail == "of 4 slots (-np)"


def llama_server_controller(page_context, **settings) -> ServerController:
    loop = page_context().loop
    controller = ServerController(loop, None, LLAMA_SERVER.catalog, lambda _s: None,
                                  last_good=ServerSettings(backend=LLAMA_SERVER.name, **settings))
    return controller


def test_figures_without_data_show_an_em_dash_not_zero(qtbot, make_view) -> None:
    meter = TokenMeter()
    view = make_view(meter=meter, samples=TelemetryBuffers())
    qtbot.waitUntil(lambda: view.redraw_count >= 2, timeout=WAIT_MS)
    for key in ("tokens", "per_request", "ttft", "in_flight", "memory", "util"):
        assert view.tiles[key].value == NO_DATA, key
        assert view.tiles[key].unit == "", key
    # An idle meter's 0.0 is no measurement; once it has seen a request, its rate and its count are the figures
    # (the app's own requests, where no demo step gives its own).
    meter.begin()
    meter.add(40, time.monotonic())
    qtbot.waitUntil(lambda: view.tiles["tokens"].value != NO_DATA, timeout=WAIT_MS)
    assert view.tiles["tokens"].unit == "tok/s"
    assert view.tiles["tokens"].detail == "the app's requests, last 2 s"
    qtbot.waitUntil(lambda: figure(view, "in_flight") == ("1 / 1", ""), timeout=WAIT_MS)
    assert view.tiles["in_flight"].detail == "of 1 slot (OLLAMA_NUM_PARALLEL)"
    meter.end()
    qtbot.waitUntil(lambda: figure(view, "in_flight") == ("0 / 1", ""), timeout=WAIT_MS)


def test_without_a_gpu_the_memory_figure_is_host_ram_and_says_so(qtbot, make_view) -> None:
    samples = TelemetryBuffers()
    view = make_view(samples=samples, gpu=gpu_with(None, REASON_NO_LIBRARY))
    assert view.tiles["memory"].title == NO_GPU_MEMORY_TITLE == "RAM (no GPU)"
    assert view.tiles["util"].value == "no GPU"
    assert view.tiles["util"].detail == "No NVIDIA driver found"
    assert view.tiles["util"].toolTip() == REASON_NO_LIBRARY
    samples.append_row(3.0, host_row(5_427.0))
    view.set_estimate_mib(720.0)
    qtbot.waitUntil(lambda: figure(view, "memory") == ("5.3", "GiB"), timeout=WAIT_MS)
    assert view.tiles["memory"].detail == "of 15.5 GiB · server needs ~0.7 GiB"
    assert view.tiles["memory"].graph.traces[0].y.tolist() == pytest.approx([5_427.0 / 1024])


def test_the_caption_follows_the_script_and_its_steps(qtbot, make_view) -> None:
    view = make_view()
    view.set_script(SCRIPT)
    assert view.step_label.text() == "One GPU, many users · 5 steps"
    assert view.says_label.full_text == "Space starts step 1: One user"
    assert not view.badge.isVisible()

    view.show_step(1, StepState.RUNNING, None)
    assert view.step_label.text() == "Step 2 of 5 · Eight users now"
    assert view.says_label.text() == SCRIPT.step(1).says
    assert view.badge.isVisible() and view.badge.text() == "RUNNING"
    assert STATE_COLOURS[StepState.RUNNING] in view.badge.styleSheet()
    assert view.result_label.full_text == ""

    view.show_step(1, StepState.DONE, StepResult(StepState.DONE, headline="243 tok/s across 8 users"))
    assert view.badge.text() == "DONE" and STATE_COLOURS[StepState.DONE] in view.badge.styleSheet()
    assert view.result_label.text() == view.result_label.full_text == "243 tok/s across 8 users"

    reason = "SmolLM2 cannot think: the A/B needs a model that can"
    view.show_step(3, StepState.FAILED, StepResult(StepState.FAILED, headline="", reason=reason,
                                                   failure=StepFailure.CANNOT_THINK))
    assert view.step_label.text() == "Step 4 of 5 · Thinking vs not"
    assert view.badge.text() == "FAILED" and STATE_COLOURS[StepState.FAILED] in view.badge.styleSheet()
    assert view.result_label.full_text == reason
    assert "ff9b9b" in view.result_label.styleSheet()  # the reason in the failure's colour

    view.show_step(4, StepState.STOPPED, StepResult(StepState.STOPPED, reason="Esc stopped it"))
    assert view.badge.text() == "STOPPED" and STATE_COLOURS[StepState.STOPPED] in view.badge.styleSheet()
    assert view.result_label.full_text == "Esc stopped it"
    # Every state has its own colour besides its word.
    assert len(set(STATE_COLOURS.values())) == len(StepState)

    view.set_notice("Step 5 still running: Esc stops it")
    assert view.notice_label.text() == "Step 5 still running: Esc stops it"
    view.set_notice("")
    assert view.notice_label.text().strip() == ""
    assert view.keys_label.text() == KEY_LEGEND


def test_clear_empties_the_figures_and_their_graphs(qtbot, make_view) -> None:
    samples = TelemetryBuffers()
    meter = TokenMeter()
    view = make_view(samples=samples, meter=meter)
    samples.append_row(1.0, gpu_row())
    meter.add(100, time.monotonic())
    view.set_live(BURST)
    qtbot.waitUntil(lambda: figure(view, "tokens")[0] == "244" and figure(view, "memory")[0] == "14.8",
                    timeout=WAIT_MS)
    qtbot.waitUntil(lambda: np.isfinite(view.tiles["tokens"].graph.traces[0].y).any(), timeout=WAIT_MS)

    view.clear()
    for key in ("tokens", "per_request", "ttft", "in_flight", "memory", "util"):
        assert view.tiles[key].value == NO_DATA, key
        assert not any(np.isfinite(t.y).any() for t in view.tiles[key].graph.traces), key
    cleared = view.redraw_count
    qtbot.waitUntil(lambda: view.redraw_count > cleared, timeout=WAIT_MS)  # a redraw after the clear
    assert view.tiles["tokens"].value == NO_DATA  # the meter's earlier tokens are forgotten too
    samples.append_row(2.0, gpu_row(used_mib=12_288.0))  # a new reading shows again, alone on its graph
    qtbot.waitUntil(lambda: figure(view, "memory")[0] == "12.0", timeout=WAIT_MS)
    assert view.tiles["memory"].graph.traces[0].y.tolist() == [12.0]
    # A reset that also empties the shared buffers (the dashboard's) leaves the figure empty until the next sample.
    samples.clear()
    qtbot.waitUntil(lambda: figure(view, "memory")[0] == NO_DATA, timeout=WAIT_MS)
    samples.append_row(3.0, gpu_row(used_mib=13_312.0))
    qtbot.waitUntil(lambda: figure(view, "memory")[0] == "13.0", timeout=WAIT_MS)


def test_settings_line_follows_the_settings_applied_and_the_model(qtbot, make_view, page_context) -> None:
    server = llama_server_controller(page_context, num_parallel=1)
    view = make_view(backend=LLAMA_SERVER, server=server)
    assert view.settings_label.full_text.startswith("no model · parallel 1 (-np) · context default (-c)")
    applied = ServerSettings(backend=LLAMA_SERVER.name, num_parallel=8, context_length=4096, kv_cache_type="q8_0",
                             flash_attention="on").with_options(model_path="/models/SmolLM2-360M-Instruct-Q8_0.gguf")
    server.last_good = applied
    server.settings_applied.emit(applied)
    assert view.settings_label.full_text == ("SmolLM2-360M-Instruct-Q8_0 · parallel 8 (-np) · context 4096 (-c) · "
                                  "KV cache q8_0 (-ctk/-ctv) · flash attention on (-fa)")
    assert view.settings_label.text() == view.settings_label.full_text
    server.running_models_changed.emit([RunningModel("qwen3:14b", "qwen3:14b", None, None)])
    assert view.settings_label.full_text.startswith("qwen3:14b · parallel 8 (-np)")
    server.shutdown()


def test_live_figures_redraw_at_the_views_rate_not_per_update(qtbot, make_view) -> None:
    view = make_view()
    before = view.redraw_count
    for i in range(50):
        view.set_live(LiveRequests(in_flight=1, sent=1, per_request_tps=float(i)))
    assert view.redraw_count == before  # nothing drawn per update: the timer draws the newest
    qtbot.waitUntil(lambda: view.tiles["per_request"].value == "49", timeout=WAIT_MS)
    assert view.timer.isActive() and view.timer.interval() <= 500
    view.shutdown()
    assert not view.timer.isActive()


def test_fonts_grow_with_the_view(qtbot, make_view) -> None:
    small, large = (make_view(size) for size in (PROJECTOR_AT_1_5, (1920, 1080)))
    for view in (small, large):
        view.set_script(SCRIPT)
        view.show_step(1, StepState.RUNNING, None)
        view.set_live(BURST)
    qtbot.waitUntil(lambda: all(v.tiles["tokens"].value == "244" for v in (small, large)), timeout=WAIT_MS)
    for key in small.tiles:
        assert large.tiles[key].value_px > small.tiles[key].value_px, key
        assert large.tiles[key].title_label.px > small.tiles[key].title_label.px, key
    for name in ("step_label", "says_label", "settings_label", "keys_label"):
        assert getattr(large, name).px > getattr(small, name).px, name
    assert small.tiles["tokens"].value_px >= 40  # a figure a room reads: ~60 px on the projector at 1.5


def assert_nothing_cut(view: PresenterView) -> None:
    """Every label's text fits its box, every box lies inside its parent, and no two parts of the view overlap."""
    for label in (w for w in view.findChildren(QLabel) if w.isVisible()):
        name = f"{label.parent().objectName()}:{label.text()!r}"
        box = label.geometry()
        assert label.parentWidget().rect().contains(box), name
        if label.wordWrap():
            assert label.heightForWidth(box.width()) <= box.height(), name
        else:
            hint = label.sizeHint()
            assert hint.width() <= box.width() and hint.height() <= box.height(), (name, hint, box)
    tiles = [t.geometry() for t in view.tiles.values()]
    assert all(view.rect().contains(t) for t in tiles)
    assert not any(a.intersects(b) for i, a in enumerate(tiles) for b in tiles[i + 1:])
    bands: list[tuple[str, QRect]] = [(n, getattr(view, n).geometry()) for n in
                                      ("step_label", "says_label", "result_label")]
    top_of_tiles = min(t.top() for t in tiles)
    bottom_of_tiles = max(t.bottom() for t in tiles)
    for name, box in bands:
        assert box.bottom() < top_of_tiles, name
    for name in ("settings_label", "notice_label", "keys_label"):
        assert getattr(view, name).geometry().top() > bottom_of_tiles, name
    assert view.settings_label.geometry().bottom() < view.keys_label.geometry().top()
    assert not view.notice_label.geometry().intersects(view.keys_label.geometry())


@pytest.mark.parametrize("with_gpu", [True, False], ids=["gpu", "no-gpu"])
@pytest.mark.parametrize("size", [PROJECTOR_AT_1_5, (1280, 720), (1920, 1080)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_nothing_is_cut_or_overlaps(qtbot, make_view, with_gpu, size) -> None:
    samples = TelemetryBuffers()
    view = make_view(size, samples=samples, gpu=gpu_with(RTX_4090 if with_gpu else None, REASON_NO_LIBRARY))
    view.set_script(SCRIPT)
    view.set_estimate_mib(15_900.0)
    # Wide figures: four-digit rates, a queue over the slots, a step with the script's longest words.
    samples.append_row(1.0, gpu_row(used_mib=24_100.0, util=100.0) if with_gpu else host_row(15_001.0))
    view.set_live(LiveRequests(in_flight=64, sent=64, per_request_tps=12.3, ttft_ms=8_765.0, aggregate_tps=1_234.5))
    view.show_step(2, StepState.RUNNING, None)
    view.set_notice("Step 3 still running: Esc stops it")
    qtbot.waitUntil(lambda: view.tiles["tokens"].value == "1,234", timeout=WAIT_MS)
    assert_nothing_cut(view)
    view.show_step(3, StepState.FAILED, StepResult(
        StepState.FAILED, reason="SmolLM2-360M-Instruct cannot think: the A/B needs a model with the thinking "
                                 "capability, e.g. Qwen3; the script goes on with the next step"))
    assert_nothing_cut(view)
    assert view.result_label.toolTip() == view.result_label.full_text or view.result_label.text() == view.result_label.full_text


def test_a_long_step_text_shrinks_to_fit_the_band(qtbot, make_view) -> None:
    long_says = ("The same eight users, with the server set to one and then eight parallel requests, each a guarded "
                 "restart that puts the old settings back when the new ones fail; watch the total and each reply.")
    script = DemoScript("Long", (SCRIPT.step(0).__class__(title="Long words", says=long_says[:240],
                                                          action=SCRIPT.step(0).action),))
    view = make_view(PROJECTOR_AT_1_5)
    view.set_script(script)
    view.show_step(0, StepState.WAITING, None)
    assert view.says_label.text() == long_says[:240]
    short = make_view(PROJECTOR_AT_1_5)
    short.set_script(SCRIPT)
    short.show_step(0, StepState.WAITING, None)
    assert view.says_label.px < short.says_label.px
    assert_nothing_cut(view)


def test_a_real_sampler_over_the_scripted_4090_feeds_the_memory_and_utilisation(qtbot, make_view) -> None:
    serving = GpuReading(memory_used_mib=15_155.0, utilization_pct=97.0, power_w=351.0, temperature_c=66.0,
                         server_memory_mib=14_350.0)
    meter = TokenMeter()
    sampler = Sampler(ScriptedGpuBackend(script=[serving]), HostProbe(), server_pids=lambda: [], token_meter=meter,
                      interval_s=0.25)
    view = make_view(samples=sampler.buffers, meter=meter)
    sampler.start()
    try:
        qtbot.waitUntil(lambda: figure(view, "memory") == ("14.8", "GiB") and figure(view, "util") == ("97", "%")
                        and len(view.tiles["util"].graph.traces[0].y) >= 2, timeout=WAIT_MS)
        assert view.tiles["tokens"].value == NO_DATA  # the meter counted nothing: no figure, not 0
        with meter.request():
            meter.add(64, time.monotonic())
            qtbot.waitUntil(lambda: view.tiles["tokens"].value != NO_DATA, timeout=WAIT_MS)
        assert view.tiles["tokens"].unit == "tok/s"
    finally:
        assert sampler.stop()
