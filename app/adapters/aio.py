"""One asyncio event loop on its own thread; other threads submit coroutines to it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, TypeVar
from collections.abc import Coroutine

T = TypeVar("T")


def refused(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """A cancelled future standing for work that will not run (the coroutine is closed unstarted)."""
    coro.close()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.cancel()
    return future


class LoopThread:
    """Owns an asyncio loop running in a daemon thread. `submit` returns a concurrent Future;
    cancelling that future cancels the coroutine at its next await (a stream stops at once)."""

    def __init__(self, name: str = "deck-asyncio") -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine on the loop thread; once the loop has stopped, it is refused."""
        loop = self._loop
        if loop is None or loop.is_closed() or not self._thread.is_alive():
            return refused(coro)
        try:
            return asyncio.run_coroutine_threadsafe(coro, loop)
        except RuntimeError:  # closed between the check and the call
            return refused(coro)

    def submit_unless(self, closed: bool, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Submit, unless the caller is shut down: a queued signal can still ask for work after that."""
        return refused(coro) if closed else self.submit(coro)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for its result (never call from the GUI thread)."""
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what is pending and stop the loop thread."""
        if self._loop is None or not self._thread.is_alive():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
