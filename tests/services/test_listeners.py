"""Listeners: every listener hears every value in order, a failing one silences no other, and unsubscribing
(twice too) stops the calls."""

from __future__ import annotations

import logging

import pytest

from app.services.listeners import Listeners


def test_a_failing_listener_silences_no_other_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    heard: list[int] = []
    told: Listeners[int] = Listeners("number")

    def broken(value: int) -> None:
        raise RuntimeError(f"cannot take {value}")

    told.subscribe(broken)
    told.subscribe(heard.append)
    with caplog.at_level(logging.ERROR):
        told.tell([1, 2])
    assert heard == [1, 2]
    assert [r.getMessage() for r in caplog.records] == ["a number listener failed"] * 2


def test_unsubscribing_stops_the_calls_and_can_be_done_twice() -> None:
    heard: list[str] = []
    told: Listeners[str] = Listeners("word")
    stop = told.subscribe(heard.append)
    told.tell(["a"])
    stop()
    stop()
    told.tell(["b"])
    assert heard == ["a"]
