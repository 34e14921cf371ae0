"""TokenMeter: aggregate tokens/s over a window and requests in flight, with explicit times."""

import threading

import pytest

from app.core.throughput import TokenMeter


def test_idle_meter_reads_zero():
    meter = TokenMeter()
    assert meter.rate(100.0) == 0.0
    assert meter.in_flight == 0
    assert meter.total_tokens == 0


def test_rate_is_tokens_in_window_over_window():
    meter = TokenMeter()
    for i in range(20):  # 10 tokens every 0.1 s = 100 tok/s
        meter.add(10, 10.0 + i * 0.1)
    # window (9.9, 11.9] holds all 20 adds
    assert meter.rate(11.9, window_s=2.0) == pytest.approx(100.0)
    # window (10.9, 11.9] holds the last 10
    assert meter.rate(11.9, window_s=1.0) == pytest.approx(100.0)


def test_window_excludes_its_start_and_the_future():
    meter = TokenMeter()
    meter.add(5, 1.0)
    meter.add(7, 3.0)
    meter.add(11, 5.0)
    assert meter.rate(3.0, window_s=2.0) == pytest.approx(7 / 2.0)  # 1.0 sits on the open edge
    assert meter.rate(3.5, window_s=2.0) == pytest.approx(7 / 2.0)  # 5.0 is in the future


def test_rate_falls_to_zero_after_stream_stops():
    meter = TokenMeter()
    meter.add(50, 1.0)
    assert meter.rate(2.0) == pytest.approx(25.0)
    assert meter.rate(3.0) == 0.0


def test_aggregate_over_concurrent_streams():
    meter = TokenMeter()
    for i in range(1, 21):
        t = i * 0.1
        meter.add(7, t)  # stream A: 70 tok/s
        meter.add(6, t + 0.01)  # stream B: 60 tok/s
    assert meter.rate(2.05, window_s=1.0) == pytest.approx(130.0)


def test_old_entries_are_pruned_but_totals_kept():
    meter = TokenMeter(keep_s=5.0)
    for i in range(1000):
        meter.add(1, float(i))
    assert meter.total_tokens == 1000
    assert len(meter._events) <= 6
    assert meter.rate(999.0, window_s=5.0) == pytest.approx(5 / 5.0)


def test_late_stamp_is_filed_at_newest_time():
    meter = TokenMeter()
    meter.add(10, 5.0)
    meter.add(10, 4.99)  # another thread took its stamp a hair earlier
    assert meter.rate(5.0, window_s=1.0) == pytest.approx(20.0)


def test_zero_tokens_ignored_and_negative_rejected():
    meter = TokenMeter()
    meter.add(0, 1.0)
    assert meter.total_tokens == 0
    with pytest.raises(ValueError, match="n_tokens"):
        meter.add(-1, 1.0)


def test_window_must_fit_what_is_kept():
    meter = TokenMeter(keep_s=10.0)
    with pytest.raises(ValueError, match="window_s"):
        meter.rate(1.0, window_s=11.0)
    with pytest.raises(ValueError, match="window_s"):
        meter.rate(1.0, window_s=0.0)


def test_in_flight_counts_begin_and_end():
    meter = TokenMeter()
    meter.begin()
    meter.begin()
    assert meter.in_flight == 2
    meter.end()
    assert meter.in_flight == 1
    meter.end()
    with pytest.raises(ValueError, match="more often than begin"):
        meter.end()
    assert meter.in_flight == 0


def test_request_context_ends_even_on_error():
    meter = TokenMeter()
    with pytest.raises(RuntimeError):
        with meter.request():
            assert meter.in_flight == 1
            raise RuntimeError("stream broke")
    assert meter.in_flight == 0


def test_threads_adding_at_once_lose_nothing():
    meter = TokenMeter()
    go = threading.Event()

    def stream(offset: float) -> None:
        go.wait(5)
        with meter.request():
            for i in range(2000):
                meter.add(1, 100.0 + offset + i * 1e-4)

    threads = [threading.Thread(target=stream, args=(k * 1e-5,)) for k in range(4)]
    for th in threads:
        th.start()
    go.set()
    for th in threads:
        th.join(10)
    assert meter.total_tokens == 8000
    assert meter.in_flight == 0
    assert meter.rate(101.0, window_s=2.0) == pytest.approx(8000 / 2.0)
