"""The dashboard's server panel (slots & queue, server-wide tokens/s) fed by samples of the real llama-server."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from app.core.telemetry_buffers import Channel, TelemetryBuffers
from app.backends.ollama.spec import OLLAMA
from app.core.server_telemetry import ServerTelemetryRing
from app.ui.pages.dashboard.page import DashboardPage
from app.ui.pages.dashboard.server_plots import SERVER_WIDE_TITLE
from tests.backends.llama_server.recorded_samples import REPORTING_SPEC, recorded_samples
from tests.fakes.scripted_gpu import RTX_4090, gpu_with

# A server that reports neither slots nor metrics (as Ollama before 0.30, whose runner had no /slots).
NO_SLOTS = replace(OLLAMA, capabilities=replace(OLLAMA.capabilities, reports_slots=False), server_telemetry=None,
                   missing_reasons={"reports_slots": "This server does not report per-slot state."})


def host_row(tokens_per_s: float = 0.0) -> list[float]:
    row = [math.nan] * Channel.COUNT
    row[Channel.RAM_USED_MIB], row[Channel.RAM_TOTAL_MIB] = 6000.0, 16000.0
    row[Channel.TOKENS_PER_S], row[Channel.IN_FLIGHT] = tokens_per_s, 0.0
    return row


def make(qtbot, page_context, spec, ring, gpu_info=None) -> DashboardPage:
    page = DashboardPage(page_context(backend=spec, samples=TelemetryBuffers(interval_s=0.5), server_ring=ring,
                                      gpu=gpu_with(gpu_info, "" if gpu_info else "no NVIDIA driver")))
    qtbot.addWidget(page)
    page.resize(1600, 1000)
    page.show()
    qtbot.waitExposed(page)
    return page


def test_slots_queue_and_kv_fill_are_drawn_from_the_servers_samples(qtbot, page_context) -> None:
    ring = ServerTelemetryRing(interval_s=1.0)
    page = make(qtbot, page_context, REPORTING_SPEC, ring, RTX_4090)
    assert page.server.slots_plot is not None and page.plots["server_slots"].isVisible()
    now = time.monotonic()
    for sample in recorded_samples(start_s=now - 2.0):
        ring.append(sample)
    page._buffers.append_row(now, host_row())
    plot = page.server.slots_plot
    qtbot.waitUntil(lambda: plot.series[0].curve.yData is not None and len(plot.series[0].curve.yData) == 3,
                    timeout=3000)  # the page's own redraw timer picked the samples up
    busy, waiting, kv = (s.curve.yData for s in plot.series)
    assert list(busy) == [0.0, 2.0, 0.0] and list(waiting) == [0.0, 1.0, 0.0]
    assert kv[1] == (42 + 43) / 2048 * 100 and kv[0] == 0.0
    assert plot.limits[0][0].value() == 2.0 and plot.limits[0][0].isVisible()  # slots total
    assert list(plot.series[0].curve.xData) == [-2.0, -1.0, 0.0]
    assert "Server slots &amp; queue" in plot.item.titleLabel.text or "Server slots & queue" in plot.item.titleLabel.text
    assert "KV fill % (right)" in plot.item.titleLabel.text
    assert page.tiles["slots"].value == "0 / 2 busy" and page.tiles["slots"].detail == "0 waiting · KV 0 %"


def test_tokens_become_server_wide_on_a_backend_with_metrics(qtbot, page_context) -> None:
    ring = ServerTelemetryRing(interval_s=1.0)
    page = make(qtbot, page_context, REPORTING_SPEC, ring)
    assert "tokens" not in page.time_plots and page.server.tokens_plot is not None
    assert SERVER_WIDE_TITLE in page.server.tokens_plot.item.titleLabel.text
    now = time.monotonic()
    for sample in recorded_samples(start_s=now - 2.0):
        ring.append(sample)
    page._buffers.append_row(now, host_row(tokens_per_s=5.0))  # this app's own count is not what is shown
    page.redraw_now()
    generation = page.server.tokens_plot.series[0].curve.yData
    # 1 + 2 tokens decoded in the slots, then the rest of the 144 the counter says
    assert np.isnan(generation[0]) and generation[1] == 3.0 and generation[2] == 141.0
    assert page.tiles["tokens"].value == "141 tok/s"
    assert page.tiles["tokens"].detail == "server-wide, from /metrics (all clients)"
    assert page.tiles["tokens"].title_label.text() == "THROUGHPUT · SERVER-WIDE"


def test_a_failing_endpoint_is_said_once_on_the_panel(qtbot, page_context) -> None:
    page = make(qtbot, page_context, REPORTING_SPEC, ServerTelemetryRing())
    page.server.set_notice("server metrics unavailable: /slots at http://127.0.0.1:1: HTTP 501")
    assert page.server.notice.isVisible() and "HTTP 501" in page.server.notice.text()
    page.server.set_notice("")
    assert not page.server.notice.isVisible()


def test_a_backend_without_slots_shows_no_slots_panel_and_keeps_its_own_throughput(qtbot, page_context) -> None:
    page = make(qtbot, page_context, NO_SLOTS, ServerTelemetryRing(), RTX_4090)
    assert page.server.slots_plot is None and "server_slots" not in page.plots and "slots" not in page.tiles
    assert page.server.reason == NO_SLOTS.why_not("reports_slots")
    assert page.tiles["tokens"].toolTip() == NO_SLOTS.why_not("reports_slots")
    assert "Throughput of ollama-deck's requests" in page.time_plots["tokens"].item.titleLabel.text
    page._buffers.append_row(time.monotonic(), host_row(tokens_per_s=12.0))
    page.redraw_now()
    assert page.tiles["tokens"].value == "12 tok/s"
    assert page.tiles["tokens"].detail == "0 requests from this app in flight"


def test_ollama_shows_its_childs_slots_and_keeps_its_own_throughput(qtbot, page_context) -> None:
    ring = ServerTelemetryRing(interval_s=1.0)
    page = make(qtbot, page_context, OLLAMA, ring, RTX_4090)
    assert page.server.slots_plot is not None and "server_slots" in page.plots and "slots" in page.tiles
    assert page.server.tokens_plot is None  # no server-wide counters: the child runs without --metrics
    assert page.server.reason == OLLAMA.why_not("server_metrics")
    assert page.tiles["tokens"].toolTip() == OLLAMA.why_not("server_metrics")
    assert "Throughput of ollama-deck's requests" in page.time_plots["tokens"].item.titleLabel.text
    now = time.monotonic()
    for sample in recorded_samples(start_s=now - 2.0):
        ring.append(sample)
    page._buffers.append_row(now, host_row(tokens_per_s=12.0))
    page.redraw_now()
    assert page.tiles["tokens"].value == "12 tok/s"
    assert page.tiles["slots"].value == "0 / 2 busy"


def test_a_legend_too_long_for_its_plot_wraps_between_entries_instead_of_being_cut(qtbot, page_context) -> None:
    page = make(qtbot, page_context, REPORTING_SPEC, ServerTelemetryRing(interval_s=1.0), RTX_4090)
    plot = page.server.slots_plot
    label = plot.item.titleLabel
    page.resize(2400, 1000)  # wide: title and legend on one line
    qtbot.waitUntil(lambda: not plot.title_wrapped, timeout=3000)
    one_line = label.itemRect().height()
    page.resize(1000, 800)  # a projector's narrow cell: the legend wraps onto more lines
    qtbot.waitUntil(lambda: plot.title_wrapped, timeout=3000)
    assert label.itemRect().width() <= plot.item.geometry().width()  # nothing runs past the plot's edge
    assert label.itemRect().height() > one_line + 10 and label.maximumHeight() >= label.itemRect().height()
    assert "white-space:nowrap'>" in label.text and "KV fill % (right)" in label.text  # no break inside an entry
    page.resize(2400, 1000)
    qtbot.waitUntil(lambda: not plot.title_wrapped, timeout=3000)
    assert label.itemRect().height() == one_line
