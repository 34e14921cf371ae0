"""The one-line status label gives way to its neighbours: cut in the middle, whole in its tooltip."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget

from app.ui.widgets.elided_label import ElidedLabel

LONG = "Saved 8 replies to " + "a-very-long-file-name-" * 8 + "end.csv"


def test_a_long_text_is_cut_in_the_middle_and_the_button_beside_it_keeps_its_size(qtbot) -> None:
    row = QWidget()
    layout = QHBoxLayout(row)
    label = ElidedLabel()
    button = QPushButton("Send burst")
    layout.addWidget(label, 1)
    layout.addWidget(button)
    qtbot.addWidget(row)
    row.resize(400, 40)
    row.show()
    label.setText(LONG)
    label.setToolTip("/tmp/out/end.csv")
    qtbot.waitUntil(lambda: label.is_elided())
    assert button.width() >= button.sizeHint().width()
    shown = label.text()
    assert "…" in shown and shown.startswith("Saved") and shown.endswith("end.csv")
    assert label.full_text() == LONG and label.toolTip() == f"{LONG}\n/tmp/out/end.csv"
    label.setText("Saved 2 turns")  # short enough: shown whole, the tooltip only the path
    assert label.text() == "Saved 2 turns" and not label.is_elided() and label.toolTip() == "/tmp/out/end.csv"
    label.clear()
    assert label.text() == "" and label.toolTip() == ""


def test_a_label_with_room_for_a_few_letters_shows_only_the_ellipsis(qtbot) -> None:
    label = ElidedLabel(min_width_px=10)
    qtbot.addWidget(label)
    label.show()
    label.setText(LONG)
    label.resize(label.fontMetrics().horizontalAdvance("Sa…v") + 2, 20)
    qtbot.waitUntil(lambda: label.text() == "…")  # not "Sa…v": a clue to nothing
    assert LONG in label.toolTip()
    label.resize(label.fontMetrics().horizontalAdvance("Saved 8…nd.csv") + 8, 20)
    qtbot.waitUntil(lambda: label.text().startswith("Saved") and label.text().endswith(".csv"))
