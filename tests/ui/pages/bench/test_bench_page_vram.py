"""The Benchmark page driving a real sweep (a real supervisor, the stand-in `ollama` subprocess, a real SQLite
history, widgets offscreen) on an H200 another program fills, read through the scripted NVIDIA GPU: Peak VRAM is the
server's own with the estimate against it in the cell's tooltip, Card VRAM is the whole card's; a prompt the server
answers without its final record at every point is flagged on the recommendation, and each point's failed prompts
are in its Stable? tooltip. Screenshots of both go to $DECK_SHOTS when it is set."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QApplication, QLabel, QToolTip

from app.core.bench.outcome import FailureKind, PointStatus
from app.core.server.state import ServerState
from app.core.telemetry import GpuInfo
from tests.fakes.scripted_gpu import GpuReading, ScriptedGpuBackend
from tests.ui.pages.bench.test_bench_page import WAIT_MS, fill

H200 = GpuInfo("NVIDIA H200", "570.133.20", 143_771.0, index=0, uuid="GPU-h200")
OTHERS_MIB = 118_000.0
# The server's own as each server the sweep starts holds it: the one started to read the model, the first point's,
# the second's (and any after).
SERVER_MIB = (5_380.0, 5_380.0, 9_690.0)
CUT_TEXT = "小明有10个苹果"  # the "apples per day" prompt of the mixed set, the third of four


def busy_h200() -> object:
    """The card as NVML reads it: the other program's memory plus the server's; each point restarts the server,
    so its processes' ids tell which point's it is (its own memory, as NVML's process list says)."""
    servers: dict[tuple[int, ...], float] = {}

    def reading(t: float, pids: Sequence[int]) -> GpuReading:
        server = servers.setdefault(tuple(pids), SERVER_MIB[min(len(servers), 2)]) if pids else SERVER_MIB[0]
        return GpuReading(OTHERS_MIB + server, 90.0, 400.0, 55.0, server)

    return reading


def _shot(widget, name: str) -> None:
    folder = os.environ.get("DECK_SHOTS", "").strip()
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        assert widget.grab().save(str(Path(folder) / name))


def _tooltip_shot(html_text: str, name: str) -> None:
    """A tooltip's text drawn as Qt draws a tooltip (offscreen there is no pointer to hover with)."""
    QToolTip.showText(QPoint(10, 10), html_text)
    shown = next((w for w in QApplication.topLevelWidgets()
                  if isinstance(w, QLabel) and w.isVisible() and w.objectName() == "qtooltip_label"), None)
    if shown is not None:
        shown.adjustSize()
        _shot(shown, name)
    QToolTip.hideText()


def test_the_servers_own_peak_the_cards_and_the_prompt_cut_at_every_point(qtbot, page_factory) -> None:
    gpu = ScriptedGpuBackend(H200, script=busy_h200())
    controller, page, _store = page_factory(gpu=gpu, FAKE_OLLAMA_UNFINISHED_PROMPT=CUT_TEXT,
                                            FAKE_OLLAMA_UNFINISHED_AFTER="3")
    controller.probe()
    qtbot.waitUntil(lambda: controller.status.state is ServerState.STOPPED, timeout=WAIT_MS)
    fill(page, parallel="1, 2", requests=4)
    page.editor.prompts.setCurrentIndex(page.editor.prompts.findData("mixed"))
    with qtbot.waitSignal(page.sweeps.finished, timeout=WAIT_MS) as finished:
        qtbot.mouseClick(page.editor.start_button, Qt.MouseButton.LeftButton)
    run = finished.args[0]
    assert all(r.status is PointStatus.UNSTABLE and r.failure is FailureKind.UNFINISHED for r in run.results)

    table = page.run_view.table
    headers = [table.horizontalHeaderItem(i).text() for i in range(table.columnCount())]
    peak, card = headers.index("Peak VRAM\n(GiB)"), headers.index("Card VRAM\n(GiB)")
    for row, r in enumerate(run.results):  # the server's own under Peak VRAM, the whole card under Card VRAM
        assert r.gpu.server_peak_mib in SERVER_MIB and r.gpu.card_peak_mib == OTHERS_MIB + r.gpu.server_peak_mib
        assert table.item(row, peak).text() == f"{r.gpu.server_peak_mib / 1024:.1f}"
        assert table.item(row, card).text() == f"{r.gpu.card_peak_mib / 1024:.1f}"
    assert "other programs" in table.horizontalHeaderItem(card).toolTip()
    tip = table.item(0, peak).toolTip()
    first = run.results[0]
    assert f"Estimated {first.estimate_peak_mib / 1024:.2f} GiB" in tip
    assert f"the server's own peak {first.gpu.server_peak_mib / 1024:.2f} GiB" in tip
    assert f"The whole card peaked at {first.gpu.card_peak_mib / 1024:.1f} GiB, other programs included." in tip
    stable = table.item(0, table.columnCount() - 1)
    assert stable.text() == "⚠ 1/4 failed"
    failures = stable.toolTip()
    assert "Failed prompts (1)" in failures, failures
    assert "request 2: prompt 3 of 4 “小明有10个苹果" in failures
    assert "the server ended the reply without its final record, after 3 tokens" in failures  # the point's detail
    assert "reply ended without its final record, after 3 tokens · failed at 2 of 2 points" in failures
    assert "at every point" in failures and "connection dropped" not in failures
    flags = page.run_view.card.flags
    assert "1 prompt failed at every point" in flags.text()
    assert "prompt 3 of 4" in flags.toolTip() and "failed at every point that sent it (2 of 2 points" in flags.toolTip()

    page.resize(1500, 1000)
    page.run_view.table.scrollToTop()
    qtbot.waitUntil(lambda: page.run_view.table.isVisible(), timeout=WAIT_MS)
    _shot(page, "bench-page-vram-and-cut-prompt.png")
    _shot(page.run_view.table, "bench-table-vram-columns.png")
    _tooltip_shot(failures, "bench-stable-tooltip-failed-prompts.png")
    _tooltip_shot(tip, "bench-peak-vram-tooltip.png")
