"""Callbacks told of a service's news on whichever thread it happens: subscribing returns the way to stop, and one
failing listener neither silences the others nor breaks the thread that told them."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class Listeners(Generic[T]):
    """A thread-safe list of callbacks taking one value each."""

    def __init__(self, what: str) -> None:
        """`what` names the news in the log when a listener fails, e.g. "watch event"."""
        self._what = what
        self._lock = threading.Lock()
        self._listeners: list[Callable[[T], None]] = []

    def subscribe(self, listener: Callable[[T], None]) -> Callable[[], None]:
        """Call `listener` with each value told from now on; returns the unsubscribe function (safe to call twice)."""
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)
        return unsubscribe

    def tell(self, values: Iterable[T]) -> None:
        """Call every listener with each value, in order (the listeners as they were when told)."""
        with self._lock:
            listeners = list(self._listeners)
        for value in values:
            for listener in listeners:
                try:
                    listener(value)
                except Exception:  # noqa: BLE001 - one bad listener must not silence the others
                    log.exception("a %s listener failed", self._what)


__all__ = ["Listeners"]
