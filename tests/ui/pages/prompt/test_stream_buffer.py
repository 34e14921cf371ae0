"""The console's live figures count from when each request went out, also for the second reply of an A/B."""

from __future__ import annotations

import pytest

from app.core.replies import StreamChunk
from app.ui.pages.prompt.session import StreamBuffer


def line(t: float, sent: float, content: str = "x") -> StreamChunk:
    return StreamChunk(content=content, thinking="", done=False, t_monotonic=t, request_sent_s=sent)


def test_live_ttft_is_from_each_requests_own_send_not_from_the_click() -> None:
    buffer = StreamBuffer(started_s=10.0)  # the click
    buffer.on_chunk(0, line(10.40, sent=10.30))  # first reply: sent 300 ms after the click
    buffer.on_chunk(1, line(14.05, sent=14.00))  # second reply of an A/B: sent once the first ended
    live = buffer.drain().live
    assert live[0].ttft_ms == pytest.approx(100.0)
    assert live[1].ttft_ms == pytest.approx(50.0)
