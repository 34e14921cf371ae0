"""The before/after chart: painted offscreen, saved as a PNG, both sides' bars drawn (or only the default's
when nothing was recommended)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QImage

from app.ui.widgets.compare_chart import DEFAULT_COLOR, RECOMMENDED_COLOR, comparison_image, save_comparison_png
from tests.core.bench.test_compare import _rec_of, _result
from app.core.bench.compare import before_after


def _colours(image: QImage) -> set[str]:
    return {QColor(image.pixel(x, y)).name() for x in range(0, image.width(), 3) for y in range(0, image.height(), 3)}


def test_chart_png_shows_both_sides(qapp, tmp_path) -> None:
    c = before_after([_result(0, 4, {"qa": [1.0, 1.2]}, default=True, vram=2048.0, util=40.0),
                      _result(1, 2, {"qa": [0.5, 0.6]}, vram=3072.0, util=80.0)], _rec_of(1), ["qa"])
    assert c is not None
    path = tmp_path / "chart.png"
    save_comparison_png(c, "model on server · 2026-12-02", str(path))
    image = QImage(str(path))
    assert not image.isNull() and (image.width(), image.height()) == (1400, 780)
    seen = _colours(image)
    assert DEFAULT_COLOR.name() in seen and RECOMMENDED_COLOR.name() in seen


def test_chart_without_a_recommendation_draws_only_the_default(qapp) -> None:
    c = before_after([_result(0, 1, {"qa": [1.0]}, default=True)], _rec_of(None), ["qa"])
    assert c is not None
    seen = _colours(comparison_image(c))
    assert DEFAULT_COLOR.name() in seen and RECOMMENDED_COLOR.name() not in seen
