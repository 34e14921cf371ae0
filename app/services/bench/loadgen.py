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
from dataclasses import dataclass, replace
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from app.core.bench.outcome import is_truncated, too_long_words, truncated_words, unfinished_words
from app.core.bench.stats import RequestRecord
from app.core.errors import (BadRequest, ContextExceeded, MalformedResponse, ModelNotFound, ReplyUnfinished,
                             ServerUnreachable, ServerError, ServerTimeout, OutOfMemory, QueueFull, ServerFault,
                             StreamDropped, StreamError)
from app.core.bench.scenario import RequestClass, Scenario, request_rng, request_seed
from app.core.bench.workload import LoadPlan
from app.core.ports.inference import PromptTokenCounter, StreamingClientFactory
from app.core.ports.prompt_text import PromptMaker
from app.services.bench.prompt_lengths import expected_prompt_tokens, template_tokens
from app.core.replies import ChatRequest, FinalFigures, StreamChunk
from app.core.throughput import TokenMeter

WARMUP_INDEX_BASE = 1_000_000  # warm-up requests use other seeds than measured ones
RequestCallback = Callable[[RequestRecord], None]


def error_kind_of(exc: BaseException) -> str:
    """The short error class recorded per request (oom, queue_full, timeout, …)."""
    for kind, types in (("too_long", ContextExceeded), ("oom", OutOfMemory), ("queue_full", QueueFull),
                        ("timeout", (ServerTimeout, asyncio.TimeoutError, TimeoutError)),
                        ("connect", ServerUnreachable), ("dropped", StreamDropped), ("unfinished", ReplyUnfinished),
                        ("not_found", ModelNotFound),
                        ("bad_request", BadRequest), ("malformed", MalformedResponse),
                        ("server", (ServerFault, StreamError))):
        if isinstance(exc, types):
            return kind
    return "other"


def _error_text(exc: BaseException, tokens: int) -> str:
    """A failed request's words; `tokens`: the tokens that arrived before it ended."""
    if isinstance(exc, ReplyUnfinished):
        return unfinished_words(tokens)
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

    __slots__ = ("meter", "sent", "first", "first_answer", "last", "times", "final", "text")

    def __init__(self, meter: TokenMeter | None, keep_text: bool = False) -> None:
        self.meter = meter
        self.text: list[str] | None = [] if keep_text else None  # the answer, for a conversation's next turn
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
            if chunk.content and self.text is not None:
                self.text.append(chunk.content)
            if self.meter is not None:
                self.meter.add(1, t)


