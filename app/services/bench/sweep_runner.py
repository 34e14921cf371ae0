"""Runs a sweep: per point, price it, restart the server with its settings, load and warm the model,
drive the workload while reading the GPU, check the server survived on the GPU, and go on.

A Qt-free procedure on the asyncio loop thread. `cancel()` (any thread) stops at once; whatever
ends the run — finished, cancelled, an error — the server is put back in the settings and the
running/stopped state it had before the sweep.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import platform
import time
from dataclasses import dataclass, replace
from collections.abc import Awaitable, Callable, Sequence

from app.core.memory.allowance import DEFAULT_ALLOWANCE
from app.services.runtime_learner import RuntimeLearner
from app.adapters.prompt_corpus import bundled_corpus
from app.services.bench.loadgen import LoadGenerator
from app.services.bench.prompt_lengths import calibrate
from app.services.bench.sweep_gpu import (ON_CPU_REASON, GpuWindow, computes_on_gpu, figures_from, gpu_facts,
                                          gpu_memory_now, runs_without_gpu, spill_words)
from app.services.bench.sweep_contention import ContentionWindow
from app.services.bench.sweep_server import ServerWindow
from app.services.bench.sweep_balance import BalanceWindow, Behind
from app.services.bench.sweep_watch import RunWatch, ServerFeed, reply_facts
from app.services.bench.sweep_words import load_failure, skip_reason
from app.core.bench.stats import RequestRecord, summarize
from app.core.bench.truncation import context_needed, cut_reason, cut_records, fix_words
from app.core.errors import DeckError, EstimateError, ModelNotFound, ServerError, OutOfMemory
from app.core.memory.estimator import GpuMemory
from app.core.memory.host import HostMemory
from app.core.model_shape import ModelShape
from app.core.models import LocalModel, RunningModel
from app.core.memory.launch_plan import SettingsPlanner
from app.core.memory.launch_plan import LaunchPlan
from app.core.memory.pricing import price, price_load
from app.core.memory.verdict import Verdict, verdict_label
from app.core.server.state import ServerState
from app.core.server.settings import ServerSettings
from app.core.units import GIB, MIB
from app.core.bench.outcome import (CRASHED_DURING_RUN, ERROR_WORDS, EVERY_REQUEST_FAILED, REASONS, FailureKind,
                                    PointStatus, RunStatus, request_failure)
from app.core.bench.sweep import Fingerprint, PointResult, SweepPoint, SweepSpec, spoiled_reason
from app.core.bench.prompt_maker import CorpusPromptMaker
from app.core.bench.recommend import recommend
from app.core.bench.run import SweepRun
from app.core.bench.workload import LoadPlan
from app.core.ports.log_signals import LogSignalReaderFactory
from app.core.ports.inference import PromptCounterFactory, PromptTokenCounter, StreamingClientFactory
from app.core.ports.catalog import CatalogFactory, ModelCatalog
from app.core.ports.clock import Clock
from app.core.ports.contention import ContentionProbeFactory
from app.core.ports.planner import LoadPlanner
from app.core.ports.prompt_text import PromptMaker
from app.core.ports.server import ServerControl
from app.core.ports.telemetry import ServerTelemetryFactory
from app.core.telemetry import GpuBackend
from app.core.throughput import TokenMeter
from app.core.watch.events import WatchEvent
from app.core.watch.signals import Asked

# Predictions that make a point pointless on this GPU: it would not load, or would run partly on the
# CPU (slow to load, many times slower to decode, and failed by the loaded-model check anyway).
SKIPPED_VERDICTS = (Verdict.WONT_LOAD, Verdict.SPILLS)
# Why a sweep at a balancer cannot vary server settings.
BALANCER_NOT_MANAGED = ("A sweep at a balancer measures the servers behind it as they run: ollama-deck did not start "
                        "them and cannot restart them per point, so server settings cannot vary.")
# Share of a point's time before measuring starts (restart, load, warm-up), for progress and ETA.
SETUP_SHARE = 0.2
# Corpus pieces counted when the server counts a text by running it (a request each): enough for any prompt,
# as the maker strings the counted pieces together; a tokenizer counts them all.
PROBED_PIECES = 16


@dataclass(frozen=True)
class ClassProgress:
    """A scenario class's requests done at the point being measured (`of`: its share of the request count;
    None when the point runs for a duration)."""

    name: str
    done: int
    of: int | None = None


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep stands: point k of n, the phase, and an estimate of the time left (s)."""

    point: int  # 0-based index of the current point
    points: int
    phase: str  # preparing | pricing | restarting | loading | calibrating | warm-up | measuring | restoring | done
    label: str
    detail: str = ""
    fraction: float = 0.0  # of the whole sweep
    eta_s: float | None = None
    elapsed_s: float = 0.0
    classes: tuple[ClassProgress, ...] = ()  # a scenario's classes while a point is measured


