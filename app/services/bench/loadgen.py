"""The load generator: runs a LoadPlan against a server and records every request.

Runs on the app's asyncio loop (or any loop). A warm-up stage (never counted) comes first, then
the measured stage: closed loop (N clients, each sending its next request when its last ended)
or open loop (Poisson arrivals; latency counted from each arrival, so requests held back by the
in-flight cap or a slow server are not hidden). Stop rule: a number of requests, or no new
requests after a duration (those in flight finish and count). Cancelling the task stops every
stream at once. Tokens are also reported to a TokenMeter, so the dashboard graphs the benchmark.

Requests go through the backend's ChatRequestStreaming client (Ollama's runs over the shared
streaming transport): each line reaches `_Reply.on_chunk` as it is parsed, stamped with the time
it arrived, and each request carries the time it went out, so TTFT and inter-token gaps are the
server's, not the client's scheduling. In a closed loop a request's clock starts when it is
written; in an open loop at its scheduled arrival (queueing on the client counts there).
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from dataclasses import dataclass
from collections.abc import Callable, Coroutine
from typing import Any

from app.core.bench.outcome import is_truncated, too_long_words, truncated_words
from app.core.bench.stats import RequestRecord
from app.core.errors import (BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, ServerUnreachable,
                             ServerTimeout, OutOfMemory, QueueFull, ServerFault, StreamDropped, StreamError)
from app.core.bench.workload import LoadPlan
from app.core.ports.inference import PromptTokenCounter, StreamingClientFactory
from app.services.bench.prompt_lengths import expected_prompt_tokens
from app.core.replies import FinalFigures, StreamChunk
from app.core.throughput import TokenMeter

WARMUP_INDEX_BASE = 1_000_000  # warm-up requests use other seeds than measured ones
RequestCallback = Callable[[RequestRecord], None]


def error_kind_of(exc: BaseException) -> str:
    """The short error class recorded per request (oom, queue_full, timeout, …)."""
    for kind, types in (("too_long", ContextExceeded), ("oom", OutOfMemory), ("queue_full", QueueFull),
                        ("timeout", (ServerTimeout, asyncio.TimeoutError, TimeoutError)),
                        ("connect", ServerUnreachable), ("dropped", StreamDropped), ("not_found", ModelNotFound),
                        ("bad_request", BadRequest), ("malformed", MalformedResponse),
                        ("server", (ServerFault, StreamError))):
        if isinstance(exc, types):
            return kind
    return "other"


def _error_text(exc: BaseException) -> str:
    if isinstance(exc, ContextExceeded):
        return too_long_words(exc.prompt_tokens, exc.context_tokens)
    message = getattr(exc, "message", "") or str(exc) or type(exc).__name__
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not isinstance(exc, ServerTimeout):
        return "the request took longer than its time limit"
    return message


@dataclass(frozen=True)
class LoadResult:
    """What a workload produced: counted and warm-up records (times relative to their stage's start)."""

    records: tuple[RequestRecord, ...]
    warmup: tuple[RequestRecord, ...]
    started_monotonic: float  # clock value at the measured stage's start
    measured_s: float  # from that start to the last request's end
    stop_rule: str  # "requests" or "duration"


class _Reply:
    """Per-request stream state, updated for every line as it arrives."""

    __slots__ = ("meter", "sent", "first", "first_answer", "last", "times", "final")

    def __init__(self, meter: TokenMeter | None) -> None:
        self.meter = meter
        self.sent: float | None = None
        self.first: float | None = None
        self.first_answer: float | None = None
        self.last: float | None = None
        self.times: list[float] = []
        self.final: FinalFigures | None = None

    def on_chunk(self, chunk: StreamChunk) -> None:
        """One parsed line (in-band errors were raised before it got here)."""
        t = chunk.t_monotonic
        if self.sent is None:
            self.sent = chunk.request_sent_s
        self.last = t
        if chunk.done:
            self.final = chunk.final
            return
        if chunk.content or chunk.thinking:
            self.times.append(t)
            if self.first is None:
                self.first = t
            if chunk.content and self.first_answer is None:
                self.first_answer = t
            if self.meter is not None:
                self.meter.add(1, t)


class LoadGenerator:
    """Sends LoadPlans to one server; keeps its connections between plans until aclose()."""

    def __init__(self, base_url: str, client_factory: StreamingClientFactory, *, meter: TokenMeter | None = None,
                 clock: Callable[[], float] = time.monotonic, connect_timeout_s: float = 3.0,
                 read_timeout_s: float = 300.0, counter: PromptTokenCounter | None = None) -> None:
        """`client_factory` is the backend's; an unusable URL fails here, not as N failed requests. `counter`
        (the backend's, where it has one) says how many prompt tokens each prompt should count, so a
        request whose prompt the server cut is recorded as truncated."""
        self.base_url = base_url.rstrip("/")
        self._meter = meter
        self._clock = clock
        self._counter = counter
        self._expected: tuple[int | None, ...] = ()
        self._client = client_factory(self.base_url, connect_timeout_s=connect_timeout_s,
                                      read_timeout_s=read_timeout_s, clock=clock)

    async def aclose(self) -> None:
        """Close pooled connections."""
        await self._client.aclose()

    async def __aenter__(self) -> LoadGenerator:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def run(self, plan: LoadPlan, on_request: RequestCallback | None = None,
                  on_stage: Callable[[str], None] | None = None) -> LoadResult:
        """Warm up, then measure; on_request sees every finished request (warm-up ones flagged)."""
        problems = plan.problems()
        if problems:
            raise ValueError(" ".join(problems))
        notify = on_request or (lambda _r: None)
        self._expected = await expected_prompt_tokens(self._counter, plan)
        warmup: list[RequestRecord] = []
        if plan.warmup_count:
            if on_stage:
                on_stage("warm-up")
            start = self._clock()
            clients = min(max(plan.concurrency, 1), plan.warmup_count)
            await self._closed(plan, start, clients, plan.warmup_count, None, warmup, notify, warm=True)
        if on_stage:
            on_stage("measuring")
        records: list[RequestRecord] = []
        # The cyclic collector stops the whole process for milliseconds (tens with a GUI's heap), which
        # would show up as late tokens. As timeit does, collect now and hold it off while measuring;
        # plain reference counting still frees almost everything, and the rest goes right after.
        # Where automatic collection is already off, its owner (the GUI, which must collect on its own
        # thread so that Qt objects are not destroyed here) keeps it: this thread never collects then.
        collecting = gc.isenabled()
        if collecting:
            gc.collect()
            gc.disable()
        try:
            start = self._clock()
            if plan.mode == "closed":
                await self._closed(plan, start, plan.concurrency, plan.requests, plan.duration_s, records, notify)
            else:
                await self._open(plan, start, records, notify)
        finally:
            if collecting:
                gc.enable()
        records.sort(key=lambda r: r.index)
        measured = max((r.end_s for r in records), default=0.0)
        return LoadResult(tuple(records), tuple(warmup), start, measured,
                          "requests" if plan.requests is not None else "duration")

    async def _closed(self, plan: LoadPlan, start: float, clients: int, count: int | None, duration_s: float | None,
                      out: list[RequestRecord], notify: RequestCallback, warm: bool = False) -> None:
        issued = 0
        stop_at = None if duration_s is None else start + duration_s

        async def client() -> None:
            nonlocal issued
            while (count is None or issued < count) and (stop_at is None or self._clock() < stop_at):
                index = issued
                issued += 1
                record = await self._request(plan, index, None, start, warm)
                out.append(record)
                notify(record)

        await _gather_or_cancel([client() for _ in range(clients)])

    async def _open(self, plan: LoadPlan, start: float, out: list[RequestRecord], notify: RequestCallback) -> None:
        rng = random.Random(plan.seed)
        cap = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None
        stop_at = None if plan.duration_s is None else start + plan.duration_s
        tasks: list[asyncio.Future[None]] = []

        async def arrival(index: int, scheduled: float) -> None:
            if cap is None:
                record = await self._request(plan, index, scheduled, start)
            else:
                async with cap:
                    record = await self._request(plan, index, scheduled, start)
            out.append(record)
            notify(record)

        due = start
        index = 0
        try:
            while (plan.requests is None or index < plan.requests) and (stop_at is None or due < stop_at):
                delay = due - self._clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(arrival(index, due)))
                index += 1
                due += rng.expovariate(plan.rate_rps)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _request(self, plan: LoadPlan, index: int, scheduled: float | None, start: float,
                       warm: bool = False) -> RequestRecord:
        """One streamed chat request; failures become a record with the error, never an exception.
        scheduled None (closed loop): the request's clock starts when it was written."""
        seed_index = index + WARMUP_INDEX_BASE if warm else index
        request = plan.chat_request(seed_index)
        reply = _Reply(self._meter)
        error: BaseException | None = None
        asked = self._clock()
        if self._meter is not None:
            self._meter.begin()
        try:
            async with asyncio.timeout(plan.request_timeout_s):
                await self._client.stream_chat(request, reply.on_chunk)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is a measured outcome
            error = exc
        finally:
            if self._meter is not None:
                self._meter.end()
        # A request that failed before its first line has no transport stamp: it left when asked, at best.
        sent = reply.sent if reply.sent is not None else asked
        expected = self._expected[seed_index % len(self._expected)] if self._expected else None
        return self._record(index, (sent if scheduled is None else scheduled) - start, sent - start, reply, start,
                            error, warm, expected)

    def _record(self, index: int, scheduled: float, sent: float, reply: _Reply, start: float,
                error: BaseException | None, warm: bool, expected: int | None = None) -> RequestRecord:
        end = (reply.last if reply.last is not None and error is None else self._clock()) - start
        times = reply.times
        gaps = tuple(b - a for a, b in zip(times, times[1:]))
        final = reply.final
        output_tokens = final.output_tokens if final is not None else None
        cached = final.cached_prompt_tokens if final else None
        delivered = None if final is None or final.prompt_tokens is None else final.prompt_tokens + (cached or 0)
        error_text = "" if error is None else _error_text(error)
        error_kind = "" if error is None else error_kind_of(error)
        if error is None and delivered is not None and is_truncated(expected, delivered):
            assert expected is not None  # is_truncated says so
            error_text, error_kind = truncated_words(delivered, expected), "truncated"
        return RequestRecord(
            index=index, scheduled_s=scheduled, sent_s=sent, end_s=end,
            first_token_s=None if reply.first is None else reply.first - start,
            first_answer_s=None if reply.first_answer is None else reply.first_answer - start,
            output_tokens=output_tokens if output_tokens is not None else len(times), output_chunks=len(times),
            prompt_tokens=final.prompt_tokens if final else None, itl_s=gaps,
            load_s=_seconds(final.load_ms) if final else None,
            prompt_eval_s=_seconds(final.prompt_ms) if final else None,
            eval_s=_seconds(final.decode_ms) if final else None,
            total_s=_seconds(final.total_ms) if final else None,
            done_reason=final.done_reason if final else None,
            error=error_text, error_kind=error_kind, warmup=warm,
            expected_prompt_tokens=expected, cached_prompt_tokens=cached)


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


async def _gather_or_cancel(coros: list[Coroutine[Any, Any, None]]) -> None:
    """Run coroutines together; if one raises (or we are cancelled) the others are cancelled."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


__all__ = ["LoadGenerator", "LoadResult", "error_kind_of"]