class LoadGenerator:
    """Sends LoadPlans to one server; keeps its connections between plans until aclose()."""

    def __init__(self, base_url: str, client_factory: StreamingClientFactory, *, meter: TokenMeter | None = None,
                 clock: Callable[[], float] = time.monotonic, connect_timeout_s: float = 3.0,
                 read_timeout_s: float = 300.0, prompt_maker: PromptMaker | None = None,
                 counter: PromptTokenCounter | None = None) -> None:
        """`client_factory` is the backend's; an unusable URL fails here, not as N failed requests.
        `prompt_maker` makes the prompt texts of scenario classes (needed only for scenarios). `counter` (the
        backend's, where it has one) says how many prompt tokens each prompt should count, so a request whose
        prompt the server cut is recorded as truncated."""
        self.base_url = base_url.rstrip("/")
        self._meter = meter
        self._prompt_maker = prompt_maker
        self._counter = counter
        self._expected: tuple[int | None, ...] = ()
        self._overheads: dict[str, int | None] = {}  # system prompt -> the template's tokens around a user text
        self._clock = clock
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
        if plan.scenario is not None and self._prompt_maker is None and any(not c.text for c in plan.scenario.classes):
            raise ValueError("a scenario needs a prompt maker for its prompt texts")
        self._expected = await expected_prompt_tokens(self._counter, plan)
        self._overheads = {}
        warmup: list[RequestRecord] = []
        if plan.scenario is not None:
            if plan.warmup_count:
                if on_stage:
                    on_stage("warm-up")
                await self._scenario_warmup(plan, plan.scenario, self._clock(), warmup, notify)
        elif plan.warmup_count:
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
        scenario_run: ScenarioRun | None = None
        try:
            start = self._clock()
            if plan.scenario is not None:
                scenario_run = ScenarioRun(self, plan, plan.scenario, start, records, notify)
                await scenario_run.run()
            elif plan.mode == "closed":
                await self._closed(plan, start, plan.concurrency, plan.requests, plan.duration_s, records, notify)
            else:
                await self._open(plan, start, records, notify)
        finally:
            if collecting:
                gc.enable()
        if scenario_run is not None:
            await scenario_run.judge_lengths()  # after the stage: no counting request competes with measured ones
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
        """One streamed chat request of a LoadPlan's prompts."""
        seed_index = index + WARMUP_INDEX_BASE if warm else index
        expected = self._expected[seed_index % len(self._expected)] if self._expected else None
        record, _text = await self._send(plan.chat_request(seed_index), plan.request_timeout_s, index, scheduled,
                                         start, warm, expected=expected)
        return record

    async def _send(self, request: ChatRequest, timeout_s: float, index: int, scheduled: float | None, start: float,
                    warm: bool = False, keep_text: bool = False,
                    expected: int | None = None) -> tuple[RequestRecord, str]:
        """One streamed chat request; failures become a record with the error, never an exception.
        scheduled None (closed loop): the request's clock starts when it was written. Returns the record and
        (with keep_text) the answer's text."""
        reply = _Reply(self._meter, keep_text)
        error: BaseException | None = None
        asked = self._clock()
        if self._meter is not None:
            self._meter.begin()
        try:
            async with asyncio.timeout(timeout_s):
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
        record = self._record(index, (sent if scheduled is None else scheduled) - start, sent - start, reply, start,
                              error, warm, expected)
        return record, "".join(reply.text or ())

    async def scenario_expected(self, model: str, request: ChatRequest, made_tokens: int | None,
                                first_turn: bool, system: str) -> int | None:
        """The prompt tokens a scenario request should count: its messages counted whole where the server's
        counter counts any length; else, for a conversation's first turn made by a calibrated maker, the maker's
        expectation plus the template's tokens (measured once per system prompt); else unknown (a later turn's history is the server's
        own earlier replies, which only a whole count knows; then only the server's own sign can say it was cut).
        A counter that fails leaves it unknown."""
        counter = self._counter
        try:
            if counter is not None and counter.counts_whole_prompts:
                return await counter.count_chat(model, request.messages)
            maker = self._prompt_maker
            if not first_turn or made_tokens is None or maker is None or not maker.calibrated:
                return None  # an estimate can be off by more than a cut: no claim on it
            if counter is None:
                return made_tokens
            if system not in self._overheads:
                self._overheads[system] = await template_tokens(counter, model, system)
            overhead = self._overheads[system]
            return None if overhead is None else made_tokens + overhead
        except ServerError:
            return None

    @staticmethod
    def judged(record: RequestRecord, expected: int | None) -> RequestRecord:
        """The record with the prompt tokens it was expected to count, and marked truncated when the server used
        fewer of them than that (a request that failed otherwise keeps its own error)."""
        record = replace(record, expected_prompt_tokens=expected)
        delivered = record.delivered_prompt_tokens
        if record.error_kind or delivered is None or expected is None or not is_truncated(expected, delivered):
            return record
        return replace(record, error=truncated_words(delivered, expected), error_kind="truncated")

    async def _scenario_warmup(self, plan: LoadPlan, scenario: Scenario, start: float, out: list[RequestRecord],
                               notify: RequestCallback) -> None:
        """Uncounted first turns, one class after another (the first of each class, then round again)."""
        for n in range(plan.warmup_count):
            cls = scenario.classes[n % len(scenario.classes)]
            request, _user, made = made_scenario_request(plan, cls, n + WARMUP_INDEX_BASE, 1, (), self._prompt_maker)
            record, _text = await self._send(request, plan.request_timeout_s, n, None, start, warm=True)
            expected = await self.scenario_expected(plan.model, request, made, True, cls.system)
            record = replace(self.judged(record, expected), request_class=cls.name)
            out.append(record)
            notify(record)

    def _record(self, index: int, scheduled: float, sent: float, reply: _Reply, start: float,
                error: BaseException | None, warm: bool, expected: int | None = None) -> RequestRecord:
        end = (reply.last if reply.last is not None and error is None else self._clock()) - start
        times = reply.times
        gaps = tuple(b - a for a, b in zip(times, times[1:]))
        final = reply.final
        output_tokens = final.output_tokens if final is not None else None
        record = RequestRecord(
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
            error="" if error is None else _error_text(error, len(times) if output_tokens is None else output_tokens),
            error_kind="" if error is None else error_kind_of(error), warmup=warm,
            cached_prompt_tokens=final.cached_prompt_tokens if final else None,
            server_busy_s=_seconds(final.busy_ms) if final else None)
        return self.judged(record, expected)


def scenario_request(plan: LoadPlan, cls: RequestClass, conversation: int, turn: int,
                     history: Sequence[Mapping[str, str]], maker: PromptMaker | None) -> tuple[ChatRequest, str]:
    """A class's request for one turn of one conversation, and its new user text. Lengths and thinking are
    drawn from the request's own seeded generator, so the same plan seed sends the same requests."""
    request, user, _made = made_scenario_request(plan, cls, conversation, turn, history, maker)
    return request, user


def made_scenario_request(plan: LoadPlan, cls: RequestClass, conversation: int, turn: int,
                          history: Sequence[Mapping[str, str]],
                          maker: PromptMaker | None) -> tuple[ChatRequest, str, int | None]:
    """scenario_request, with the tokens the maker expects its user text to count (None: a class's fixed text)."""
    rng = request_rng(plan.seed, cls.name, conversation, turn)
    prompt_tokens = cls.prompt_tokens.sample(rng)
    output_tokens = cls.output_tokens.sample(rng)
    think = rng.random() < cls.thinking_share
    seed = request_seed(plan.seed, cls.name, conversation, turn)
    made: int | None = None
    if cls.text:
        user = cls.text
    else:
        assert maker is not None  # run() refuses a scenario without a maker
        text = maker.make(prompt_tokens, seed)
        user, made = text.text, text.expected_tokens
    system = [{"role": "system", "content": cls.system}] if cls.system else []
    messages = (*system, *history, {"role": "user", "content": user})
    return ChatRequest(model=plan.model, messages=tuple(messages), think=think, seed=seed,
                       max_tokens=output_tokens), user, made