# Measures a workload at the point an after-sweep stage runs at; returns the point's outcome (None: cancelled).
PointMeasure = Callable[[LoadPlan, Callable[[SweepProgress], None]], Awaitable[PointResult | None]]
# A stage after the sweep's points (a rate sweep): it gets the run so far, the point to run at (the recommended
# one, else the sweep's only point; None when there is none) and a way to measure there; it returns the run.
AfterSweep = Callable[[SweepRun, PointResult | None, PointMeasure], Awaitable[SweepRun]]


def now_iso() -> str:
    """Local time with offset, seconds precision."""
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _ended(known: PointResult, status: PointStatus, failure: FailureKind | None, reason: str = "",
           detail: str = "") -> PointResult:
    """The point's outcome: what was measured so far, with its status, why (None: it ran fine) and the
    reason in words."""
    return replace(known, status=status, failure=failure, reason=reason, detail=detail)


def _mib(n_bytes: int | None) -> float | None:
    """Bytes as MiB; None stays None (a size the server does not report)."""
    return None if n_bytes is None else n_bytes / MIB


def _name_matches(wanted: str, name: str) -> bool:
    full = wanted if ":" in wanted.rsplit("/", 1)[-1] else f"{wanted}:latest"
    return name in (wanted, full)


class SweepRunner:
    """Executes SweepSpecs against one server. Managed sweeps need the supervisor that started it."""

    def __init__(self, supervisor: ServerControl | None, client_factory: CatalogFactory,
                 load_client: StreamingClientFactory, *,
                 base_url: str | None = None, gpu: GpuBackend | None = None,
                 server_pids: Callable[[], Sequence[int]] = lambda: [], meter: TokenMeter | None = None,
                 clock: Clock = time.monotonic, sample_interval_s: float = 0.25,
                 app_version: str = "", server_telemetry: ServerTelemetryFactory | None = None,
                 host_memory: Callable[[], HostMemory | None] = lambda: None,
                 contention: ContentionProbeFactory | None = None, planner: LoadPlanner | None = None,
                 prompt_maker: PromptMaker | None = None, prompt_counter: PromptCounterFactory | None = None,
                 log_signals: LogSignalReaderFactory | None = None, server_feed: ServerFeed | None = None,
                 learner: RuntimeLearner | None = None, teach: bool = True, behind: Sequence[Behind] = ()) -> None:
        self._supervisor = supervisor
        # gives the runtime allowance each point is priced with (None: the default) and, with `teach`, learns it from
        # the loads the sweep makes (off where something else already feeds it the same server's log and readings,
        # as the GUI's watch does: one learner follows one log)
        self._learner = learner
        self._teach = teach
        self._client_factory = client_factory
        self._load_client = load_client
        self._base_url = base_url
        self._gpu = gpu
        self._server_pids = server_pids
        self._meter = meter
        self._clock = clock
        self._sample_interval_s = sample_interval_s
        self._app_version = app_version
        self._server_telemetry = server_telemetry  # the server's own slots and counters, where it has them
        self._host_memory = host_memory  # the RAM a point's load can have (None: not known, not priced)
        self._contention = contention  # what else used the device over each point's window (None: not measured)
        # the launch the server makes for a point's settings, as its backend plans it: what is priced
        self._planner: LoadPlanner = planner if planner is not None else SettingsPlanner()
        self._model_own: tuple[int | None, int | None] = (None, None)  # the model's own num_ctx and num_batch
        # the prompt texts of scenario workloads (None: cut from the bundled corpus), calibrated per model on the
        # server in use before a scenario is measured, where the server can count tokens
        self._prompt_maker = prompt_maker
        self._makers: dict[str, PromptMaker] = {}  # per model, for this run
        # counts prompts in the server's tokens, so a prompt the server cut is told (None: only its own sign)
        self._prompt_counter = prompt_counter
        # What the server does without saying so, per point: its log read by the backend's reader (None: the log
        # is not read), the lines and statuses of the server from `server_feed` (None: only what the sweep reads).
        self._log_signals = log_signals
        self._server_feed = server_feed
        # The backends behind the balancer at base_url, each read through its own telemetry over each point's
        # window for its share of the work (empty: base_url is one server).
        self._behind = tuple(behind)
        self._watch = RunWatch("", log_signals)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._point_task: asyncio.Task[PointResult] | None = None
        self._cancelled = False

    # ---- control -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the sweep as soon as possible (safe from any thread); run() then restores and returns."""
        self._cancelled = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._cancel_point)

    def _cancel_point(self) -> None:
        if self._point_task is not None and not self._point_task.done():
            self._point_task.cancel()

    @property
    def base_url(self) -> str:
        """The server the sweep talks to."""
        if self._supervisor is not None:
            return self._supervisor.settings.base_url
        assert self._base_url is not None, "an attached sweep needs base_url"
        return self._base_url

    # ---- the run -------------------------------------------------------------------------------
    async def run(self, spec: SweepSpec, on_progress: Callable[[SweepProgress], None] | None = None,
                  on_point: Callable[[SweepRun, PointResult], None] | None = None,
                  on_start: Callable[[SweepRun], None] | None = None,
                  after: AfterSweep | None = None) -> SweepRun:
        """Run every point and return the finished run (status finished or cancelled); `after` then runs at
        the recommended point (or the only one) before the server is put back.

        Raises DeckError before anything changed when the sweep cannot start (no such model,
        a managed sweep on a server ollama-deck did not start, an unusable workload)."""
        self._loop = asyncio.get_running_loop()
        # A cancel that came before run() (a Cancel pressed while the sweep was being handed to the loop) stands:
        # the run ends before its first point and puts nothing out of place. The flag is cleared when run() ends.
        self._makers = {}
        self._watch = watch = RunWatch(self.base_url, self._log_signals,
                                       learner=self._learner if self._teach else None)
        follow = self._server_feed.subscribe(watch.log, watch.status) if self._server_feed is not None else None
        try:
            return await self._run(spec, on_progress, on_point, on_start, after)
        finally:
            self._cancelled = False
            if follow is not None:
                follow()

    @property
    def watch(self) -> RunWatch:
        """The watchdogs of the run now (or the last one) and their events."""
        return self._watch

    async def _run(self, spec: SweepSpec, on_progress: Callable[[SweepProgress], None] | None,
                   on_point: Callable[[SweepRun, PointResult], None] | None,
                   on_start: Callable[[SweepRun], None] | None, after: AfterSweep | None) -> SweepRun:
        progress = on_progress or (lambda _p: None)
        plan = spec.plan()
        problems = sorted({problem for point in plan.points
                           for problem in spec.workload.for_point(point.concurrency).problems()})
        if problems:
            raise DeckError("The workload cannot run: " + " ".join(problems))
        # The supervisor only matters to a managed sweep; an attached one never touches the server.
        if spec.managed and self._behind:
            raise DeckError(BALANCER_NOT_MANAGED, hint="Sweep client concurrency, rate or a scenario at the balancer.")
        sup = self._supervisor if spec.managed else None
        if spec.managed and sup is None:
            raise DeckError("A sweep over server settings needs a server started by ollama-deck.")
        if sup is not None and sup.status.state is ServerState.RUNNING_ATTACHED:
            raise DeckError("The server at this address was not started by ollama-deck, so its settings cannot "
                            "change per point.", hint="Sweep client concurrency only, or start the server from "
                            "ollama-deck on the Server page.")
        original: ServerSettings | None = sup.settings if sup is not None else None
        was_running = sup is not None and sup.status.state is ServerState.RUNNING_MANAGED
        started = self._clock()
        progress(SweepProgress(0, len(plan.points), "preparing", "Reading the model and the GPU…"))
        if sup is not None and not was_running:
            status = await sup.start()
            if status.state is not ServerState.RUNNING_MANAGED:
                raise DeckError(f"The server did not start: {status.message}")
        client = self._client_factory(self.base_url)
        try:
            fingerprint, shape, notes = await self._prepare(client, spec)
        except BaseException:
            await client.aclose()
            if sup is not None and not was_running:
                await self._restore(original, was_running, progress, len(plan.points))
            raise
        run = SweepRun(spec, fingerprint, plan.points, plan.varying, status=RunStatus.RUNNING, started_at=now_iso(),
                       notes=tuple(plan.notes) + tuple(notes))
        if on_start is not None:
            on_start(run)
        durations: list[float] = []
        status_word = RunStatus.FINISHED
        try:
            for point in plan.points:
                if self._cancelled:
                    status_word = RunStatus.CANCELLED
                    break
                begun = self._clock()
                self._point_task = asyncio.ensure_future(
                    self._run_point(client, spec, point, shape, fingerprint.server_version, progress, durations,
                                    len(plan.points), plan.varying))
                try:
                    result = await self._point_task
                except asyncio.CancelledError:
                    if not self._cancelled:
                        raise  # our own task was cancelled: let it end
                    status_word = RunStatus.CANCELLED
                    break
                finally:
                    self._point_task = None
                result = replace(result, elapsed_s=self._clock() - begun)
                if result.ran:  # skipped and failed points end early: they would make the ETA optimistic
                    durations.append(result.elapsed_s)
                run = run.with_result(result)
                if on_point is not None:
                    on_point(run, result)
            if after is not None and status_word is RunStatus.FINISHED:
                run = await self._after(client, spec, run, shape, fingerprint.server_version, after)
                if self._cancelled:
                    status_word = RunStatus.CANCELLED
        finally:
            await client.aclose()
            await self._restore(original, was_running, progress, len(plan.points))
        done = run.finished(status_word, now_iso())
        progress(SweepProgress(len(plan.points), len(plan.points), "done", "", "", 1.0, 0.0, self._clock() - started))
        return done

    async def _after(self, client: ModelCatalog, spec: SweepSpec, run: SweepRun, shape: ModelShape | None,
                     version: str, after: AfterSweep) -> SweepRun:
        """Run `after` at the recommended point (else the only point that ran); its first measurement restarts a
        managed server with that point's settings, the next ones measure the server as it is. A run with a
        measured default point that is not the recommended one runs `after` there too (its result goes to
        `default_capacity`), so a before/after report has both sides' capacity."""
        chosen = run.result_for(recommend(run.results, spec.targets, run.varying).index)
        if chosen is None and len(run.results) == 1 and run.results[0].ran:
            chosen = run.results[0]
        run = await after(run, chosen, self._measure_at(client, spec, run, chosen, shape, version))
        default = next((r for r in run.results if r.point.default and r.ran), None)
        if self._cancelled or chosen is None or default is None or default.point.index == chosen.point.index:
            return run
        at_default = await after(replace(run, capacity=None), default,
                                 self._measure_at(client, spec, run, default, shape, version))
        return replace(run, default_capacity=at_default.capacity)

    def _measure_at(self, client: ModelCatalog, spec: SweepSpec, run: SweepRun, chosen: PointResult | None,
                    shape: ModelShape | None, version: str) -> PointMeasure:
        """Measures a workload at `chosen`'s setting: the first call restarts a managed server with it."""
        fresh = True

        async def measure(workload: LoadPlan, progress: Callable[[SweepProgress], None]) -> PointResult | None:
            nonlocal fresh
            if self._cancelled or chosen is None:
                return None
            step_spec = replace(spec, workload=workload)
            self._point_task = asyncio.ensure_future(self._run_point(
                client, step_spec, chosen.point, shape, version, progress, [], 1, run.varying, restart=fresh))
            fresh = False
            try:
                return await self._point_task
            except asyncio.CancelledError:
                if not self._cancelled:
                    raise
                return None
            finally:
                self._point_task = None

        return measure

    async def _prepare(self, client: ModelCatalog, spec: SweepSpec) -> tuple[Fingerprint, ModelShape | None, list[str]]:
        """The fingerprint and the model's shape (for pricing); ModelNotFound before anything changes."""
        model_name = spec.workload.model
        version = await client.version()
        local = await client.tags()
        # By its name, or by what the name stands for (a served file's path: llama-server names it by alias).
        entry: LocalModel | None = next((m for m in local if _name_matches(model_name, m.name)
                                         or model_name == m.model), None)
        if entry is None:
            raise ModelNotFound(f"model '{model_name}' is not on the server at {self.base_url}",
                                hint="Pull it first, or pick one from the model list.")
        notes: list[str] = []
        shape = None
        self._model_own = (None, None)
        try:
            details = await client.show(model_name, verbose=True)
            shape = details.facts.shape(entry.size_bytes)
            self._model_own = (details.facts.own_context, details.facts.own_batch)  # the server loads it with them
        except (EstimateError, ServerError) as exc:
            notes.append(f"Points were not priced before running: {getattr(exc, 'message', exc)}.")
        # The first NVML call may initialise the library: a worker thread waits for the driver, not the loop.
        info, why = await asyncio.to_thread(gpu_facts, self._gpu)
        if info is None:
            reason = why.split(" — ")[0]
            notes.append(f"No GPU readings ({reason.rstrip('.')}): VRAM, power and tokens per joule are not "
                         "measured, and points are not priced before running.")
        if not spec.managed:
            notes.append("Attached server: its settings are its own, so only the client side varied.")
        fingerprint = Fingerprint(
            gpu_name=info.name if info else "", gpu_driver=info.driver if info else "",
            gpu_memory_mib=info.memory_total_mib if info else None, server_version=version, model=entry.name,
            model_digest=entry.digest, model_quantization=entry.quantization_level,
            model_parameters=entry.parameter_size, managed=spec.managed,
            base_settings=spec.base.to_json() if spec.managed else {}, host=platform.node(),
            app_version=self._app_version, backend_kind=spec.base.backend)
        return fingerprint, shape, notes

    async def _gpu_memory(self, client: ModelCatalog) -> GpuMemory | None:
        """The GPU as the estimator sees it now, other processes' use included (None without NVML)."""
        running = self._supervisor is None or self._supervisor.status.state.is_running
        allowance = self._learner.allowance() if self._learner is not None else DEFAULT_ALLOWANCE
        return await gpu_memory_now(GpuWindow(self._gpu, self._server_pids, clock=self._clock), client, running,
                                    allowance)

    # ---- one point -----------------------------------------------------------------------------
    async def _run_point(self, client: ModelCatalog, spec: SweepSpec, point: SweepPoint, shape: ModelShape | None,
                         version: str, progress: Callable[[SweepProgress], None], durations: list[float],
                         n_points: int, varying: Sequence[str], restart: bool = True) -> PointResult:
        """The point's outcome with the events seen from its start to its end: a point that ran fine but saw one
        that spoils a measurement is not stable (a failed one keeps its failure: the event rides along)."""
        start = self._watch.now()
        result = await self._point(client, spec, point, shape, version, progress, durations, n_points, varying,
                                   restart)
        if self._supervisor is not None and spec.managed:
            self._watch.status(self._supervisor.status)
        return watched(result, self._watch.between(start, self._watch.now()))

    async def _point(self, client: ModelCatalog, spec: SweepSpec, point: SweepPoint, shape: ModelShape | None,
                     version: str, progress: Callable[[SweepProgress], None], durations: list[float],
                     n_points: int, varying: Sequence[str], restart: bool) -> PointResult:
        label = point.label(varying)
        begun = self._clock()

        def report(phase: str, detail: str = "", within: float = 0.0, classes: tuple[ClassProgress, ...] = ()) -> None:
            elapsed = self._clock() - begun
            progress(SweepProgress(point.index, n_points, phase, label, detail, (point.index + within) / n_points,
                                   self._eta(durations, n_points, point.index, within, elapsed),
                                   sum(durations) + elapsed, classes))

        estimate = None
        launch: LaunchPlan | None = None
        if spec.managed and shape is not None:
            report("pricing")
            gpu = await self._gpu_memory(client)
            if gpu is not None:
                try:
                    price_now = price_load(self._planner, point.settings, shape, gpu, version,
                                           await asyncio.to_thread(self._host_memory), model_num_ctx=self._model_own[0],
                                           model_num_batch=self._model_own[1])
                    launch, estimate = price_now.plan, price_now.estimate
                except EstimateError as exc:
                    return PointResult(point, PointStatus.SKIPPED, REASONS[FailureKind.INVALID_SETTINGS],
                                       detail=exc.message, failure=FailureKind.INVALID_SETTINGS)
        asked = asked_of(spec, point, launch, estimate.verdict if estimate is not None else None)
        # What is known so far rides along on every outcome; each return sets status and reason.
        priced = PointResult(point, PointStatus.OK, estimate_verdict=estimate.verdict if estimate else None,
                             estimate_peak_mib=estimate.peak_gpu_bytes / MIB if estimate else None)
        if estimate is not None and estimate.verdict in SKIPPED_VERDICTS and not spec.force:
            return _ended(priced, PointStatus.SKIPPED, *skip_reason(estimate), f"{estimate.explanation} The point was "
                          "not run; tick Force (--force) to run it anyway.")
        if spec.managed and self._supervisor is not None and restart:
            report("restarting", f"parallel {point.settings.num_parallel}", 0.02)
            # The sweep's own restart: a fresh watchdog follows the new server (its first status is where it starts
            # from), held to this point's settings.
            self._watch.restarting(asked)
            status = await self._supervisor.restart(point.settings)
            self._watch.status(status)
            if status.state is not ServerState.RUNNING_MANAGED:
                return _ended(priced, PointStatus.FAILED, FailureKind.NO_START, REASONS[FailureKind.NO_START],
                              status.message)
        else:
            self._watch.expect(asked)
        report("loading", spec.workload.model, 0.05)
        try:
            await client.load(spec.workload.model)
            loaded = await self._loaded(client, spec.workload.model)
        except OutOfMemory as exc:
            return _ended(priced, PointStatus.FAILED, FailureKind.OUT_OF_MEMORY, REASONS[FailureKind.OUT_OF_MEMORY],
                          exc.message)
        except ServerError as exc:
            return _ended(priced, PointStatus.FAILED, *load_failure(exc.message, self._crash_reason()))
        facts = replace(priced, loaded_size_mib=_mib(loaded.size_bytes if loaded else None),
                        loaded_vram_mib=_mib(loaded.size_vram_bytes if loaded else None),
                        context_length=loaded.context_length if loaded else None)
        if loaded is not None and (spilled := spill_words(self._gpu, loaded)):
            return _ended(facts, PointStatus.FAILED, FailureKind.SPILLED, f"spilled to CPU ({spilled})",
                          f"The server reports {_mib(loaded.size_vram_bytes) or 0:.0f} of "
                          f"{_mib(loaded.size_bytes) or 0:.0f} MiB "
                          "on the GPU; the rest runs on the CPU, many times slower.")
        async def price_context(needed: int) -> str:
            """What a context of `needed` tokens per slot costs at this point's parallel, by the estimate."""
            gpu = await self._gpu_memory(client) if shape is not None else None
            if shape is None or gpu is None:
                return ""
            try:
                wider = price(point.settings.replace(context_length=needed), shape, gpu, version,
                              await asyncio.to_thread(self._host_memory), planner=self._planner)
            except EstimateError:
                return ""
            now = f", against {estimate.peak_gpu_bytes / GIB:.2f} GiB now" if estimate is not None else ""
            return (f"By the estimate that costs {wider.peak_gpu_bytes / GIB:.2f} GiB of VRAM at parallel "
                    f"{point.settings.num_parallel}{now} ({verdict_label(wider.verdict).lower()}).")

        return await self._measure(client, spec, point, report, facts, runs_without_gpu(self._gpu, loaded),
                                   computes_on_gpu(self._gpu, loaded), price_context)

    def _reply(self, record: RequestRecord, model: str, counted: bool, context_per_slot: int | None) -> None:
        """A measured request to the watchdog (warm-ups prepare the point: what they meet is not measured)."""
        if record.warmup:
            return
        self._watch.reply(reply_facts(record, model=model, at=self._watch.now(), counted=counted,
                                      context_per_slot=context_per_slot))

    async def _measure(self, client: ModelCatalog, spec: SweepSpec, point: SweepPoint,
                       report: Callable[..., None], facts: PointResult,
                       on_cpu: bool = False, on_gpu: bool = False,
                       price_context: Callable[[int], Awaitable[str]] | None = None) -> PointResult:
        plan = spec.workload.for_point(point.concurrency)
        window = GpuWindow(self._gpu, self._server_pids, self._sample_interval_s, self._clock, self._watch.gpu)
        server_window = ServerWindow(self._server_telemetry, self.base_url, self._sample_interval_s, self._watch.server)
        baseline = await window.read()
        if baseline is not None:
            self._watch.learn(baseline)  # the loaded server before the work: the reading the runtime is learnt from
        done = 0
        scenario = plan.scenario
        class_names = [c.name for c in scenario.classes] if scenario is not None else []
        class_of = dict(zip(class_names, scenario.split(plan.requests))) if scenario and plan.requests else {}
        class_done = dict.fromkeys(class_names, 0)
        measure_start = [self._clock()]
        contention_window = ContentionWindow(self._contention, self._server_pids)
        balance_window = BalanceWindow(self._behind, self._sample_interval_s)

        def on_stage(stage: str) -> None:
            if stage == "measuring":
                measure_start[0] = self._clock()
                window.start()
                server_window.start()
                contention_window.start()
                balance_window.start()
            report(stage, "", SETUP_SHARE / 2 if stage == "warm-up" else SETUP_SHARE)

        counted = self._prompt_counter is not None
        context_per_slot = facts.context_length or point.settings.context_length

        def on_request(record: RequestRecord) -> None:
            nonlocal done
            self._reply(record, plan.model, counted, context_per_slot)
            if record.warmup:
                return
            done += 1
            if record.request_class in class_done:
                class_done[record.request_class] += 1
            if plan.requests is not None:
                share, detail = done / plan.requests, f"{done} of {plan.requests} requests"
            else:
                elapsed = self._clock() - measure_start[0]
                duration_s = plan.duration_s or 0.0  # a plan without a request count has a duration
                share = min(1.0, elapsed / duration_s) if duration_s > 0 else 0.0
                detail = f"{done} requests, {elapsed:.0f} of {duration_s:g} s"
            report("measuring", detail, SETUP_SHARE + (1 - SETUP_SHARE) * share,
                   tuple(ClassProgress(n, class_done[n], class_of.get(n)) for n in class_names))

        counter = self._prompt_counter(self.base_url) if self._prompt_counter is not None else None
        try:
            maker = await self._scenario_maker(plan, counter, report)
        except BaseException:
            if counter is not None:
                await counter.aclose()
            raise
        async with LoadGenerator(self.base_url, self._load_client, meter=self._meter, clock=self._clock,
                                 read_timeout_s=plan.request_timeout_s, prompt_maker=maker,
                                 counter=counter) as generator:
            try:
                result = await generator.run(plan, on_request, on_stage)
                contention = await contention_window.verdict(on_gpu)
            finally:
                await contention_window.close()
                await window.stop()
                server = await server_window.stop()
                balance = await balance_window.stop()
                if counter is not None:
                    await counter.aclose()
        stats = summarize(result.records, spec.targets)
        outcome = replace(facts, stats=stats, records=tuple(result.records),
                          gpu=figures_from(window.samples, baseline, window.server_known),
                          server=server, contention=contention, balance=balance)
        crashed = self._crash_reason()
        if crashed:
            return _ended(outcome, PointStatus.FAILED, FailureKind.CRASHED, CRASHED_DURING_RUN, crashed)
        try:
            loaded = await self._loaded(client, spec.workload.model)
        except ServerError:
            loaded = None
        if loaded is not None and (spilled := spill_words(self._gpu, loaded)):
            return _ended(outcome, PointStatus.FAILED, FailureKind.SPILLED, f"spilled to CPU during the run ({spilled})")
        if cut := cut_records(result.records):
            # Answers to prompts the server cut are not answers to the workload: the point fails, whatever its speed.
            needed = context_needed(result.records, plan.output_cap)
            price_words = await price_context(needed) if needed is not None and price_context is not None else ""
            failure = FailureKind.TRUNCATED if any(r.error_kind == "truncated" for r in cut) \
                else FailureKind.PROMPT_TOO_LONG
            return _ended(outcome, PointStatus.FAILED, failure, cut_reason(result.records),
                          f"{cut[0].error}. " + fix_words(needed, facts.context_length or point.settings.context_length,
                                                          plan.output_cap, price_words))
        if stats.requests_ok == 0:
            kind = next(iter(stats.errors), "other")
            return _ended(outcome, PointStatus.FAILED, request_failure(stats.errors),
                          f"{EVERY_REQUEST_FAILED} ({ERROR_WORDS.get(kind, kind)})",
                          stats.first_error)
        if stats.success_rate < spec.targets.min_success:
            failures = ", ".join(f"{ERROR_WORDS.get(k, k)} ×{n}" for k, n in sorted(stats.errors.items()))
            return _ended(outcome, PointStatus.UNSTABLE, request_failure(stats.errors, most_common=True),
                          f"{stats.requests_failed} of {stats.requests} failed ({failures})",
                          stats.first_error)
        if contention.contended:
            # Measured while something else took the device: the numbers are not this setting's alone.
            return _ended(outcome, PointStatus.UNSTABLE, FailureKind.CONTENDED, contention.short_text(),
                          contention.text())
        return _ended(outcome, PointStatus.OK, None, ON_CPU_REASON if on_cpu else "",
                      "The server has no GPU (none can be read here and it holds nothing in VRAM), so it runs on the "
                      "CPU by design; this point was measured there." if on_cpu else "")

    async def _scenario_maker(self, plan: LoadPlan, counter: PromptTokenCounter | None,
                              report: Callable[[str, str, float], None]) -> PromptMaker | None:
        """The maker of a scenario's prompt texts: calibrated on the model in use where the server counts tokens
        (once per model and run, not per point: a tokenizer does not change with the settings), so requested and
        delivered lengths are in the server's tokens and a prompt the server cut is told; else an estimate."""
        scenario = plan.scenario
        if scenario is None or all(c.text for c in scenario.classes):
            return self._prompt_maker
        if plan.model in self._makers:
            return self._makers[plan.model]
        maker = self._prompt_maker if self._prompt_maker is not None else CorpusPromptMaker(bundled_corpus())
        if counter is None or maker.calibrated or not isinstance(maker, CorpusPromptMaker):
            self._makers[plan.model] = maker
            return maker
        pieces = None if counter.counts_whole_prompts else PROBED_PIECES
        report("calibrating", "counting the prompt corpus in the model's tokens", SETUP_SHARE / 4)
        try:
            made: PromptMaker = (await calibrate(counter, plan.model, maker.corpus, max_chunks=pieces)).maker()
        except (ServerError, ValueError) as exc:
            report("calibrating", "the server could not count the corpus "
                   f"({getattr(exc, 'message', exc)}): prompt lengths are estimated", SETUP_SHARE / 4)
            made = maker
        self._makers[plan.model] = made
        return made

    async def _loaded(self, client: ModelCatalog, model: str) -> RunningModel | None:
        """The model as the server lists it loaded (the list goes to the watchdog: layers on the CPU, a model
        that left memory)."""
        models = await client.ps()
        self._watch.loaded(models)
        return next((m for m in models if _name_matches(model, m.name)), None)

    def _crash_reason(self) -> str:
        sup = self._supervisor
        if sup is None or sup.status.state is not ServerState.CRASHED:
            return ""
        return f"the server crashed: {sup.status.message}"

    def _eta(self, durations: list[float], n: int, index: int, within: float, elapsed: float) -> float | None:
        """Seconds left: finished points' mean time for the points to come, and this point's own pace."""
        remaining_points = n - index - 1
        if within >= SETUP_SHARE + 0.05:
            this_left = elapsed / within * (1 - within)
            per_point = sum(durations) / len(durations) if durations else elapsed / within
            return this_left + per_point * remaining_points
        if durations:
            per_point = sum(durations) / len(durations)
            return max(0.0, per_point - elapsed) + per_point * remaining_points
        return None

    async def _restore(self, original: ServerSettings | None, was_running: bool,
                       progress: Callable[[SweepProgress], None], n_points: int) -> None:
        """Put the server back as it was; shielded, so a second cancel cannot interrupt it."""
        sup = self._supervisor
        if original is None or sup is None:
            return
        progress(SweepProgress(n_points, n_points, "restoring", "", "Putting the server back as it was…", 1.0, None))

        async def restore() -> None:
            if was_running:
                if sup.settings != original or sup.status.state is not ServerState.RUNNING_MANAGED:
                    await sup.restart(original)
            else:
                if sup.status.state in (ServerState.RUNNING_MANAGED, ServerState.STARTING):
                    await sup.stop()
                sup.settings = original

        task = asyncio.ensure_future(restore())
        interrupted = False
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                interrupted = True  # finish restoring first, then let the cancellation through
        task.result()
        if interrupted:
            raise asyncio.CancelledError


