"""Pull progress from status lines: bytes, speed and time left per layer and overall."""

from __future__ import annotations

import pytest

from app.backends.ollama.pull_hints import pull_failure_hint
from app.core.pull_progress import PullTracker, fmt_bytes, fmt_eta
from app.core.units import GB



def test_speed_and_eta_per_layer_and_overall() -> None:
    tracker = PullTracker(started_s=0.0, window_s=10.0)
    tracker.update("pulling manifest", None, None, None, 0.0)
    tracker.update("pulling aaa", "sha256:aaa", 4 * GB, None, 1.0)  # first line of a blob: nothing yet
    snap = tracker.update("pulling aaa", "sha256:aaa", 4 * GB, 1 * GB, 2.0)
    assert snap.completed_bytes == GB and snap.total_bytes == 4 * GB
    assert snap.speed_bps == pytest.approx(1 * GB) and snap.eta_s == pytest.approx(3.0)
    [layer] = snap.layers
    assert layer.speed_bps == pytest.approx(1 * GB) and layer.eta_s == pytest.approx(3.0)
    assert layer.fraction == 0.25 and not layer.done
    snap = tracker.update("pulling bbb", "sha256:bbb", 1000, 1000, 3.0)
    assert [layer.done for layer in snap.layers] == [False, True]
    assert snap.layers[1].eta_s == 0.0 and snap.layers[1].speed_bps is None
    assert snap.elapsed_s == 3.0 and 0 < snap.fraction < 1


def test_speed_follows_the_recent_window_not_the_whole_pull() -> None:
    tracker = PullTracker(started_s=0.0, window_s=2.0)
    for t, done in ((0, 0), (1, 100), (2, 200), (3, 300)):
        tracker.update("pulling a", "a", 10_000, done, float(t))
    # A stall: no bytes between 3 s and 6 s.
    for t in (4.0, 5.0, 6.0):
        snap = tracker.update("pulling a", "a", 10_000, 300, t)
    assert snap.speed_bps == pytest.approx(0.0) and snap.eta_s is None


def test_success_completes_the_bar_and_progress_never_goes_backwards() -> None:
    tracker = PullTracker(started_s=0.0)
    tracker.update("pulling a", "a", 100, 80, 1.0)
    snap = tracker.update("pulling a", "a", 100, 20, 2.0)  # a retried request restarts its count
    assert snap.completed_bytes == 80
    snap = tracker.update("success", None, None, None, 3.0)
    assert snap.succeeded and snap.fraction == 1.0


def test_failure_hints_say_what_to_do() -> None:
    assert "ollama.com/library" in pull_failure_hint("qwen3:14b-fp8", "pull model manifest: file does not exist")
    offline = ('pull model manifest: Get "https://registry.ollama.ai/v2/library/qwen3/manifests/14b": '
               "dial tcp: lookup registry.ollama.ai: no such host")
    assert "could not reach the registry" in pull_failure_hint("qwen3:14b", offline)
    assert "disk" in pull_failure_hint("x", "write /models/blobs: no space left on device")
    assert "server log" in pull_failure_hint("x", "something else")


@pytest.mark.parametrize("n, text", [(None, "—"), (512, "512 B"), (11_338, "11.3 kB"), (9_276_198_565, "9.3 GB")])
def test_bytes_in_decimal_units(n: float | None, text: str) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize("s, text", [(None, "—"), (42.4, "42 s"), (185, "3 min 05 s"), (3720, "1 h 02 min")])
def test_eta_text(s: float | None, text: str) -> None:
    assert fmt_eta(s) == text
