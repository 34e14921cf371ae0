"""Tiles in as many equal columns as the width holds: one row on a wide window, two or more on a
narrow one (a 1280x720 projector at --scale 1.5), never wider than one tile.

A grid that re-flows in its parent's resizeEvent cannot narrow: its minimum width, taken from the
current number of columns, holds the page (inside a scroll area) at that width, so the page never
gets the narrow width that would make it re-flow. This grid's minimum is one column's; it picks its
columns from the width it is given."""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QSize
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QGridLayout, QWidget

from app.ui.widgets.adaptive_splitter import min_width


class TileGrid(QWidget):
    """Equal-width columns of tiles, rows as even as can be (8 tiles: 4+4, 3+3+2, 2+2+2+2 …)."""

    def __init__(self, tiles: Sequence[QWidget], *, max_columns: int | None = None, spacing: int = 12,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tiles = list(tiles)
        self._max_columns = max(1, min(max_columns or len(self.tiles), len(self.tiles)))
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(spacing)
        self.columns = 0
        self._place(self._max_columns)

    def tile_width(self) -> int:
        """The narrowest a tile gets (a tile that cuts its text to its width says so with a minimum width)."""
        return max((min_width(t) for t in self.tiles), default=0)

    def columns_for(self, width: int) -> int:
        """How many columns `width` holds, evened out over the rows they make."""
        room = (width + self._grid.spacing()) // max(1, self.tile_width() + self._grid.spacing())
        fit = max(1, min(self._max_columns, room))
        return math.ceil(len(self.tiles) / math.ceil(len(self.tiles) / fit)) if self.tiles else 1

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """One column wide (the tiles re-flow rather than hold the page wide), as tall as the rows now."""
        return QSize(self.tile_width(), self._grid.minimumSize().height())

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return self._grid.sizeHint()

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._place(self.columns_for(event.size().width()))

    def event(self, event: QEvent) -> bool:
        """A tile whose text grew may need fewer columns at the same width."""
        if event.type() == QEvent.Type.LayoutRequest and self.columns:
            self._place(self.columns_for(self.width()))
        return super().event(event)

    def _place(self, columns: int) -> None:
        if columns == self.columns:
            return
        self.columns = columns
        for tile in self.tiles:
            self._grid.removeWidget(tile)
        for i, tile in enumerate(self.tiles):
            self._grid.addWidget(tile, i // columns, i % columns)
        for col in range(self._max_columns):
            self._grid.setColumnStretch(col, 1 if col < columns else 0)
        self.updateGeometry()


__all__ = ["TileGrid"]
