"""DashboardPage offscreen: fed by a real Sampler over the scripted 4090, or by buffers directly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtCore import Qt

from app.adapters.telemetry.host import HostProbe
from app.adapters.telemetry.nvml import REASON_NO_LIBRARY
from app.core.telemetry_buffers import Channel, TelemetryBuffers
from app.adapters.telemetry.sampler import Sampler
from app.core.throughput import TokenMeter
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.pages.dashboard.tiles import NO_DATA, NOT_AVAILABLE
from tests.fakes.scripted_gpu import RTX_4090, GpuReading, ScriptedGpuBackend, gpu_with

SERVING = GpuReading(memory_used_mib=15_155.0, utilization_pct=97.0, power_w=351.0, temperature_c=66.0,
                     server_memory_mib=14_350.0)


def make_page(qtbot, page_context, buffers, gpu_info=RTX_4090, reason="", size=(1600, 1000)) -> DashboardPage:
    page = DashboardPage(page_context(samples=buffers, gpu=gpu_with(gpu_info, reason)))
    qtbot.addWidget(page)
    page.resize(*size)
    page.show()
    qtbot.waitExposed(page)
    return page


@pytest.fixture
def live(qtbot, page_context):
    """A page over a real Sampler (4 Hz) reading the scripted 4090; stopped afterwards."""
    made = []

    def build(gpu: ScriptedGpuBackend, meter: TokenMeter | None = None):
        meter = meter or TokenMeter()
        sampler = Sampler(gpu, HostProbe(), server_pids=lambda: [], token_meter=meter, interval_s=0.25)
        page = make_page(qtbot, page_context, sampler.buffers, gpu.info(), gpu.unavailable_reason)
        made.append(sampler)
        sampler.start()
        return sampler, page

    yield build
    for sampler in made:
        assert sampler.stop()


def curve_y(page: DashboardPage, plot: str, index: int = 0) -> np.ndarray:
    return page.time_plots[plot].series[index].curve.yData


def test_tiles_and_plots_follow_a_real_sampler(qtbot, live):
    sampler, page = live(ScriptedGpuBackend(script=[SERVING]))
    qtbot.waitUntil(lambda: page.tiles["vram"].value != NO_DATA and len(curve_y(page, "vram")) >= 2, timeout=5000)
    assert page.tiles["gpu"].value == "RTX 4090"
    assert page.tiles["gpu"].detail == "driver 570.133.07"
    assert page.tiles["vram"].value == "14.8 / 24.0 GiB"
    assert page.tiles["util"].value == "97 %"
    assert page.tiles["power"].value == "351 W"
    assert page.tiles["temp"].value == "66 °C"
    assert page.tiles["tokens"].value == "0.0 tok/s"
    assert page.tiles["tokens"].detail == "0 requests from this app in flight"
    assert page.tiles["server"].value == NOT_AVAILABLE  # no server process
    assert "GiB" in page.tiles["ram"].value
    # The server share needs server pids: none here, so the VRAM tile says it is not known.
    assert page.tiles["vram"].detail == "server share N/A"
    assert curve_y(page, "vram")[-1] == pytest.approx(15_155.0 / 1024)
    assert curve_y(page, "gpu_util")[-1] == 97.0
    assert page.time_plots["vram"].limits[0][0].value() == pytest.approx(24564.0 / 1024)
    x = page.time_plots["vram"].series[0].curve.xData
    assert x[-1] == 0.0 and np.all(np.diff(x) > 0)  # seconds before the newest sample


def test_tokens_and_requests_in_flight_reach_the_tile(qtbot, live):
    meter = TokenMeter()
    meter.begin()
    meter.begin()
    sampler, page = live(ScriptedGpuBackend(script=[SERVING]), meter)
    qtbot.waitUntil(lambda: page.tiles["tokens"].detail == "2 requests from this app in flight", timeout=5000)
    meter.end()
    qtbot.waitUntil(lambda: page.tiles["tokens"].detail == "1 request from this app in flight", timeout=5000)


def test_gpu_lost_mid_run_shows_na_not_a_crash(qtbot, live):
    gpu = ScriptedGpuBackend(script=[SERVING])
    sampler, page = live(gpu)
    qtbot.waitUntil(lambda: page.tiles["power"].value == "351 W", timeout=5000)
    gpu.go_lost()
    qtbot.waitUntil(lambda: page.tiles["power"].value == NOT_AVAILABLE, timeout=5000)
    for key in ("vram", "util", "power", "temp"):
        assert page.tiles[key].value == NOT_AVAILABLE
    assert page.tiles["vram"].detail == "no reading from the GPU"
    assert math.isnan(curve_y(page, "power_temp")[-1])  # a gap in the plot, history kept
    assert np.isfinite(curve_y(page, "power_temp")).any()
    page.set_gpu_unavailable_reason(gpu.unavailable_reason)
    assert page.gpu_lost_banner.isVisible()
    assert page.gpu_lost_banner.text().startswith("GPU lost: the driver no longer reaches NVIDIA GeForce RTX 4090")
    assert sampler.tick_errors == 0


def test_without_nvml_a_panel_says_why_and_the_rest_works(qtbot, live):
    gpu = ScriptedGpuBackend(available=False, reason=REASON_NO_LIBRARY)
    sampler, page = live(gpu)
    assert page.gpu_off_panel is not None and page.gpu_off_panel.isVisible()
    texts = [w.text() for w in page.gpu_off_panel.findChildren(type(page.gpu_lost_banner))]
    assert "GPU readings are off" in texts
    assert REASON_NO_LIBRARY in texts
    assert set(page.tiles) == {"ram", "server", "tokens"}
    assert set(page.plots) == {"tokens", "host_mem", "server_cpu"}
    qtbot.waitUntil(lambda: page.tiles["ram"].value not in (NO_DATA, NOT_AVAILABLE), timeout=5000)
    qtbot.waitUntil(lambda: len(curve_y(page, "host_mem")) >= 2, timeout=5000)


def filled_buffers(seconds: float = 1000.0, interval_s: float = 1.0) -> TelemetryBuffers:
    buffers = TelemetryBuffers(history_s=900, interval_s=interval_s)
    row = np.full(Channel.COUNT, np.nan)
    row[[Channel.GPU_MEM_USED_MIB, Channel.GPU_MEM_TOTAL_MIB]] = 15_000.0, 24_564.0
    row[[Channel.RAM_USED_MIB, Channel.RAM_TOTAL_MIB]] = 9_000.0, 65_536.0
    row[[Channel.TOKENS_PER_S, Channel.IN_FLIGHT]] = 70.0, 1
    for i in range(int(seconds / interval_s)):
        buffers.append_row(float(i) * interval_s, row)
    return buffers


def test_window_selector_changes_the_x_range(qtbot, page_context):
    page = make_page(qtbot, page_context, filled_buffers())
    page.redraw_now()
    for label, seconds in (("1 min", 60), ("15 min", 900), ("5 min", 300)):
        button = page.window_buttons[seconds]
        assert button.text() == label
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert page.window_s == seconds and button.isChecked()
        for plot in page.time_plots.values():
            (x0, x1), _ = plot.item.getViewBox().viewRange()
            assert x0 == pytest.approx(-seconds, rel=0.03) and x1 == pytest.approx(0.0, abs=seconds * 0.03)
        x = page.time_plots["tokens"].series[0].curve.xData
        assert x[0] >= -seconds - 1.0 and x[-1] == 0.0  # only the window is drawn
    with pytest.raises(ValueError, match="window must be one of"):
        page.set_window_s(42)


def test_redraws_only_when_data_changed_and_page_visible(qtbot, page_context):
    buffers = filled_buffers(10)
    page = make_page(qtbot, page_context, buffers)
    with qtbot.waitSignal(page.redraw_timer.timeout, timeout=2000):
        pass
    drawn = page.redraw_count
    with qtbot.waitSignal(page.redraw_timer.timeout, timeout=2000):
        pass
    assert page.redraw_count == drawn  # nothing new: no redraw
    page.hide()
    t, row = buffers.last()
    buffers.append_row(t + 1.0, row)
    with qtbot.waitSignal(page.redraw_timer.timeout, timeout=2000):
        pass
    assert page.redraw_count == drawn  # hidden: no redraw
    page.show()
    qtbot.waitUntil(lambda: page.redraw_count == drawn + 1, timeout=2000)


def test_nan_readings_draw_as_gaps(qtbot, page_context):
    buffers = filled_buffers(10)
    t, row = buffers.last()
    gap = row.copy()
    gap[Channel.TOKENS_PER_S] = np.nan
    buffers.append_row(t + 1, gap)
    buffers.append_row(t + 2, row)
    page = make_page(qtbot, page_context, buffers)
    page.redraw_now()
    curve = page.time_plots["tokens"].series[0].curve
    assert curve.opts["connect"] == "finite"
    assert np.isnan(curve.yData[-2]) and curve.yData[-1] == 70.0


def test_estimate_line_hook(qtbot, page_context):
    page = make_page(qtbot, page_context, filled_buffers(10))
    line = page.time_plots["vram"].item.items
    page.set_estimate_mib(15_800.0)
    est = page._estimate_line
    assert est in line and est.isVisible()
    assert est.value() == pytest.approx(15_800.0 / 1024)
    assert est.label.toPlainText() == "estimate 15.4 GiB"
    page.set_estimate_mib(None)
    assert not est.isVisible()


def test_empty_buffers_show_waiting_tiles(qtbot, page_context):
    page = make_page(qtbot, page_context, TelemetryBuffers(history_s=60, interval_s=0.5))
    page.redraw_now()
    assert page.tiles["gpu"].value == "RTX 4090"
    assert page.tiles["vram"].value == NO_DATA
    assert page.tiles["tokens"].detail == "waiting for the first sample"


@pytest.mark.parametrize(("width", "rows"), [(1920, 1), (1280, 2)])
def test_tiles_fit_one_row_on_wide_screens_and_two_on_narrow(qtbot, page_context, width, rows):
    page = make_page(qtbot, page_context, filled_buffers(10), size=(width, 1000))
    page.redraw_now()
    qtbot.waitUntil(lambda: len({tile.geometry().top() for tile in page.tiles.values()}) == rows, timeout=2000)
    heights = {tile.height() for tile in page.tiles.values()}
    assert len(heights) == 1  # a shrunk number never makes its tile shorter
