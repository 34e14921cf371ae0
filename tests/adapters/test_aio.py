"""The asyncio loop thread: work submitted after it stopped is refused, never left unawaited."""

import asyncio
import warnings

from app.adapters.aio import LoopThread


async def _answer() -> int:
    await asyncio.sleep(0)
    return 42


def test_submit_runs_on_the_loop_and_refuses_after_stop():
    loop = LoopThread(name="test-aio")
    assert loop.run(_answer(), timeout=5) == 42
    loop.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a "coroutine was never awaited" warning would fail here
        late = loop.submit(_answer())
    assert late.cancelled()


def test_submit_unless_closed_refuses_without_touching_the_loop():
    with LoopThread(name="test-aio-2") as loop:
        assert loop.submit_unless(True, _answer()).cancelled()
        assert loop.submit_unless(False, _answer()).result(5) == 42