class ScenarioRun:
    """One measured stage of a scenario: every class at once, each with its own arrivals.

    A request count is split over the classes by weight (Scenario.split); a duration stops every class
    from sending new requests. Open loop: arrivals at the class's rate, Poisson or evenly spaced, from a
    generator seeded per class; a conversation class starts conversations at rate / turns, so turns
    arrive at the class's rate on average. Closed loop: the class's clients, each running conversations
    turn by turn. A conversation's next turn is sent when its previous reply arrived, with that reply and
    the user's text added to its messages. `plan.concurrency` caps the requests in flight over all classes
    (0: no cap); an arrival held back waits on the client, which counts in its latency."""

    def __init__(self, generator: LoadGenerator, plan: LoadPlan, scenario: Scenario, start: float,
                 out: list[RequestRecord], notify: RequestCallback) -> None:
        self._gen = generator
        self._plan = plan
        self._scenario = scenario
        self._start = start
        self._out = out
        self._notify = notify
        self._clock = generator._clock
        self._stop_at = None if plan.duration_s is None else start + plan.duration_s
        self._cap = asyncio.Semaphore(plan.concurrency) if plan.concurrency else None
        self._index = 0
        # Per measured record (its place in `out`): what it sent, for judging its prompt length after the stage.
        self._sent: list[tuple[int, ChatRequest, int | None, bool, str]] = []
        counts = scenario.split(plan.requests) if plan.requests is not None else (None,) * len(scenario.classes)
        self._counts: tuple[int | None, ...] = counts

    def _open_time(self) -> bool:
        return self._stop_at is None or self._clock() < self._stop_at

    async def run(self) -> None:
        """Every class at once; returns when all their requests ended."""
        await _gather_or_cancel([self._class(cls, count) for cls, count in zip(self._scenario.classes, self._counts)])

    async def _class(self, cls: RequestClass, count: int | None) -> None:
        turns = cls.turns

        def turns_of(conversation: int) -> int:
            """Turns of this conversation: the class's, the last one cut so the count comes out exact."""
            if count is None:
                return turns
            return max(0, min(turns, count - conversation * turns))

        if cls.arrival.open:
            rng = random.Random(f"{self._plan.seed}:{cls.name}:arrivals")
            rate = cls.arrival.rate_rps / turns
            tasks: list[asyncio.Future[None]] = []
            due = self._start
            conversation = 0
            try:
                while turns_of(conversation) > 0 and (self._stop_at is None or due < self._stop_at):
                    delay = due - self._clock()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    tasks.append(asyncio.ensure_future(self._conversation(cls, conversation, turns_of(conversation),
                                                                          due)))
                    conversation += 1
                    due += rng.expovariate(rate) if cls.arrival.kind == "poisson" else 1.0 / rate
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
            return
        taken = 0

        async def client() -> None:
            nonlocal taken
            while turns_of(taken) > 0 and self._open_time():
                conversation = taken
                taken += 1
                await self._conversation(cls, conversation, turns_of(conversation), None)

        await _gather_or_cancel([client() for _ in range(cls.arrival.concurrency)])

    async def _conversation(self, cls: RequestClass, conversation: int, turns: int, due: float | None) -> None:
        history: list[dict[str, str]] = []
        for turn in range(1, turns + 1):
            if turn > 1:
                if not self._open_time():
                    return
                due = None if due is None else self._clock()  # an open loop's next turn arrives now
            request, user, made = made_scenario_request(self._plan, cls, conversation, turn, history,
                                                        self._gen._prompt_maker)
            index = self._index
            self._index += 1
            if self._cap is None:
                record, answer = await self._send(request, index, due)
            else:
                async with self._cap:
                    record, answer = await self._send(request, index, due)
            record = replace(record, request_class=cls.name, conversation=conversation, turn=turn)
            self._sent.append((len(self._out), request, made, turn == 1, cls.system))
            self._out.append(record)
            self._notify(record)
            history += [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]

    async def judge_lengths(self) -> None:
        """Give every measured record the prompt tokens it should have counted, and mark it truncated where the
        server used fewer (counted once the stage is over, so the counting requests neither load the server
        while it is measured nor delay a conversation's next turn)."""
        for place, request, made, first_turn, system in self._sent:
            expected = await self._gen.scenario_expected(self._plan.model, request, made, first_turn, system)
            self._out[place] = self._gen.judged(self._out[place], expected)

    async def _send(self, request: ChatRequest, index: int, due: float | None) -> tuple[RequestRecord, str]:
        return await self._gen._send(request, self._plan.request_timeout_s, index, due, self._start,
                                     keep_text=True)


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


__all__ = ["LoadGenerator", "LoadResult", "ScenarioRun", "error_kind_of", "made_scenario_request", "scenario_request"]
