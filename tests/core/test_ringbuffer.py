"""TimeSeriesRing: ordered views, wrap-around, NaN gaps, version counting, one writer + one reader."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.ringbuffer import TimeSeriesRing


def test_rejects_degenerate_shapes():
    with pytest.raises(ValueError):
        TimeSeriesRing(1, 2)
    with pytest.raises(ValueError):
        TimeSeriesRing(4, 0)


def test_empty_ring():
    ring = TimeSeriesRing(4, 2)
    t, v = ring.view()
    assert len(ring) == 0 and t.shape == (0,) and v.shape == (0, 2)
    assert ring.last() is None
    assert ring.version == 0


def test_partial_fill_keeps_order():
    ring = TimeSeriesRing(5, 2)
    for i in range(3):
        ring.append(float(i), [i, 10 * i])
    t, v = ring.view()
    assert t.tolist() == [0.0, 1.0, 2.0]
    assert v[:, 1].tolist() == [0.0, 10.0, 20.0]


def test_wraps_and_keeps_newest_in_time_order():
    ring = TimeSeriesRing(4, 1)
    for i in range(10):
        ring.append(float(i), [i])
    t, v = ring.view()
    assert len(ring) == 4
    assert t.tolist() == [6.0, 7.0, 8.0, 9.0]
    assert v[:, 0].tolist() == [6.0, 7.0, 8.0, 9.0]
    last_t, last_v = ring.last()
    assert last_t == 9.0 and last_v.tolist() == [9.0]


def test_since_filters_by_time():
    ring = TimeSeriesRing(8, 1)
    for i in range(12):
        ring.append(i * 0.5, [i])
    t, _ = ring.view(since=4.0)
    assert t.tolist() == [4.0, 4.5, 5.0, 5.5]
    t, _ = ring.view(since=100.0)
    assert t.shape == (0,)


def test_nan_marks_a_gap_and_views_are_copies():
    ring = TimeSeriesRing(4, 2)
    ring.append(0.0, [1.0, np.nan])
    t, v = ring.view()
    assert np.isnan(v[0, 1])
    v[0, 0] = 99.0
    assert ring.view()[1][0, 0] == 1.0


def test_version_counts_appends():
    ring = TimeSeriesRing(3, 1)
    for i in range(5):
        ring.append(float(i), [i])
    assert ring.version == 5


def test_reader_always_sees_a_consistent_ordered_window():
    ring = TimeSeriesRing(64, 2)
    done = threading.Event()
    problems: list[str] = []

    def write() -> None:
        for i in range(20_000):
            ring.append(float(i), [i, -i])
        done.set()

    def read() -> None:
        while not done.is_set():
            t, v = ring.view()
            if len(t) and (np.any(np.diff(t) != 1.0) or np.any(v[:, 0] != t) or np.any(v[:, 1] != -t)):
                problems.append(f"torn view ending at {t[-1]}")
                return

    writer, reader = threading.Thread(target=write), threading.Thread(target=read)
    reader.start()
    writer.start()
    writer.join(30)
    reader.join(30)
    assert not problems
    assert ring.view()[0][-1] == 19_999.0


def check_view_matches_history(capacity: int, appended: int, since: float | None) -> None:
    """The property: view(since) is the newest `capacity` rows, in order, from the first with t >= since."""
    ring = TimeSeriesRing(capacity, 2)
    for i in range(appended):
        ring.append(i * 0.5, [i, -i])
    history = np.arange(max(0, appended - capacity), appended)
    if since is not None:
        history = history[history * 0.5 >= since]
    t, v = ring.view(since)
    assert t.tolist() == (history * 0.5).tolist()
    assert v.shape == (len(history), 2) and v[:, 0].tolist() == history.tolist() and v[:, 1].tolist() == (-history).tolist()


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 12), st.integers(0, 40), st.one_of(st.none(), st.floats(-2.0, 25.0, allow_nan=False)))
def test_views_since_any_time_across_the_wrap(capacity: int, appended: int, since: float | None) -> None:
    check_view_matches_history(capacity, appended, since)


def test_clear_empties_the_ring_and_moves_its_version() -> None:
    ring = TimeSeriesRing(4, 2)
    for i in range(6):  # wrapped
        ring.append(float(i), [i, -i])
    before = ring.version
    ring.clear()
    assert len(ring) == 0 and ring.last() is None
    t, v = ring.view()
    assert t.size == 0 and v.shape == (0, 2)
    assert ring.version > before  # a reader redraws the empty buffer
    ring.append(10.0, [1, 2])
    t, v = ring.view()
    assert list(t) == [10.0] and list(v[0]) == [1, 2]