def asked_of(spec: SweepSpec, point: SweepPoint, launch: LaunchPlan | None, verdict: Verdict | None) -> Asked:
    """What the server is held to at a point: on a server the sweep manages, the point's parallel and context
    (else the planned launch's) and whether it was priced to fit on the GPU; on an attached one only the model
    (its settings are its own)."""
    if not spec.managed:
        return Asked(model=spec.workload.model)
    fits = None if verdict is None or verdict not in (Verdict.FITS, Verdict.TIGHT, Verdict.SPILLS,
                                                      Verdict.WONT_LOAD) \
        else verdict in (Verdict.FITS, Verdict.TIGHT)
    return Asked.of(point.settings.num_parallel, point.settings.context_length,
                    planned_parallel=launch.parallel if launch is not None else None,
                    planned_context=launch.num_ctx if launch is not None else None, fits_on_gpu=fits,
                    model=spec.workload.model)


def watched(result: PointResult, events: Sequence[WatchEvent]) -> PointResult:
    """A point's outcome with its events; one that ran fine but saw an event that spoils a measurement is
    unstable, for that (FailureKind.SPOILED, the kinds in PointResult.spoiled_by); any other outcome stays."""
    result = replace(result, events=tuple(events))
    if result.status is not PointStatus.OK or not result.spoiled:
        return result
    first = next(e for e in result.events if e.spoils_measurement)
    detail = " ".join(x for x in (f"{first.kind.label}: {first.summary}", result.detail) if x)
    return replace(result, status=PointStatus.UNSTABLE, failure=FailureKind.SPOILED,
                   reason=spoiled_reason(result.spoiled_by), detail=detail)


__all__ = ["BALANCER_NOT_MANAGED", "ClassProgress", "SweepProgress", "SweepRunner", "asked_of", "now_iso", "watched"]
