"""An exported chart says what it shows: a title band with the model, the server and the date."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtGui import QImage

from app.core.bench.run import chart_title
from app.ui.pages.bench.results import RunView
from tests.adapters.storage.test_history import make_run
from tests.ui.page_context import run_documents


def test_the_exported_png_carries_a_title_with_the_model_server_and_date(qtbot, tmp_path):
    run = make_run(points=3)
    run = replace(run, fingerprint=replace(run.fingerprint, backend_kind="llama_server", server_version="b6000"))
    assert chart_title(run, run_documents()["server_labels"]) == "qwen3:14b on llama-server b6000 · NVIDIA GeForce RTX 4090 · 2026-08-01 12:00"
    view = RunView(**run_documents())
    qtbot.addWidget(view)
    view.resize(1000, 700)
    view.show()
    view.set_run(run)
    charts = view.charts.grab().toImage()
    assert view.export_to("png", str(tmp_path / "sweep.png"))
    image = QImage(str(tmp_path / "sweep.png"))
    band = image.height() - charts.height()
    assert image.width() == charts.width() and band > 10  # the charts, under a title band
    # the band holds text: more than its background colour
    colours = {image.pixel(x, y) for x in range(0, image.width() // 2, 2) for y in range(0, band, 2)}
    assert len(colours) > 3
