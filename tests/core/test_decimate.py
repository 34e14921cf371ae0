"""Peak-keeping decimation: every bin's min and max and its gaps survive, whatever the data."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.decimate import bin_starts, envelope_indices

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_envelope(t: np.ndarray, values: np.ndarray, bin_s: float) -> None:
    """The property: kept rows ascend, hold both ends, and per bin the same min, max and gaps as all rows."""
    starts = bin_starts(t, bin_s)
    kept = envelope_indices(values, starts)
    assert len(kept) == values.shape[1]
    edges = np.append(starts, len(t))
    for c, rows in enumerate(kept):
        assert np.all(np.diff(rows) > 0) and rows[0] == 0 and rows[-1] == len(t) - 1
        for lo, hi in zip(edges[:-1], edges[1:]):
            every = values[lo:hi, c]
            chosen = values[rows[(rows >= lo) & (rows < hi)], c]
            if np.isfinite(every).any():
                assert np.nanmax(chosen) == np.nanmax(every) and np.nanmin(chosen) == np.nanmin(every)
            assert np.isnan(chosen).any() == np.isnan(every).any()  # a gap stays a gap


@st.composite
def series(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, float]:
    n = draw(st.integers(1, 400))
    channels = draw(st.integers(1, 4))
    step = draw(st.sampled_from([0.25, 0.5, 1.0]))
    jitter = draw(st.lists(st.floats(0.0, 0.2), min_size=n, max_size=n))
    t = 10_000.0 + np.arange(n) * step + np.array(jitter) * step
    cells = st.one_of(st.just(float("nan")), st.floats(-1e6, 1e6, allow_nan=False))
    values = np.array(draw(st.lists(st.lists(cells, min_size=channels, max_size=channels), min_size=n, max_size=n)))
    bin_s = draw(st.sampled_from([0.3, 1.0, 2.7, 10.0, 100.0]))
    return t, values, bin_s


@FUZZ
@given(series())
def test_envelope_keeps_every_bins_extremes_and_gaps(case: tuple[np.ndarray, np.ndarray, float]) -> None:
    check_envelope(*case)


def test_a_one_sample_spike_in_15_minutes_survives_a_500_pixel_plot() -> None:
    t = 10_000.0 + np.arange(3601) * 0.25
    vram = np.full((3601, 1), 15_000.0)
    vram[1234, 0] = 23_900.0
    rows = envelope_indices(vram, bin_starts(t, 900.0 / 250))  # 250 bins: two pixel columns each
    assert len(rows[0]) < 600 and 1234 in rows[0] and vram[rows[0], 0].max() == 23_900.0


def test_bins_follow_absolute_time_so_a_scrolling_window_keeps_its_picks() -> None:
    t = np.arange(2000) * 0.25
    y = np.sin(t * 1.7)[:, None]
    whole = set(envelope_indices(y, bin_starts(t, 3.0))[0])
    later = envelope_indices(y[400:], bin_starts(t[400:], 3.0))[0] + 400  # the window moved on by 100 s
    inner = [r for r in later if r >= 412 and r < 1999]  # past the first, partial bin, before the newest row
    assert inner and set(inner) <= whole


def test_few_samples_are_kept_whole_and_bad_bins_refused() -> None:
    t = np.arange(10.0)
    values = np.arange(20.0).reshape(10, 2)
    assert [list(r) for r in envelope_indices(values, bin_starts(t, 1.0))] == [list(range(10))] * 2
    assert [len(r) for r in envelope_indices(np.zeros((0, 3)), bin_starts(np.zeros(0), 1.0))] == [0, 0, 0]
    with pytest.raises(ValueError, match="bin_s must be > 0 s"):
        bin_starts(t, 0.0)
