"""Peak-keeping decimation of time series for drawing: the min and the max of every time bin.

A plot a few hundred pixels wide cannot show 3600 samples, but it must still show a one-sample
spike (a VRAM peak is what the graph is for). Keeping, per bin of about one pixel column, the
sample with the lowest and the one with the highest value draws the same envelope as all the
samples would, with a fraction of the points. Bins are aligned to absolute time, not to the
window's edge, so the same samples fall into the same bin while the window scrolls and an old
peak does not flicker from frame to frame.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bin_starts(t: np.ndarray, bin_s: float) -> np.ndarray:
    """Index of the first sample of every bin of `bin_s` seconds (t in seconds, ascending)."""
    if not len(t):
        return np.zeros(0, dtype=np.intp)
    if not bin_s > 0:
        raise ValueError(f"bin_s must be > 0 s, got {bin_s}")
    k = np.floor(t / bin_s)
    changed = np.empty(len(t), dtype=bool)
    changed[0] = True
    np.not_equal(k[1:], k[:-1], out=changed[1:])
    return np.flatnonzero(changed)


def envelope_indices(values: np.ndarray, starts: np.ndarray,
                     columns: Sequence[int] | None = None) -> list[np.ndarray]:
    """For each of `columns` of `values` (n samples x channels, NaN = no reading; all columns by
    default), the sorted row indices to draw: per bin the minimum, the maximum and the first NaN
    (so a gap stays a gap), plus the first and the last row. With about as many bins as samples,
    every row is kept."""
    table = values if values.ndim == 2 else values[:, None]
    n = table.shape[0]
    wanted = range(table.shape[1]) if columns is None else columns
    if n == 0:
        return [np.zeros(0, dtype=np.intp) for _ in wanted]
    if 2 * len(starts) >= n:
        every = np.arange(n)
        return [every for _ in wanted]
    grid = _bin_grid(starts, n)
    # One channel at a time: gathering a column through the bin grid is cheaper than a 3-D gather.
    return [_envelope_of(table[:, c], grid, starts) for c in wanted]


def _envelope_of(y: np.ndarray, grid: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The ascending rows envelope_indices keeps for one channel `y`."""
    n = len(y)
    cube = y[grid]  # bins x longest bin
    missing = np.isnan(cube)
    if missing.any():
        lows = np.where(missing, np.inf, cube).argmin(axis=1)
        highs = np.where(missing, -np.inf, cube).argmax(axis=1)
        # A bin without a NaN repeats its low pick in the NaN's place; the repeat is dropped below.
        gaps = np.where(missing.any(axis=1), missing.argmax(axis=1), lows)
        picks = np.stack((lows, highs, gaps), axis=1)
    else:
        picks = np.stack((cube.argmin(axis=1), cube.argmax(axis=1)), axis=1)
    picks.sort(axis=1)
    # argmin, argmax and the first NaN are first occurrences, so never a padding repeat: start +
    # position is a row of the bin itself, and the rows ascend bin after bin.
    picks += starts[:, None]
    rows = np.concatenate(([0], picks.ravel(), [n - 1]))
    keep = np.empty(len(rows), dtype=bool)
    keep[0] = True
    np.greater(rows[1:], rows[:-1], out=keep[1:])
    return rows[keep]


def _bin_grid(starts: np.ndarray, n: int) -> np.ndarray:
    """Row indices of each bin padded to the longest bin by repeating its last row (bins x width)."""
    lengths = np.diff(np.append(starts, n))
    width = int(lengths.max())
    grid: np.ndarray = starts[:, None] + np.minimum(np.arange(width), (lengths - 1)[:, None])
    return grid


__all__ = ["bin_starts", "envelope_indices"]
